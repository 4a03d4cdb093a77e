// Address plan (shared by this package's tests):
//
//	this node        192.168.1.11 on adapter "Ethernet" (MAC
//	                 00-15-5D-01-01-0B); pods 10.244.1.0/24, gateway
//	                 10.244.1.1, source VIP (overlay) 10.244.1.2, local pod
//	                 i at 10.244.1.(10+i)
//	remote node n    (n ≥ 2) "node-n", pods 10.244.n.0/24, node IP
//	                 192.168.2.n, remote pod j at 10.244.n.(10+j)
//	cluster CIDR     10.244.0.0/16; service CIDR 10.96.0.0/12
//	outside          203.0.113.0/24 (clients, out-of-cluster backends)
package hnslb

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr/funcr"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/ktesting"

	"github.com/nodenet/nodenet/config"
	"github.com/nodenet/nodenet/hns"
	"github.com/nodenet/nodenet/overlay"
	"github.com/nodenet/nodenet/overlay/hnsnet"
	"github.com/nodenet/nodenet/overlay/hostroute"
	"github.com/nodenet/nodenet/proxy"
)

var ctx = context.Background()

const (
	nodeIP    = "192.168.1.11"
	hostMAC   = "00-15-5D-01-01-0B"
	podCIDR   = "10.244.1.0/24"
	sourceVIP = "10.244.1.2"
	netName   = "nodenet"
	client    = "203.0.113.7"
	nodeIPv6  = "fd00::11"
	podCIDRv6 = "fd00:10:244:1::/64"
)

// HNS versions on each side of the ModifyLoadBalancer boundary: 15.4
// accepts an in-place update and keeps the old endpoints (kubernetes issue
// 131466), 15.5 is where hnslib's ModifyLoadbalancer range starts.
var (
	hnsBrokenModify = hns.Version{Major: 15, Minor: 4}
	hnsFixedModify  = hns.Version{Major: 15, Minor: 5}
)

var (
	clusterCIDRs = []netip.Prefix{netip.MustParsePrefix("10.244.0.0/16")}
	serviceCIDRs = []netip.Prefix{netip.MustParsePrefix("10.96.0.0/12")}
)

func localPodIP(i int) string { return fmt.Sprintf("10.244.1.%d", 10+i) }

// v6Of is a local pod's IPv6 address on a dual-stack host.
func v6Of(ip4 string) string {
	a := netip.MustParseAddr(ip4).As4()
	return fmt.Sprintf("fd00:10:244:1::%x", a[3])
}

func remotePodIP(node, j int) string { return fmt.Sprintf("10.244.%d.%d", node, 10+j) }

func mustAddr(s string) netip.Addr { return netip.MustParseAddr(s) }

func remoteNodeIP(node int) string { return fmt.Sprintf("192.168.2.%d", node) }

func remoteNode(n int) overlay.RemoteNode {
	return overlay.RemoteNode{
		Name:     fmt.Sprintf("node-%d", n),
		PodCIDRs: []netip.Prefix{netip.MustParsePrefix(fmt.Sprintf("10.244.%d.0/24", n))},
		NodeIP:   netip.MustParseAddr(remoteNodeIP(n)),
		VtepMAC:  net.HardwareAddr{0x0e, 0x2a, 0, 0, byte(n >> 8), byte(n)},
	}
}

// testNetwork is a Network a test can change, as the network part would.
type testNetwork struct {
	mu      sync.Mutex
	local   *overlay.LocalNetwork
	remotes []overlay.RemoteNode
}

func (n *testNetwork) Local() *overlay.LocalNetwork {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.local
}

func (n *testNetwork) Remotes() []overlay.RemoteNode {
	n.mu.Lock()
	defer n.mu.Unlock()
	return slices.Clone(n.remotes)
}

func (n *testNetwork) set(local *overlay.LocalNetwork, remotes []overlay.RemoteNode) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.local, n.remotes = local, remotes
}

// host is a simulated Windows node with its network built by hnsnet, as
// the agent builds it.
type host struct {
	tb        testing.TB
	sim       *hns.Simulator
	hnsnet    *hnsnet.Network
	mode      config.NetworkMode
	dualStack bool
	net       *testNetwork
	remotes   []overlay.RemoteNode
}

type hostOptions struct {
	mode    config.NetworkMode
	version hns.Version
	remotes int // remote nodes 2..remotes+1
	now     func() time.Time
	seed    int64
	// dualStack adds IPv6 (l2bridge only): pods fd00:10:244:1::/64, node
	// fd00::11.
	dualStack bool
	// maxBackends is the host's backend limit per load balancer (the
	// simulator's default when 0).
	maxBackends int
}

