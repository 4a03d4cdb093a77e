package hnsendpoint

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/containernetworking/cni/pkg/types"
	current "github.com/containernetworking/cni/pkg/types/100"

	"github.com/nodenet/nodenet/cni"
	"github.com/nodenet/nodenet/hns"
)

// rollbackTimeout bounds the calls that undo a failed Add; they run even
// when the caller's context is done, so a cancelled ADD leaks nothing.
const rollbackTimeout = 30 * time.Second

// maxDuplicates bounds how many endpoints of one name Del removes (HNS
// does not enforce unique endpoint names; a create that failed after HNS
// committed it can leave a second one).
const maxDuplicates = 8

// Options configures a Wiring.
type Options struct {
	// HNS is the host's HNS: the hcn client on Windows, a Simulator in
	// tests and with --dataplane=sim. Required.
	HNS hns.Interface
	// MACPrefix is the "xx-xx" the endpoint MACs derived from pod IPs
	// start with (win-overlay's endpointMacPrefix). Default
	// DefaultMACPrefix.
	MACPrefix string
}

// Wiring connects pods to the node's HNS network: one local HNS endpoint per
// attachment, attached to the pod's HCN namespace. It implements cni.Wiring
// and is safe for concurrent use (the CNI server serializes calls per
// container ID).
type Wiring struct {
	hns       hns.Interface
	macPrefix string

	featMu sync.Mutex
	feat   *hns.Features // cached after the first successful query
}

var _ cni.Wiring = (*Wiring)(nil)

// New returns a Wiring over opts.HNS.
func New(opts Options) (*Wiring, error) {
	if opts.HNS == nil {
		return nil, errors.New("hnsendpoint: Options.HNS is required")
	}
	if opts.MACPrefix == "" {
		opts.MACPrefix = DefaultMACPrefix
	}
	if !validMACPrefix(opts.MACPrefix) {
		return nil, fmt.Errorf("hnsendpoint: MAC prefix %q is invalid, want two hex bytes as xx-xx (e.g. %s)", opts.MACPrefix, DefaultMACPrefix)
	}
	return &Wiring{hns: opts.HNS, macPrefix: strings.ToUpper(opts.MACPrefix)}, nil
}

// Ready returns nil when the HNS network nw describes exists with the type
// of nw.Mode and subnets covering nw.PodCIDRs.
func (w *Wiring) Ready(ctx context.Context, nw *cni.NodeNetwork) error {
	_, err := w.network(ctx, nw)
	return err
}

// network finds the node network (by ID when nw has one, else by name)
// and checks it against nw.
func (w *Wiring) network(ctx context.Context, nw *cni.NodeNetwork) (*hns.Network, error) {
	if nw == nil {
		return nil, errors.New("no node network")
	}
	want, err := networkType(nw.Mode)
	if err != nil {
		return nil, err
	}
	var n *hns.Network
	switch {
	case nw.ID != "":
		n, err = w.hns.GetNetworkByID(ctx, nw.ID)
		if err != nil {
			return nil, fmt.Errorf("hns network %q (id %s): %w", nw.Name, nw.ID, err)
		}
		if nw.Name != "" && !strings.EqualFold(n.Name, nw.Name) {
			return nil, fmt.Errorf("hns network id %s is named %q, want %q", nw.ID, n.Name, nw.Name)
		}
	case nw.Name != "":
		n, err = w.hns.GetNetworkByName(ctx, nw.Name)
		if err != nil {
			return nil, fmt.Errorf("hns network %q: %w", nw.Name, err)
		}
	default:
		return nil, errors.New("the node network has neither an HNS network name nor an id")
	}
	if n.Type != want {
		return nil, fmt.Errorf("hns network %q is of type %s, but network mode %s needs %s", n.Name, n.Type, nw.Mode, want)
	}
	// HNS returns from CreateNetwork before an Overlay network is usable;
	// its provider address (the management IP, which win-overlay gives
	// pods as their PA and flannel's vxlan backend waits for) comes later.
	// Until then the network is not ready and ADD answers "try again
	// later" (CNI code 11).
	if n.Type == hns.NetworkTypeOverlay && !hasProviderAddress(n) {
		return nil, fmt.Errorf("hns network %q is not ready yet: HNS has not reported its provider address (management IP)", n.Name)
	}
	var subnets []netip.Prefix
	for _, sn := range n.Subnets() {
		if p, err := netip.ParsePrefix(sn.IpAddressPrefix); err == nil {
			subnets = append(subnets, p.Masked())
		}
	}
	for _, cidr := range nw.PodCIDRs {
		if !slices.ContainsFunc(subnets, func(s netip.Prefix) bool { return s.Bits() <= cidr.Bits() && s.Contains(cidr.Addr()) }) {
			return nil, fmt.Errorf("hns network %q has no subnet covering pod CIDR %s (subnets %v)", n.Name, cidr, subnets)
		}
	}
	return n, nil
}

