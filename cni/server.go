package cni

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"sync"
	"time"

	"github.com/containernetworking/cni/pkg/types"
	current "github.com/containernetworking/cni/pkg/types/100"
	"k8s.io/klog/v2"

	"github.com/nodenet/nodenet/cni/api"
	"github.com/nodenet/nodenet/ipam"
)

// Defaults of ServerOptions.
const (
	// DefaultRequestTimeout bounds one request's work in the agent.
	DefaultRequestTimeout = 2 * time.Minute
	// gcGrace protects attachments added this recently from GC: the
	// runtime's valid-attachments list may predate an ADD that raced it.
	gcGrace = time.Minute
)

// ServerOptions configure a Server.
type ServerOptions struct {
	// SocketPath is the unix socket to listen on (config cni.socketPath).
	SocketPath string
	// IPAMDir holds the IPAM stores: the store of network N is IPAMDir/N,
	// host-local's layout.
	IPAMDir string
	// Wiring connects pods to the node network.
	Wiring Wiring
	// MaxRequestBytes bounds a request body. Default:
	// api.DefaultMaxRequestBytes.
	MaxRequestBytes int64
	// RequestTimeout bounds one request's work. Default:
	// DefaultRequestTimeout.
	RequestTimeout time.Duration
	// Logger logs one line per request. Default: klog.Background().
	Logger *klog.Logger
	// Now is the clock (tests). Default: time.Now.
	Now func() time.Time
}

// Server is the agent side of nodenet's CNI: it serves the plugin's
// requests, allocates addresses and has the Wiring connect pods. Until
// SetNetwork is called it answers ADD, CHECK, DEL and GC with code 11 (try
// again later) and STATUS with code 50, so no pod is wired into a network
// that doesn't exist yet.
type Server struct {
	opts  ServerOptions
	log   klog.Logger
	locks keyLock

	// mu guards nw and alloc. Requests hold it for reading while they run,
	// so SetNetwork never closes an allocator under a request.
	mu    sync.RWMutex
	nw    *NodeNetwork
	alloc *ipam.Allocator

	recentMu sync.Mutex
	recent   map[Attachment]time.Time // when ADD last succeeded, for GC
}

// NewServer checks opts and returns a Server with no network yet.
func NewServer(opts ServerOptions) (*Server, error) {
	if opts.SocketPath == "" {
		return nil, errors.New("cni server: socket path is empty")
	}
	if opts.IPAMDir == "" {
		return nil, errors.New("cni server: IPAM directory is empty")
	}
	if opts.Wiring == nil {
		return nil, errors.New("cni server: no pod wiring")
	}
	if opts.MaxRequestBytes <= 0 {
		opts.MaxRequestBytes = api.DefaultMaxRequestBytes
	}
	if opts.RequestTimeout <= 0 {
		opts.RequestTimeout = DefaultRequestTimeout
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	log := klog.Background()
	if opts.Logger != nil {
		log = *opts.Logger
	}
	return &Server{opts: opts, log: log.WithName("cni"), recent: map[Attachment]time.Time{}}, nil
}

// SetNetwork hands the server the node network once it exists (and again
// whenever it changes): from then on ADDs are served from its pod CIDRs.
// The source VIP and the other Reserved addresses are reserved in IPAM.
func (s *Server) SetNetwork(nw *NodeNetwork) error {
	ranges, err := ipamRanges(nw)
	if err != nil {
		return err
	}
	alloc, err := ipam.New(ipam.Options{DataDir: s.opts.IPAMDir, Network: nw.Name, Ranges: ranges})
	if err != nil {
		return fmt.Errorf("open IPAM for network %q: %w", nw.Name, err)
	}
	nwCopy := *nw
	s.mu.Lock()
	old := s.alloc
	s.nw, s.alloc = &nwCopy, alloc
	s.mu.Unlock()
	if old != nil {
		_ = old.Close()
	}
	s.log.Info("Node network set", "network", nw.Name, "mode", nw.Mode, "podCIDRs", nw.PodCIDRs, "mtu", nw.MTU)
	return nil
}

// Close releases the IPAM store.
func (s *Server) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.alloc == nil {
		return nil
	}
	err := s.alloc.Close()
	s.alloc, s.nw = nil, nil
	return err
}

