package agent

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"

	"github.com/nodenet/nodenet/cni"
	"github.com/nodenet/nodenet/config"
	"github.com/nodenet/nodenet/hns"
	"github.com/nodenet/nodenet/overlay"
	"github.com/nodenet/nodenet/overlay/hostroute"
	"github.com/nodenet/nodenet/proxy"
	"github.com/nodenet/nodenet/proxy/metrics"
	"github.com/nodenet/nodenet/proxy/proxier"
	"github.com/nodenet/nodenet/proxy/source"
)

// LoadRenderConfig loads a config for RenderHNS: Windows rules, as a
// shared config (nothing defaulted from the machine that renders, such as
// its hostname for nodeName), and without the CNI file paths' errors:
// they name files on the node, which a render never touches.
func LoadRenderConfig(path string) (*config.AgentConfiguration, error) {
	cfg, _, err := config.LoadFile(path, config.LoadOptions{OS: config.OSWindows, Shared: true})
	errs := config.FieldErrors(err)
	if cfg == nil || (err != nil && errs == nil) {
		return nil, err
	}
	errs = slices.DeleteFunc(errs, func(e *field.Error) bool { return slices.Contains(localPathFields, e.Field) })
	if len(errs) > 0 {
		return nil, fmt.Errorf("%s: %w", path, &config.InvalidError{Errors: errs})
	}
	return cfg, nil
}

// RenderOptions configure RenderHNS.
type RenderOptions struct {
	// Config is the one config, loaded with Windows rules. Its
	// nodeIPOverride, if any, gives this node's address.
	Config *config.AgentConfiguration
	// Dir is the manifest folder: Nodes (this node's and its peers'),
	// Pods, Services and EndpointSlices.
	Dir string
	// NodeName is the node rendered for; default Config.NodeName.
	NodeName string
	// Version is the simulated host's HNS version; Build its Windows
	// build (zero: the modelled release's, hns.BuildFor).
	Version hns.Version
	Build   hns.OSBuild
	// PodCIDRs, if set, replace this Node's spec.podCIDRs.
	PodCIDRs []netip.Prefix
	// Timeout bounds the proxy's first sync; default 30s.
	Timeout time.Duration
	Logger  klog.Logger
}

// Rendered is what a Windows node would hold for a folder of manifests.
type Rendered struct {
	// HNS is the simulated host after the network, the pods and the
	// first proxy sync; HostRoutes its route table (l2bridge's routes to
	// other nodes' pod CIDRs).
	HNS        *hns.Simulator
	HostRoutes hostroute.Interface
	// Network is nil when the node network is ready, else why not.
	Network error
	// Proxy is nil when the proxy synced, else why it did not.
	Proxy error
	// Problems are the folder's: each names a file and an object that
	// was not used. Pods are the Pods of this node CNI could not wire.
	Problems []error
	// Events are those the agent would record (on the Node, Services and
	// EndpointSlices), in order.
	Events []Event
	// Notes say what the render could not show as asked, e.g. a local
	// endpoint without a Pod.
	Notes []string
	// State is the proxy's node-local state (nil when it did not sync).
	State *proxy.State
}

// Event is one Event the agent would record.
type Event struct {
	Object  string `json:"object"`
	Type    string `json:"type"`
	Reason  string `json:"reason"`
	Message string `json:"message"`
}

func (e Event) String() string {
	return fmt.Sprintf("%s %s %s: %s", e.Type, e.Object, e.Reason, e.Message)
}