// dsrSupported reports whether the host's HNS has DSR (loopback DSR needs it).
func (w *Wiring) dsrSupported(ctx context.Context) (bool, error) {
	w.featMu.Lock()
	defer w.featMu.Unlock()
	if w.feat == nil {
		f, err := w.hns.Features(ctx)
		if err != nil {
			return false, fmt.Errorf("query hns features: %w", err)
		}
		w.feat = &f
	}
	return w.feat.DSR, nil
}

// Add creates (or finds) the pod's endpoint and attaches it to the pod's
// namespace. Retried for the same attachment it makes no HNS writes when
// the endpoint is in place, only reattaches a detached one, and replaces
// one that differs from what it would create (another IP, another network,
// changed policies). On failure it removes the endpoint it created.
func (w *Wiring) Add(ctx context.Context, nw *cni.NodeNetwork, pod *cni.Pod) (*current.Result, error) {
	name, err := EndpointName(pod.Attachment)
	if err != nil {
		return nil, err
	}
	nsID, err := parseNamespaceID(pod.Netns)
	if err != nil {
		return nil, err
	}
	n, err := w.network(ctx, nw)
	if err != nil {
		return nil, err
	}
	want, err := w.desiredEndpoint(ctx, nw, pod, name, n.ID)
	if err != nil {
		return nil, err
	}
	if _, err := w.hns.GetNamespace(ctx, nsID); err != nil {
		if hns.IsNotFound(err) {
			return nil, fmt.Errorf("hcn namespace %s: %w: %w", nsID, cni.ErrNetnsNotFound, err)
		}
		return nil, fmt.Errorf("hcn namespace %s: %w", nsID, err)
	}

	ep, err := w.hns.GetEndpointByName(ctx, name)
	switch {
	case hns.IsNotFound(err):
		ep = nil
	case err != nil:
		return nil, fmt.Errorf("look up endpoint %s: %w", name, err)
	default:
		if drift := diffEndpoint(want, ep); len(drift) > 0 {
			// Stale: an earlier ADD with another address, network or
			// policy set. Replace it.
			if err := w.remove(ctx, ep); err != nil {
				return nil, fmt.Errorf("replace stale endpoint %s (%s): %w", name, strings.Join(drift, "; "), err)
			}
			ep = nil
		}
	}

	created := false
	if ep == nil {
		ep, err = w.hns.CreateEndpoint(ctx, want)
		if err != nil {
			err = fmt.Errorf("create endpoint %s: %w", name, err)
			// HNS may have committed the endpoint before failing (an RPC
			// timeout): nothing else of this name exists now, so any
			// endpoint by that name is this call's.
			return nil, withRollback(err, w.rollbackByName(ctx, name))
		}
		created = true
	}

	if !strings.EqualFold(ep.HostComputeNamespace, nsID) {
		if err := w.attach(ctx, ep, nsID); err != nil {
			if created {
				err = withRollback(err, w.rollback(ctx, ep.ID, nsID))
			}
			return nil, err
		}
	}
	return result(pod, ep), nil
}

// attach moves ep into namespace nsID, detaching it first from the
// namespace it is in (a sandbox recreated under the same container ID).
func (w *Wiring) attach(ctx context.Context, ep *hns.Endpoint, nsID string) error {
	if old := ep.HostComputeNamespace; old != "" {
		if err := w.hns.RemoveNamespaceEndpoint(ctx, old, ep.ID); err != nil && !hns.IsNotFound(err) {
			return fmt.Errorf("detach endpoint %s from its old namespace %s: %w", ep.Name, old, err)
		}
	}
	if err := w.hns.AddNamespaceEndpoint(ctx, nsID, ep.ID); err != nil {
		if hns.IsNotFound(err) {
			if _, nsErr := w.hns.GetNamespace(ctx, nsID); hns.IsNotFound(nsErr) {
				err = fmt.Errorf("%w: %w", cni.ErrNetnsNotFound, err)
			}
		}
		return fmt.Errorf("attach endpoint %s to hcn namespace %s: %w", ep.Name, nsID, err)
	}
	return nil
}

// withRollback adds a failed rollback's error to err.
func withRollback(err, rollbackErr error) error {
	if rollbackErr == nil {
		return err
	}
	return errors.Join(err, rollbackErr)
}