func newHost(tb testing.TB, o hostOptions) *host {
	tb.Helper()
	if o.mode == "" {
		o.mode = config.NetworkModeOverlay
	}
	if o.remotes == 0 {
		o.remotes = 3
	}
	sim := hns.NewSimulator(hns.SimulatorOptions{
		Version:                    o.version,
		MaxBackendsPerLoadBalancer: o.maxBackends,
		Now:                        o.now,
		Seed:                       o.seed,
		HostAdapters:               []hns.HostAdapter{{Name: "Ethernet", IPs: []string{nodeIP, nodeIPv6}, MAC: hostMAC}},
	})
	routes := hostroute.NewFake()
	routes.SetInterfaces(
		hostroute.FakeInterface{Index: 4, Name: "Ethernet", Prefixes: []netip.Prefix{netip.MustParsePrefix("192.168.0.0/16")}},
		hostroute.FakeInterface{Index: 12, Name: "vEthernet (Ethernet)", Prefixes: []netip.Prefix{netip.MustParsePrefix("192.168.0.0/16")}},
	)
	mac, _ := net.ParseMAC(hostMAC)
	adapters := func(context.Context) ([]hnsnet.Adapter, error) {
		return []hnsnet.Adapter{{Name: "Ethernet", Index: 4, MTU: 1500, MAC: mac,
			IPs: []netip.Prefix{netip.MustParsePrefix(nodeIP + "/16"), netip.MustParsePrefix(nodeIPv6 + "/64")}}}, nil
	}
	nw, err := hnsnet.New(hnsnet.Options{HNS: sim, HostRoutes: routes, Adapters: adapters, Logger: testLogger(tb)})
	if err != nil {
		tb.Fatal(err)
	}
	h := &host{tb: tb, sim: sim, hnsnet: nw, mode: o.mode, dualStack: o.dualStack, net: &testNetwork{}}
	for n := 2; n < 2+o.remotes; n++ {
		h.remotes = append(h.remotes, remoteNode(n))
	}
	h.ensureNetwork()
	return h
}

// ensureNetwork builds (or re-builds, after an HNS restart) the network
// and hands it to the proxy, as the network part does.
func (h *host) ensureNetwork() {
	h.tb.Helper()
	spec := overlay.LocalSpec{
		Mode:     h.mode,
		Name:     netName,
		PodCIDRs: []netip.Prefix{netip.MustParsePrefix(podCIDR)},
		Gateways: []netip.Addr{netip.MustParseAddr("10.244.1.1")},
		NodeIP:   netip.MustParseAddr(nodeIP),
		VNI:      4096,
		Port:     4789,
	}
	if h.mode == config.NetworkModeOverlay {
		spec.SourceVIP = netip.MustParseAddr(sourceVIP)
	}
	if h.dualStack {
		spec.PodCIDRs = append(spec.PodCIDRs, netip.MustParsePrefix(podCIDRv6))
		spec.Gateways = append(spec.Gateways, netip.MustParseAddr("fd00:10:244:1::1"))
		spec.NodeIPv6 = netip.MustParseAddr(nodeIPv6)
	}
	local, err := h.hnsnet.EnsureLocal(ctx, spec)
	if err != nil {
		h.tb.Fatalf("EnsureLocal: %v", err)
	}
	if _, err := h.hnsnet.SyncRemotes(ctx, h.remotes); err != nil {
		h.tb.Fatalf("SyncRemotes: %v", err)
	}
	h.net.set(local, slices.Clone(h.remotes))
}

func (h *host) networkID() string { return h.net.Local().ID }

// addPod creates a local pod endpoint as CNI does, with the matching
// IPv6 address too on a dual-stack host.
func (h *host) addPod(ip string) string {
	h.tb.Helper()
	ipcs := []hns.IPConfig{{IpAddress: ip, PrefixLength: 24}}
	if h.dualStack {
		ipcs = append(ipcs, hns.IPConfig{IpAddress: v6Of(ip), PrefixLength: 64})
	}
	ep, err := h.sim.CreateEndpoint(ctx, &hns.Endpoint{
		Name:               fmt.Sprintf("nodenet-pod:c%s:eth0", strings.ReplaceAll(ip, ".", "")),
		HostComputeNetwork: h.networkID(),
		IpConfigurations:   ipcs,
	})
	if err != nil {
		h.tb.Fatalf("create pod endpoint %s: %v", ip, err)
	}
	return ep.ID
}

// fakeRecorder collects events.
type events struct {
	*record.FakeRecorder
}

func newEvents() *events { return &events{record.NewFakeRecorder(1000)} }

// drain returns the events recorded so far.
func (e *events) drain() []string {
	var out []string
	for {
		select {
		case ev := <-e.Events:
			out = append(out, ev)
		default:
			return out
		}
	}
}

// observed counts Observe calls per op.
type observed struct {
	mu     sync.Mutex
	counts map[string]int
}