func ipamRanges(nw *NodeNetwork) ([]ipam.Range, error) {
	if nw == nil || nw.Name == "" {
		return nil, errors.New("node network has no name")
	}
	if len(nw.PodCIDRs) == 0 {
		return nil, fmt.Errorf("node network %q has no pod CIDR", nw.Name)
	}
	if len(nw.Gateways) != len(nw.PodCIDRs) {
		return nil, fmt.Errorf("node network %q has %d gateways for %d pod CIDRs", nw.Name, len(nw.Gateways), len(nw.PodCIDRs))
	}
	ranges := make([]ipam.Range, 0, len(nw.PodCIDRs))
	for i, cidr := range nw.PodCIDRs {
		r := ipam.Range{Subnet: cidr, Gateway: nw.Gateways[i]}
		for _, ip := range nw.reserved() {
			if cidr.Contains(ip) && !slices.Contains(r.Reserved, ip) {
				r.Reserved = append(r.Reserved, ip)
			}
		}
		ranges = append(ranges, r)
	}
	return ranges, nil
}

// Handle serves one request. It is the transport-free core of the server.
func (s *Server) Handle(ctx context.Context, req *api.Request) *api.Response {
	start := s.opts.Now()
	resp := s.handle(ctx, req)
	log := s.log.WithValues("command", req.Command, "containerID", req.ContainerID, "ifname", req.IfName, "duration", s.opts.Now().Sub(start))
	if resp.Error != nil {
		log.Info("CNI request failed", "code", resp.Error.Code, "error", resp.Error.Msg)
	} else {
		log.V(2).Info("CNI request done")
	}
	return resp
}

func (s *Server) handle(ctx context.Context, req *api.Request) *api.Response {
	if err := checkRequest(req); err != nil {
		return &api.Response{Error: err}
	}
	conf, cerr := ParseNetConf(req.Config)
	if cerr != nil {
		return &api.Response{Error: cerr}
	}
	// A runtime that gives up on a request must not leave it half done:
	// finish (or roll back) within the server's own deadline.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.opts.RequestTimeout)
	defer cancel()

	s.mu.RLock()
	defer s.mu.RUnlock()
	switch req.Command {
	case api.CommandAdd:
		res, err := s.add(ctx, req, conf)
		if err != nil {
			return &api.Response{Error: toCNIError("add", err)}
		}
		raw, err := json.Marshal(res)
		if err != nil {
			return &api.Response{Error: api.Errorf(types.ErrInternal, "add: encode result: %v", err)}
		}
		return &api.Response{Result: raw}
	case api.CommandDel:
		return errorResponse("del", s.del(ctx, req, conf))
	case api.CommandCheck:
		return errorResponse("check", s.check(ctx, req, conf))
	case api.CommandGC:
		return errorResponse("gc", s.gc(ctx, conf))
	case api.CommandStatus:
		if err := s.status(ctx); err != nil {
			return &api.Response{Error: api.Errorf(types.ErrPluginNotAvailable, "status: %v", err)}
		}
		return &api.Response{}
	}
	return &api.Response{Error: api.Errorf(types.ErrInvalidEnvironmentVariables, "unknown CNI_COMMAND %q", req.Command)}
}

func errorResponse(op string, err error) *api.Response {
	if err == nil {
		return &api.Response{}
	}
	return &api.Response{Error: toCNIError(op, err)}
}