// RenderHNS shows what a Windows node would program for a folder of
// manifests, on the HNS simulator: the agent's own parts, as
// --dataplane=sim runs them offline — the manifest folder as its source
// of Nodes, Services and EndpointSlices, the overlay controller and HNS
// network (hnsnet), each Pod of this node wired by the CNI wiring
// (hnsendpoint) as the CNI server would, and the brain with the HNS
// proxy backend (hnslb) for one sync. Nothing outside the process is
// touched. An error means nothing could be rendered (an unreadable
// folder, this node's Node missing or without an address), with the
// folder's problems in Rendered when it was read; what the node would
// refuse is in Rendered.
func RenderHNS(ctx context.Context, opts RenderOptions) (*Rendered, error) {
	cfg := opts.Config
	if cfg == nil {
		return nil, errors.New("render: no config")
	}
	if opts.NodeName == "" {
		opts.NodeName = cfg.NodeName
	}
	if opts.NodeName == "" {
		return nil, errors.New("render: no node name")
	}
	if opts.Timeout <= 0 {
		opts.Timeout = 30 * time.Second
	}
	log := opts.Logger
	if log.GetSink() == nil {
		log = klog.Background()
	}
	copied := *cfg // the node name is the only field changed
	cfg = &copied
	cfg.NodeName = opts.NodeName

	folder := source.NewFolder(source.FilesOptions{Dir: opts.Dir, NodeName: opts.NodeName, Offline: true, Logger: log})
	if err := folder.Read(); err != nil {
		return nil, err
	}
	out := &Rendered{Problems: folder.Problems()}
	var nodes overlay.NodeSource = folder.Nodes()
	if len(opts.PodCIDRs) > 0 {
		nodes = podCIDROverride{NodeSource: nodes, node: opts.NodeName, cidrs: opts.PodCIDRs}
	}
	self, err := nodes.Get(opts.NodeName)
	if err != nil {
		return out, fmt.Errorf("render: Node %s: not in %s, or not used (see its problems): %w", opts.NodeName, opts.Dir, err)
	}
	ips := NodeIPs(cfg, self)
	if len(ips) == 0 || !ips[0].Is4() {
		return out, fmt.Errorf("render: Node %s has no IPv4 InternalIP and nodeIPOverride sets none: give one (--node-ip)", opts.NodeName)
	}

	events := &eventCapture{}
	in := buildInputs{cfg: cfg, logger: log}
	sim, routes, dp, err := buildSimHost(simHost{version: opts.Version, build: opts.Build, ips: ips, prefix: hostPrefix}, in)
	if err != nil {
		return nil, err
	}
	out.HNS, out.HostRoutes = sim, routes
	ctrl, err := overlay.NewController(overlay.ControllerOptions{
		Config: cfg, NodeName: opts.NodeName, Nodes: nodes, Dataplane: dp.network,
		Recorder: events, Logger: log.WithName("network"),
	})
	if err != nil {
		return nil, err
	}
	if err := ctrl.Reconcile(ctx); err != nil {
		out.Network = err
	} else if err := ctrl.Ready(); err != nil {
		out.Network = err
	}
	local := ctrl.Local()
	if local == nil {
		if out.Network == nil {
			out.Network = errors.New("the node network is not ready")
		}
		out.Events = events.list()
		return out, nil
	}

	wired := map[netip.Addr]bool{}
	for _, pod := range folder.Pods(opts.NodeName) {
		ips, err := wirePod(ctx, sim, dp.wiring, NodeNetwork(cfg, local), pod)
		if err != nil {
			out.Problems = append(out.Problems, fmt.Errorf("Pod %s/%s: %w; it has no HNS endpoint", pod.Namespace, pod.Name, err))
			continue
		}
		for _, ip := range ips {
			wired[ip] = true
		}
	}

	out.State, out.Proxy = renderProxy(ctx, cfg, folder, ctrl, dp, events, opts.Timeout, log)
	out.Events = events.list()
	out.Notes = localEndpointNotes(out.State, wired, ProxyNode(opts.NodeName, local).IPs)
	return out, nil
}

// renderProxy runs the agent's proxy (brain + the dataplane's backend)
// over the folder until its first sync, and returns the state it
// programmed, or why it did not sync.
func renderProxy(ctx context.Context, cfg *config.AgentConfiguration, folder *source.Folder, ctrl *overlay.Controller, dp *dataplane,
	events record.EventRecorder, timeout time.Duration, log klog.Logger) (*proxy.State, error) {
	node := ProxyNode(cfg.NodeName, ctrl.Local())
	reg := metrics.NewRegistry()
	m := metrics.New(reg, proxier.Families(cfg)...)
	backend, err := dp.newBackend(backendInputs{cfg: cfg, node: node, network: ctrl, metrics: m, recorder: events, logger: log.WithName("proxy")})
	if err != nil {
		return nil, err
	}
	watched := &firstSync{Backend: backend, done: make(chan error, 1)}
	opts, err := ProxierOptions(cfg, node)
	if err != nil {
		return nil, err
	}
	opts.Source, opts.Backend = folder.Proxy(), watched
	opts.Brain.Recorder, opts.Brain.Logger = events, log.WithName("brain")
	opts.Logger = log.WithName("proxy")
	// One sync is wanted: no waiting between changes, none repeated.
	opts.MinSyncPeriod, opts.SyncPeriod = 0, time.Hour
	p, err := proxier.New(opts)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	ran := make(chan error, 1)
	go func() { ran <- p.Run(ctx) }()
	select {
	case err = <-watched.done:
	case err = <-ran:
		if err == nil {
			err = ctx.Err()
		}
	case <-ctx.Done():
		err = fmt.Errorf("no proxy sync within %v", timeout)
	}
	cancel()
	if rerr := <-ran; err == nil && rerr != nil && !errors.Is(rerr, context.Canceled) {
		err = rerr
	}
	if err != nil {
		return nil, err
	}
	return p.State(), nil
}