// rollback undoes this call's endpoint: detach (it may be attached when
// HNS committed the attach but reported failure), then delete.
func (w *Wiring) rollback(ctx context.Context, epID, nsID string) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), rollbackTimeout)
	defer cancel()
	var errs []error
	if err := w.hns.RemoveNamespaceEndpoint(ctx, nsID, epID); err != nil && !hns.IsNotFound(err) {
		errs = append(errs, fmt.Errorf("rollback: detach endpoint %s: %w", epID, err))
	}
	if err := w.hns.DeleteEndpoint(ctx, epID); err != nil && !hns.IsNotFound(err) {
		errs = append(errs, fmt.Errorf("rollback: delete endpoint %s: %w", epID, err))
	}
	return errors.Join(errs...)
}

// rollbackByName deletes an endpoint a failed create may have left.
func (w *Wiring) rollbackByName(ctx context.Context, name string) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), rollbackTimeout)
	defer cancel()
	if err := w.removeAll(ctx, name); err != nil {
		return fmt.Errorf("rollback: %w", err)
	}
	return nil
}

// remove detaches ep from its namespace and deletes it; absent is success.
func (w *Wiring) remove(ctx context.Context, ep *hns.Endpoint) error {
	if ns := ep.HostComputeNamespace; ns != "" {
		if err := w.hns.RemoveNamespaceEndpoint(ctx, ns, ep.ID); err != nil && !hns.IsNotFound(err) {
			return fmt.Errorf("detach endpoint %s (%s) from hcn namespace %s: %w", ep.Name, ep.ID, ns, err)
		}
	}
	if err := w.hns.DeleteEndpoint(ctx, ep.ID); err != nil && !hns.IsNotFound(err) {
		if hns.IsInUse(err) {
			return fmt.Errorf("delete endpoint %s (%s): a load balancer still uses it; retry once the service proxy has released it: %w", ep.Name, ep.ID, err)
		}
		return fmt.Errorf("delete endpoint %s (%s): %w", ep.Name, ep.ID, err)
	}
	return nil
}

// removeAll removes every endpoint named name.
func (w *Wiring) removeAll(ctx context.Context, name string) error {
	for range maxDuplicates {
		ep, err := w.hns.GetEndpointByName(ctx, name)
		if hns.IsNotFound(err) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("look up endpoint %s: %w", name, err)
		}
		if err := w.remove(ctx, ep); err != nil {
			return err
		}
	}
	return fmt.Errorf("endpoint %s: still present after deleting %d endpoints of that name", name, maxDuplicates)
}

// Del detaches the pod's endpoint from its namespace and deletes it. It
// finds the endpoint by name, so it works without pod.Netns, and succeeds
// when the endpoint is gone. An endpoint a load balancer still uses fails
// with an error hns.IsInUse recognizes (the server answers "try again
// later").
func (w *Wiring) Del(ctx context.Context, nw *cni.NodeNetwork, pod *cni.Pod) error {
	name, err := EndpointName(pod.Attachment)
	if err != nil {
		// EndpointName never made a name for this attachment, so
		// nothing of it can exist.
		return nil
	}
	return w.removeAll(ctx, name)
}

// Check compares the pod's endpoint with what Add would make now and with
// prev, and returns an error naming every difference.
func (w *Wiring) Check(ctx context.Context, nw *cni.NodeNetwork, pod *cni.Pod, prev *current.Result) error {
	name, err := EndpointName(pod.Attachment)
	if err != nil {
		return err
	}
	nsID, err := parseNamespaceID(pod.Netns)
	if err != nil {
		return err
	}
	n, err := w.network(ctx, nw)
	if err != nil {
		return err
	}
	want, err := w.desiredEndpoint(ctx, nw, pod, name, n.ID)
	if err != nil {
		return err
	}
	ep, err := w.hns.GetEndpointByName(ctx, name)
	if err != nil {
		if hns.IsNotFound(err) {
			return fmt.Errorf("endpoint %s of container %s interface %s does not exist: %w", name, pod.ContainerID, pod.IfName, err)
		}
		return fmt.Errorf("look up endpoint %s: %w", name, err)
	}
	drift := diffEndpoint(want, ep)
	switch {
	case ep.HostComputeNamespace == "":
		drift = append(drift, fmt.Sprintf("not attached to any namespace, want %s", nsID))
	case !strings.EqualFold(ep.HostComputeNamespace, nsID):
		drift = append(drift, fmt.Sprintf("attached to namespace %s, want %s", ep.HostComputeNamespace, nsID))
	}
	ns, err := w.hns.GetNamespace(ctx, nsID)
	switch {
	case hns.IsNotFound(err):
		return fmt.Errorf("hcn namespace %s: %w: %w", nsID, cni.ErrNetnsNotFound, err)
	case err != nil:
		return fmt.Errorf("hcn namespace %s: %w", nsID, err)
	case !slices.ContainsFunc(ns.EndpointIDs, func(id string) bool { return strings.EqualFold(id, ep.ID) }):
		drift = append(drift, fmt.Sprintf("namespace %s does not list the endpoint", nsID))
	}
	drift = append(drift, diffPrev(prev, pod, ep, nsID)...)
	if len(drift) > 0 {
		return fmt.Errorf("endpoint %s (%s) differs from what ADD set: %s", name, ep.ID, strings.Join(drift, "; "))
	}
	return nil
}