func (o *observed) observe(op string, _ error, _ time.Duration) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.counts == nil {
		o.counts = map[string]int{}
	}
	o.counts[op]++
}

func (o *observed) count(op string) int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.counts[op]
}

// proxyBackend returns a Backend on h, as after an agent start.
func (h *host) backend(mod ...func(*Options)) *Backend {
	h.tb.Helper()
	opts := Options{HNS: h.sim, Network: h.net, ClusterCIDRs: clusterCIDRs, ServiceCIDRs: serviceCIDRs, Logger: testLogger(h.tb)}
	for _, m := range mod {
		m(&opts)
	}
	b, err := New(opts)
	if err != nil {
		h.tb.Fatal(err)
	}
	return b
}

func withDSR(o *Options) { o.EnableDSR = true }

// --- service ports ---

func ep(ip string, port uint16, local bool) proxy.Endpoint {
	return proxy.Endpoint{IP: netip.MustParseAddr(ip), Port: port, Local: local, Ready: true, Serving: true}
}

func localEP(i int) proxy.Endpoint { return ep(localPodIP(i), 8080, true) }

func podEP(node, j int) proxy.Endpoint { return ep(remotePodIP(node, j), 8080, false) }

// svc is a ClusterIP service port "ns/name:http/TCP" on 10.96.0.<n>:80
// with eps as every endpoint set.
func svc(n int, eps ...proxy.Endpoint) *proxy.ServicePort {
	name := fmt.Sprintf("svc-%d", n)
	sp := &proxy.ServicePort{
		Key: proxy.ServicePortKey{
			ServicePortName: proxy.ServicePortName{NamespacedName: types.NamespacedName{Namespace: "default", Name: name}, Port: "http", Protocol: proxy.TCP},
			Family:          proxy.IPv4,
		},
		Type:         proxy.ClusterIP,
		ClusterIP:    netip.AddrFrom4([4]byte{10, 96, byte(n / 250), byte(1 + n%250)}),
		Port:         80,
		HasEndpoints: len(eps) > 0,
	}
	setEndpoints(sp, eps...)
	return sp
}

// setEndpoints fills every endpoint set of sp from eps (LocalEndpoints
// the local ones; ExternalEndpoints follows eTP).
func setEndpoints(sp *proxy.ServicePort, eps ...proxy.Endpoint) {
	sp.ClusterEndpoints = eps
	sp.InternalEndpoints = eps
	sp.LocalEndpoints = nil
	for _, e := range eps {
		if e.Local {
			sp.LocalEndpoints = append(sp.LocalEndpoints, e)
		}
	}
	sp.ExternalEndpoints = nil
	if sp.UsesExternalFrontends() {
		sp.ExternalEndpoints = eps
		if sp.ExternalPolicyLocal {
			sp.ExternalEndpoints = sp.LocalEndpoints
		}
	}
	sp.HasEndpoints = len(eps) > 0
	sp.LocalReadyEndpoints = len(sp.LocalEndpoints)
}

// nodePort makes sp a NodePort service on port np.
func nodePort(sp *proxy.ServicePort, np uint16, etpLocal bool) *proxy.ServicePort {
	sp.Type, sp.NodePort, sp.ExternalPolicyLocal = proxy.NodePort, np, etpLocal
	setEndpoints(sp, sp.ClusterEndpoints...)
	return sp
}

func stateOf(sps ...*proxy.ServicePort) *proxy.State {
	st := &proxy.State{ServicePorts: map[proxy.ServicePortKey]*proxy.ServicePort{}, NodeName: "node-1"}
	for _, sp := range sps {
		st.ServicePorts[sp.Key] = sp
	}
	return st
}

// with returns a copy of st with sps replaced or added, and the changed
// keys, as the brain hands over a partial update.
func with(st *proxy.State, sps ...*proxy.ServicePort) (*proxy.State, map[proxy.ServicePortKey]struct{}) {
	out := &proxy.State{ServicePorts: map[proxy.ServicePortKey]*proxy.ServicePort{}, NodeName: st.NodeName}
	for k, sp := range st.ServicePorts {
		out.ServicePorts[k] = sp
	}
	changed := map[proxy.ServicePortKey]struct{}{}
	for _, sp := range sps {
		out.ServicePorts[sp.Key] = sp
		changed[sp.Key] = struct{}{}
	}
	return out, changed
}

// without returns a copy of st without keys.
func without(st *proxy.State, keys ...proxy.ServicePortKey) (*proxy.State, map[proxy.ServicePortKey]struct{}) {
	out, _ := with(st)
	changed := map[proxy.ServicePortKey]struct{}{}
	for _, k := range keys {
		delete(out.ServicePorts, k)
		changed[k] = struct{}{}
	}
	return out, changed
}