// add allocates the pod's addresses and wires it. Anything it did is
// undone when a step fails: no leaked IP, interface or endpoint.
func (s *Server) add(ctx context.Context, req *api.Request, conf *NetConf) (*current.Result, error) {
	if s.nw == nil {
		return nil, errNotReady
	}
	pod, cerr := podFromRequest(req, conf)
	if cerr != nil {
		return nil, cerr
	}
	defer s.locks.lock(req.ContainerID)()

	allocs, err := s.alloc.Allocate(pod.ContainerID, pod.IfName)
	if err != nil {
		return nil, wrapf(err, "allocate addresses")
	}
	pod.Addresses = addressesOf(allocs)
	res, err := s.opts.Wiring.Add(ctx, s.nw, pod)
	if err != nil {
		s.rollbackAdd(ctx, pod)
		if readyErr := s.opts.Wiring.Ready(ctx, s.nw); readyErr != nil {
			return nil, fmt.Errorf("%w: %v", errNotReady, readyErr)
		}
		return nil, wrapf(err, "wire pod")
	}
	res.CNIVersion = current.ImplementedSpecVersion
	s.recentMu.Lock()
	s.recent[pod.Attachment] = s.opts.Now()
	s.recentMu.Unlock()
	return res, nil
}

// rollbackAdd undoes a failed ADD: the wiring has undone its own partial
// work, but an earlier attempt of the same ADD may have left some.
func (s *Server) rollbackAdd(ctx context.Context, pod *Pod) {
	if err := s.opts.Wiring.Del(ctx, s.nw, pod); err != nil {
		s.log.Error(err, "Rolling back a failed ADD: unwiring the pod", "containerID", pod.ContainerID, "ifname", pod.IfName)
	}
	if err := s.alloc.Release(pod.ContainerID, pod.IfName); err != nil {
		s.log.Error(err, "Rolling back a failed ADD: releasing addresses", "containerID", pod.ContainerID, "ifname", pod.IfName)
	}
}

// del unwires the pod and releases its addresses; unknown pods succeed.
func (s *Server) del(ctx context.Context, req *api.Request, conf *NetConf) error {
	if s.nw == nil {
		// IPAM isn't open yet: answering success would leak the addresses.
		return errNotReady
	}
	pod, cerr := podFromRequest(req, conf)
	if cerr != nil {
		return cerr
	}
	defer s.locks.lock(req.ContainerID)()
	return s.unwire(ctx, pod)
}

func (s *Server) unwire(ctx context.Context, pod *Pod) error {
	if err := s.opts.Wiring.Del(ctx, s.nw, pod); err != nil {
		return wrapf(err, "unwire pod")
	}
	if err := s.alloc.Release(pod.ContainerID, pod.IfName); err != nil {
		return wrapf(err, "release addresses")
	}
	s.recentMu.Lock()
	delete(s.recent, pod.Attachment)
	s.recentMu.Unlock()
	return nil
}

// check compares the pod with what ADD made.
func (s *Server) check(ctx context.Context, req *api.Request, conf *NetConf) error {
	if s.nw == nil {
		return errNotReady
	}
	prev, err := prevResult(conf)
	if err != nil {
		return api.Errorf(types.ErrDecodingFailure, "prevResult: %v", err)
	}
	if prev == nil {
		return api.Errorf(types.ErrInvalidNetworkConfig, "CHECK needs the ADD result as prevResult")
	}
	pod, cerr := podFromRequest(req, conf)
	if cerr != nil {
		return cerr
	}
	defer s.locks.lock(req.ContainerID)()
	allocs, err := s.alloc.Get(pod.ContainerID, pod.IfName)
	if err != nil {
		return wrapf(err, "read allocations")
	}
	if len(allocs) == 0 {
		return api.Errorf(types.ErrUnknownContainer, "no addresses are allocated to container %s interface %s", pod.ContainerID, pod.IfName)
	}
	pod.Addresses = addressesOf(allocs)
	if err := checkPrevIPs(prev, pod.Addresses); err != nil {
		return err
	}
	return s.opts.Wiring.Check(ctx, s.nw, pod, prev)
}

// checkPrevIPs reports a prevResult whose IPs differ from the allocations.
func checkPrevIPs(prev *current.Result, addrs []Address) error {
	want := map[netip.Addr]bool{}
	for _, a := range addrs {
		want[a.IP.Addr()] = true
	}
	got := map[netip.Addr]bool{}
	for _, ipc := range prev.IPs {
		a, ok := netip.AddrFromSlice(ipc.Address.IP)
		if !ok {
			return fmt.Errorf("prevResult has an invalid address %v", ipc.Address)
		}
		got[a.Unmap()] = true
	}
	for a := range want {
		if !got[a] {
			return fmt.Errorf("allocated address %s is missing from prevResult", a)
		}
	}
	for a := range got {
		if !want[a] {
			return fmt.Errorf("prevResult address %s is not allocated to this pod", a)
		}
	}
	return nil
}