// firstSync passes syncs to a backend and reports how the first went.
type firstSync struct {
	proxy.Backend
	once sync.Once
	done chan error
}

func (f *firstSync) Sync(ctx context.Context, u proxy.Update) error {
	err := f.Backend.Sync(ctx, u)
	f.once.Do(func() { f.done <- err })
	return err
}

// wirePod wires a Pod of this node the way the CNI server does for a
// runtime's ADD: an HCN namespace (the runtime makes it), the pod's
// addresses in this node's pod CIDRs with their gateways, its hostPorts
// as port mappings, through the dataplane's wiring. It returns the
// addresses wired.
func wirePod(ctx context.Context, h hns.Interface, wiring cni.Wiring, nw *cni.NodeNetwork, pod *v1.Pod) ([]netip.Addr, error) {
	if pod.Spec.HostNetwork {
		return nil, nil // the node's own address: no endpoint
	}
	var addrs []cni.Address
	var ips []netip.Addr
	for _, s := range pod.Status.PodIPs {
		ip, err := netip.ParseAddr(s.IP)
		if err != nil {
			return nil, err
		}
		i := slices.IndexFunc(nw.PodCIDRs, func(p netip.Prefix) bool { return p.Contains(ip) })
		if i < 0 {
			return nil, fmt.Errorf("pod IP %s is outside this node's pod network %v", ip, nw.PodCIDRs)
		}
		if slices.Contains(nw.Reserved, ip) || ip == nw.Gateways[i] {
			return nil, fmt.Errorf("pod IP %s is reserved on this node (gateway, source VIP or host endpoint): CNI never hands it out", ip)
		}
		addrs = append(addrs, cni.Address{IP: netip.PrefixFrom(ip, nw.PodCIDRs[i].Bits()), Gateway: nw.Gateways[i]})
		ips = append(ips, ip)
	}
	ns, err := h.CreateNamespace(ctx, &hns.Namespace{Type: hns.NamespaceTypeHost})
	if err != nil {
		return nil, fmt.Errorf("create its HCN namespace: %w", err)
	}
	p := &cni.Pod{
		Attachment: cni.Attachment{ContainerID: strings.ReplaceAll(string(pod.UID), "-", ""), IfName: "eth0"},
		Netns:      ns.ID,
		Namespace:  pod.Namespace, Name: pod.Name, UID: string(pod.UID),
		Addresses: addrs,
	}
	for _, c := range pod.Spec.Containers {
		for _, port := range c.Ports {
			if port.HostPort == 0 {
				continue
			}
			p.PortMappings = append(p.PortMappings, cni.PortMapping{
				HostPort: int(port.HostPort), ContainerPort: int(port.ContainerPort),
				Protocol: strings.ToLower(string(port.Protocol)), HostIP: port.HostIP,
			})
		}
	}
	for i := range p.PortMappings {
		if p.PortMappings[i].Protocol == "" {
			p.PortMappings[i].Protocol = "tcp"
		}
	}
	if _, err := wiring.Add(ctx, nw, p); err != nil {
		return nil, err
	}
	return ips, nil
}

