package brain

// Address plan for every test in this package:
//   - this node is "node-a" in zone "zone-a"; "node-b" (zone-a) and
//     "node-c" (zone-b) are other nodes;
//   - service cluster IPs: 10.96.0.0/16 and fd00:96::/64;
//   - pod (endpoint) IPs: 10.244.1.0/24 on node-a, 10.244.2.0/24 on
//     node-b, 10.244.3.0/24 on node-c; IPv6 pods in fd00:244::/64;
//   - external IPs 192.0.2.0/24 and 2001:db8:2::/64, load-balancer IPs
//     198.51.100.0/24 and 2001:db8:51::/64, client ranges 203.0.113.0/24.

import (
	"fmt"
	"net/netip"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2/ktesting"

	"github.com/nodenet/nodenet/proxy"
)

const (
	thisNode = "node-a"
	thisZone = "zone-a"
	testNS   = "ns"
)

// newTestBrain returns a Brain for node-a in zone-a running families
// (IPv4 only when none are given).
func newTestBrain(t testing.TB, opts Options) *Brain {
	t.Helper()
	if opts.NodeName == "" {
		opts.NodeName = thisNode
	}
	if opts.Families == nil {
		opts.Families = []proxy.IPFamily{proxy.IPv4}
	}
	if tt, ok := t.(*testing.T); ok {
		opts.Logger = ktesting.NewLogger(tt, ktesting.NewConfig(ktesting.Verbosity(4)))
	}
	b := New(opts)
	b.OnNodeUpdate(nil, &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: thisNode, Labels: map[string]string{v1.LabelTopologyZone: thisZone}}})
	return b
}

// service returns a ClusterIP service "name" with cluster IP 10.96.0.<n>
// and one port http/TCP 80, then applies the mutators.
func service(name string, n int, mutate ...func(*v1.Service)) *v1.Service {
	ip := fmt.Sprintf("10.96.0.%d", n)
	s := &v1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: testNS, Name: name, UID: types.UID("uid-svc-" + name), ResourceVersion: "1"},
		Spec: v1.ServiceSpec{
			Type:       v1.ServiceTypeClusterIP,
			ClusterIP:  ip,
			ClusterIPs: []string{ip},
			IPFamilies: []v1.IPFamily{v1.IPv4Protocol},
			Ports:      []v1.ServicePort{{Name: "http", Protocol: v1.ProtocolTCP, Port: 80}},
		},
	}
	for _, m := range mutate {
		m(s)
	}
	return s
}

// epSlice returns slice "name" of service svc with the given ports and
// endpoints; the address type follows the first endpoint (IPv4 when none).
func epSlice(svc, name string, ports []discoveryv1.EndpointPort, eps ...discoveryv1.Endpoint) *discoveryv1.EndpointSlice {
	at := discoveryv1.AddressTypeIPv4
	if len(eps) > 0 && len(eps[0].Addresses) > 0 && strings.Contains(eps[0].Addresses[0], ":") {
		at = discoveryv1.AddressTypeIPv6
	}
	return &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: testNS, Name: name, UID: types.UID("uid-slice-" + name), ResourceVersion: "1",
			Labels: map[string]string{discoveryv1.LabelServiceName: svc},
		},
		AddressType: at,
		Ports:       ports,
		Endpoints:   eps,
	}
}

// httpPort is the slice port matching service port http/TCP.
func httpPort(n int32) []discoveryv1.EndpointPort {
	return []discoveryv1.EndpointPort{{Name: ptr("http"), Protocol: ptr(v1.ProtocolTCP), Port: ptr(n)}}
}

// cond sets an endpoint's conditions; nil leaves the API default.
type cond struct{ ready, serving, terminating *bool }

var (
	readyCond       = cond{ready: ptr(true), serving: ptr(true), terminating: ptr(false)}
	notReadyCond    = cond{ready: ptr(false), serving: ptr(false), terminating: ptr(false)}
	terminatingCond = cond{ready: ptr(false), serving: ptr(true), terminating: ptr(true)}
	goneCond        = cond{ready: ptr(false), serving: ptr(false), terminating: ptr(true)}
)

// ep returns an endpoint at ip on node with conditions c.
func ep(ip, node string, c cond) discoveryv1.Endpoint {
	e := discoveryv1.Endpoint{
		Addresses:  []string{ip},
		Conditions: discoveryv1.EndpointConditions{Ready: c.ready, Serving: c.serving, Terminating: c.terminating},
	}
	if node != "" {
		e.NodeName = ptr(node)
	}
	return e
}

// withZoneHints and withNodeHints add topology hints to an endpoint.
func withZoneHints(e discoveryv1.Endpoint, zones ...string) discoveryv1.Endpoint {
	if e.Hints == nil {
		e.Hints = &discoveryv1.EndpointHints{}
	}
	for _, z := range zones {
		e.Hints.ForZones = append(e.Hints.ForZones, discoveryv1.ForZone{Name: z})
	}
	return e
}

func withNodeHints(e discoveryv1.Endpoint, nodes ...string) discoveryv1.Endpoint {
	if e.Hints == nil {
		e.Hints = &discoveryv1.EndpointHints{}
	}
	for _, n := range nodes {
		e.Hints.ForNodes = append(e.Hints.ForNodes, discoveryv1.ForNode{Name: n})
	}
	return e
}

func ptr[T any](v T) *T { return &v }

// key returns the ServicePortKey of port (name, TCP) of service name.
func key(name, port string, family proxy.IPFamily) proxy.ServicePortKey {
	return proxy.ServicePortKey{
		ServicePortName: proxy.ServicePortName{NamespacedName: types.NamespacedName{Namespace: testNS, Name: name}, Port: port, Protocol: proxy.TCP},
		Family:          family,
	}
}

// snapshotOf feeds the objects to a fresh Brain and takes a full Snapshot.
func snapshotOf(t *testing.T, opts Options, svcs []*v1.Service, slices ...*discoveryv1.EndpointSlice) *proxy.State {
	t.Helper()
	b := newTestBrain(t, opts)
	for _, s := range svcs {
		b.OnServiceUpdate(nil, s)
	}
	for _, s := range slices {
		b.OnEndpointSliceUpdate(nil, s)
	}
	u, _ := b.Snapshot(true)
	return u.State
}

// endpointSets is what categorization decided for a port, as strings.
type endpointSets struct {
	Cluster, Local, Internal, External []string
	HasEndpoints                       bool
	LocalReady                         int
}

func addrs(eps []proxy.Endpoint) []string {
	var out []string
	for _, e := range eps {
		out = append(out, e.String())
	}
	return out
}

func setsOf(sp *proxy.ServicePort) endpointSets {
	return endpointSets{
		Cluster:      addrs(sp.ClusterEndpoints),
		Local:        addrs(sp.LocalEndpoints),
		Internal:     addrs(sp.InternalEndpoints),
		External:     addrs(sp.ExternalEndpoints),
		HasEndpoints: sp.HasEndpoints,
		LocalReady:   sp.LocalReadyEndpoints,
	}
}

func mustAddrs(ss ...string) []netip.Addr {
	var out []netip.Addr
	for _, s := range ss {
		out = append(out, netip.MustParseAddr(s))
	}
	return out
}

func mustPrefixes(ss ...string) []netip.Prefix {
	var out []netip.Prefix
	for _, s := range ss {
		out = append(out, netip.MustParsePrefix(s))
	}
	return out
}