func mustSync(tb testing.TB, b *Backend, u proxy.Update) {
	tb.Helper()
	if err := b.Sync(ctx, u); err != nil {
		tb.Fatalf("Sync: %v", err)
	}
}

func full(st *proxy.State) proxy.Update { return proxy.Update{State: st, Full: true} }

func partial(st *proxy.State, changed map[proxy.ServicePortKey]struct{}) proxy.Update {
	return proxy.Update{State: st, Changed: changed}
}

// --- reading HNS back ---

func (h *host) trace(from hns.Entry, src, dst string, port uint16) *hns.Trace {
	h.tb.Helper()
	t, err := h.sim.Trace(from, hns.Packet{Protocol: hns.ProtocolTCP, Src: src, SrcPort: 40000, Dst: dst, DstPort: port})
	if err != nil {
		h.tb.Fatalf("trace: %v", err)
	}
	return t
}

// seen summarizes a trace's deliveries as "src -> dst:port [dsr] [encap PA]".
func seen(t *hns.Trace) []string {
	var out []string
	for _, d := range t.Deliveries {
		s := fmt.Sprintf("%s -> %s:%d", d.Packet.Src, d.Packet.Dst, d.Packet.DstPort)
		if d.DSR {
			s += " dsr"
		}
		if d.Encap != nil {
			s += " via " + d.Encap.ProviderAddress
		}
		out = append(out, s)
	}
	sort.Strings(out)
	return out
}

func (h *host) loadBalancers() []hns.LoadBalancer {
	h.tb.Helper()
	lbs, err := h.sim.ListLoadBalancers(ctx)
	if err != nil {
		h.tb.Fatal(err)
	}
	return lbs
}

func (h *host) endpoints() []hns.Endpoint {
	h.tb.Helper()
	eps, err := h.sim.ListEndpoints(ctx, "")
	if err != nil {
		h.tb.Fatal(err)
	}
	return eps
}

func (h *host) remoteEndpoints() map[string]hns.Endpoint {
	out := map[string]hns.Endpoint{}
	for _, ep := range h.endpoints() {
		if ep.IsRemote() {
			out[ep.IPs()[0]] = ep
		}
	}
	return out
}

func providerAddress(ep hns.Endpoint) string {
	for _, p := range ep.Policies {
		if p.ProviderAddress != nil {
			return p.ProviderAddress.ProviderAddress
		}
	}
	return ""
}

// lbFor returns the load balancer serving frontend vip:port ("" for node
// ports), or nil.
func (h *host) lbFor(vip string, port uint16) *hns.LoadBalancer {
	for _, lb := range h.loadBalancers() {
		if lb.PortMappings[0].ExternalPort != port {
			continue
		}
		if (vip == "" && len(lb.FrontendVIPs) == 0) || slices.Contains(lb.FrontendVIPs, vip) {
			return &lb
		}
	}
	return nil
}

// canon renders the HNS objects the proxy owns by content, without IDs,
// so two hosts can be compared: load balancers with their backends'
// addresses, and remote endpoints.
func (h *host) canon() []string {
	h.tb.Helper()
	ipOf := map[string]string{}
	var out []string
	for _, ep := range h.endpoints() {
		ipOf[strings.ToUpper(ep.ID)] = strings.Join(ep.IPs(), ",")
		if ep.IsRemote() {
			out = append(out, fmt.Sprintf("remote %s name=%s pa=%s", strings.Join(ep.IPs(), ","), ep.Name, providerAddress(ep)))
		}
	}
	for _, lb := range h.loadBalancers() {
		var bes []string
		for _, id := range lb.HostComputeEndpoints {
			bes = append(bes, ipOf[strings.ToUpper(id)])
		}
		sort.Strings(bes)
		pm := lb.PortMappings[0]
		out = append(out, fmt.Sprintf("lb %v:%d/%s->%d flags=%d port=%d dist=%d svip=%s backends=%v",
			lb.FrontendVIPs, pm.ExternalPort, pm.Protocol, pm.InternalPort, lb.Flags, pm.Flags, pm.DistributionType, lb.SourceVIP, bes))
	}
	sort.Strings(out)
	return out
}

func callsOf(sim *hns.Simulator, ops ...hns.Op) int {
	n := 0
	for _, op := range ops {
		n += sim.Calls(op)
	}
	return n
}

var listOps = []hns.Op{hns.OpListEndpoints, hns.OpListLoadBalancers, hns.OpListNetworks}

// testLogger logs through tb, so only a failing test shows the logs.
func testLogger(tb testing.TB) klog.Logger {
	if _, bench := tb.(*testing.B); bench {
		return funcr.New(func(string, string) {}, funcr.Options{})
	}
	return ktesting.NewLogger(tb, ktesting.NewConfig(ktesting.Verbosity(2)))
}