// localEndpointNotes names the local endpoints the state uses that no
// Pod stands for: HNS has no endpoint for them, so the load balancers
// leave them out, as they would on a node where the pod is not running.
func localEndpointNotes(state *proxy.State, wired map[netip.Addr]bool, nodeIPs []netip.Addr) []string {
	if state == nil {
		return nil
	}
	missing := map[netip.Addr][]string{}
	for key, sp := range state.ServicePorts {
		for _, eps := range [][]proxy.Endpoint{sp.InternalEndpoints, sp.ExternalEndpoints} {
			for _, ep := range eps {
				ip := ep.IP.Unmap()
				if !ep.Local || wired[ip] || slices.Contains(nodeIPs, ip) {
					continue
				}
				svc := key.NamespacedName.String()
				if !slices.Contains(missing[ip], svc) {
					missing[ip] = append(missing[ip], svc)
				}
			}
		}
	}
	ips := make([]netip.Addr, 0, len(missing))
	for ip := range missing {
		ips = append(ips, ip)
	}
	slices.SortFunc(ips, netip.Addr.Compare)
	var out []string
	for _, ip := range ips {
		svcs := missing[ip]
		slices.Sort(svcs)
		out = append(out, fmt.Sprintf("endpoint %s of %s is on this node, but no Pod in the manifests has that address: HNS has no endpoint for it, so its load balancers leave it out (declare the Pod with spec.nodeName and status.podIP)",
			ip, strings.Join(svcs, ", ")))
	}
	return out
}

// hostPrefix is an address as a single-address prefix: a render knows no
// host's subnets.
func hostPrefix(ip netip.Addr) netip.Prefix { return netip.PrefixFrom(ip, ip.BitLen()) }

// podCIDROverride gives one Node other pod CIDRs (--pod-cidr).
type podCIDROverride struct {
	overlay.NodeSource
	node  string
	cidrs []netip.Prefix
}

func (o podCIDROverride) Get(name string) (*v1.Node, error) {
	n, err := o.NodeSource.Get(name)
	if err != nil || name != o.node {
		return n, err
	}
	return o.override(n), nil
}

func (o podCIDROverride) List(sel labels.Selector) ([]*v1.Node, error) {
	nodes, err := o.NodeSource.List(sel)
	for i, n := range nodes {
		if n.Name == o.node {
			nodes[i] = o.override(n)
		}
	}
	return nodes, err
}

func (o podCIDROverride) override(n *v1.Node) *v1.Node {
	n = n.DeepCopy()
	n.Spec.PodCIDRs = nil
	for _, p := range o.cidrs {
		n.Spec.PodCIDRs = append(n.Spec.PodCIDRs, p.String())
	}
	n.Spec.PodCIDR = n.Spec.PodCIDRs[0]
	return n
}

// eventCapture is an EventRecorder that keeps each distinct Event.
type eventCapture struct {
	mu     sync.Mutex
	events []Event
}

var _ record.EventRecorder = (*eventCapture)(nil)

func (c *eventCapture) Event(obj runtime.Object, eventtype, reason, message string) {
	e := Event{Object: objectName(obj), Type: eventtype, Reason: reason, Message: message}
	c.mu.Lock()
	defer c.mu.Unlock()
	if !slices.Contains(c.events, e) {
		c.events = append(c.events, e)
	}
}

func (c *eventCapture) Eventf(obj runtime.Object, eventtype, reason, messageFmt string, args ...any) {
	c.Event(obj, eventtype, reason, fmt.Sprintf(messageFmt, args...))
}

func (c *eventCapture) AnnotatedEventf(obj runtime.Object, _ map[string]string, eventtype, reason, messageFmt string, args ...any) {
	c.Eventf(obj, eventtype, reason, messageFmt, args...)
}

func (c *eventCapture) list() []Event {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.events)
}

// objectName is "Kind namespace/name" (or "Kind name").
func objectName(obj runtime.Object) string {
	if ref, ok := obj.(*v1.ObjectReference); ok {
		return joinName(ref.Kind, ref.Namespace, ref.Name)
	}
	kind := obj.GetObjectKind().GroupVersionKind().Kind
	if kind == "" {
		kind = strings.TrimPrefix(fmt.Sprintf("%T", obj), "*")
		if i := strings.LastIndexByte(kind, '.'); i >= 0 {
			kind = kind[i+1:]
		}
	}
	m, err := meta.Accessor(obj)
	if err != nil {
		return kind
	}
	return joinName(kind, m.GetNamespace(), m.GetName())
}

func joinName(kind, ns, name string) string {
	if ns == "" {
		return kind + " " + name
	}
	return kind + " " + ns + "/" + name
}