// diffPrev compares the ADD result the runtime kept with the endpoint.
func diffPrev(prev *current.Result, pod *cni.Pod, ep *hns.Endpoint, nsID string) []string {
	if prev == nil {
		return nil
	}
	var d []string
	idx := slices.IndexFunc(prev.Interfaces, func(i *current.Interface) bool { return i != nil && i.Name == pod.IfName })
	if idx < 0 {
		return append(d, fmt.Sprintf("prevResult has no interface %s", pod.IfName))
	}
	iface := prev.Interfaces[idx]
	if iface.Mac != "" && !sameMAC(iface.Mac, ep.MacAddress) {
		d = append(d, fmt.Sprintf("prevResult MAC is %s, endpoint has %s", iface.Mac, orNone(ep.MacAddress)))
	}
	if iface.Sandbox != "" {
		if id, err := parseNamespaceID(iface.Sandbox); err != nil || !strings.EqualFold(id, nsID) {
			d = append(d, fmt.Sprintf("prevResult sandbox is %s, want %s", iface.Sandbox, nsID))
		}
	}
	var have []string
	for _, c := range ep.IpConfigurations {
		have = append(have, c.IpAddress)
	}
	for _, ipc := range prev.IPs {
		if ipc.Interface != nil && *ipc.Interface != idx {
			continue
		}
		a, ok := netip.AddrFromSlice(ipc.Address.IP)
		if !ok || !slices.Contains(have, a.Unmap().String()) {
			d = append(d, fmt.Sprintf("prevResult address %s is not on the endpoint", ipc.Address.IP))
		}
	}
	return d
}

// List returns the attachments of every endpoint on the node network that
// is named by EndpointName, sorted. A missing network has none.
func (w *Wiring) List(ctx context.Context, nw *cni.NodeNetwork) ([]cni.Attachment, error) {
	if nw == nil {
		return nil, errors.New("no node network")
	}
	id := nw.ID
	if id == "" {
		n, err := w.hns.GetNetworkByName(ctx, nw.Name)
		if hns.IsNotFound(err) {
			return nil, nil
		}
		if err != nil {
			return nil, fmt.Errorf("hns network %q: %w", nw.Name, err)
		}
		id = n.ID
	}
	eps, err := w.hns.ListEndpoints(ctx, id)
	if err != nil {
		return nil, fmt.Errorf("list endpoints of hns network %s: %w", id, err)
	}
	seen := map[cni.Attachment]bool{}
	var out []cni.Attachment
	for _, ep := range eps {
		if ep.IsRemote() || !strings.EqualFold(ep.HostComputeNetwork, id) {
			continue
		}
		if a, ok := ParseEndpointName(ep.Name); ok && !seen[a] {
			seen[a] = true
			out = append(out, a)
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].ContainerID != out[j].ContainerID {
			return out[i].ContainerID < out[j].ContainerID
		}
		return out[i].IfName < out[j].IfName
	})
	return out, nil
}

// result is the CNI result for pod's endpoint ep.
func result(pod *cni.Pod, ep *hns.Endpoint) *current.Result {
	mac := ep.MacAddress
	if hw, err := net.ParseMAC(mac); err == nil {
		mac = hw.String()
	}
	res := &current.Result{
		CNIVersion: current.ImplementedSpecVersion,
		Interfaces: []*current.Interface{{Name: pod.IfName, Mac: mac, Sandbox: pod.Netns}},
		DNS: types.DNS{
			Nameservers: slices.Clone(ep.DNS.ServerList),
			Domain:      ep.DNS.Domain,
			Search:      slices.Clone(ep.DNS.Search),
			Options:     slices.Clone(ep.DNS.Options),
		},
	}
	for _, a := range pod.Addresses {
		ip := a.IP.Addr()
		bits := ip.BitLen()
		res.IPs = append(res.IPs, &current.IPConfig{
			Interface: current.Int(0),
			Address:   net.IPNet{IP: ip.AsSlice(), Mask: net.CIDRMask(a.IP.Bits(), bits)},
			Gateway:   a.Gateway.AsSlice(),
		})
		_, dst, _ := net.ParseCIDR(defaultRoute(ip))
		res.Routes = append(res.Routes, &types.Route{Dst: *dst, GW: a.Gateway.AsSlice()})
	}
	return res
}

func hasProviderAddress(n *hns.Network) bool {
	for _, p := range n.Policies {
		if p.Type == hns.NetworkPolicyProviderAddress && p.ProviderAddress != nil && p.ProviderAddress.ProviderAddress != "" {
			return true
		}
	}
	return false
}