// gc releases every allocation and wiring whose attachment the runtime
// no longer lists.
func (s *Server) gc(ctx context.Context, conf *NetConf) error {
	if s.nw == nil {
		return errNotReady
	}
	start := s.opts.Now()
	valid := map[Attachment]bool{}
	for _, a := range conf.ValidAttachments {
		valid[Attachment{ContainerID: a.ContainerID, IfName: a.IfName}] = true
	}
	allocs, err := s.alloc.List()
	if err != nil {
		return wrapf(err, "list allocations")
	}
	wired, err := s.opts.Wiring.List(ctx, s.nw)
	if err != nil {
		return wrapf(err, "list wired pods")
	}
	seen := map[Attachment]bool{}
	var errs []error
	collect := func(a Attachment) {
		if valid[a] || seen[a] {
			return
		}
		seen[a] = true
		unlock := s.locks.lock(a.ContainerID)
		defer unlock()
		if s.addedSince(a, start.Add(-gcGrace)) {
			return
		}
		s.log.Info("GC: releasing an attachment the runtime no longer lists", "containerID", a.ContainerID, "ifname", a.IfName)
		if err := s.unwire(ctx, &Pod{Attachment: a}); err != nil {
			errs = append(errs, fmt.Errorf("container %s interface %s: %w", a.ContainerID, a.IfName, err))
		}
	}
	validContainers := map[string]bool{}
	for a := range valid {
		validContainers[a.ContainerID] = true
	}
	for _, a := range allocs {
		switch {
		case a.ContainerID == "":
			// An empty file from a crash mid-write (host-local has the same
			// gap): nothing names its owner, so leave it to the operator.
			continue
		case s.isReserved(a.IP):
			// Migrated nodes hold the source VIP under a dummy ID from the
			// old startup scripts; releasing it would let host-local hand
			// it to a pod after a rollback.
			continue
		case a.IfName == "":
			// Written by an old host-local: it belongs to every interface
			// of its container, and can't be released by attachment.
			if !validContainers[a.ContainerID] {
				s.log.Info("GC: an old-format allocation belongs to a container the runtime no longer lists; remove it by hand", "containerID", a.ContainerID, "ip", a.IP)
			}
			continue
		}
		collect(Attachment{ContainerID: a.ContainerID, IfName: a.IfName})
	}
	for _, a := range wired {
		collect(a)
	}
	return errors.Join(errs...)
}

// isReserved reports whether ip is one of the addresses IPAM never hands
// out (gateways, source VIP).
func (s *Server) isReserved(ip netip.Addr) bool {
	return slices.Contains(s.nw.reserved(), ip) || slices.Contains(s.nw.Gateways, ip)
}

func (s *Server) addedSince(a Attachment, t time.Time) bool {
	s.recentMu.Lock()
	defer s.recentMu.Unlock()
	added, ok := s.recent[a]
	return ok && added.After(t)
}

// status says whether an ADD could succeed now.
func (s *Server) status(ctx context.Context) error {
	if s.nw == nil {
		return errors.New("the nodenet agent has not set up the node network yet")
	}
	if err := s.opts.Wiring.Ready(ctx, s.nw); err != nil {
		return err
	}
	free, err := s.alloc.Free()
	if err != nil {
		return wrapf(err, "count free addresses")
	}
	for cidr, n := range free {
		if n == 0 {
			return fmt.Errorf("no free address in pod CIDR %s", cidr)
		}
	}
	return nil
}

func addressesOf(allocs []ipam.Allocation) []Address {
	out := make([]Address, 0, len(allocs))
	for _, a := range allocs {
		out = append(out, Address{IP: netip.PrefixFrom(a.IP, a.Subnet.Bits()), Gateway: a.Gateway})
	}
	return out
}
