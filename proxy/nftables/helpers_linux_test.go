package nftables

// Address plan of this package's tests:
//
//	this node's pods       10.244.1.0/24, fd00:244:1::/64 (cluster CIDRs 10.244.0.0/16, fd00:244::/32)
//	other nodes' pods      10.244.2.0/24
//	service CIDRs          10.96.0.0/16, fd00:96::/112
//	this node              192.168.0.10 (and 127.0.0.1), fd00:1::10
//	another node           192.168.0.11
//	external IPs           198.51.100.1-99; load-balancer IPs 198.51.100.100+
//	clients off-cluster    203.0.113.0/24

import (
	"context"
	"net/netip"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2/ktesting"
	"sigs.k8s.io/knftables"

	"github.com/nodenet/nodenet/proxy"
)

// testOptions are the Options most tests use.
func testOptions(nft knftables.Interface) Options {
	return Options{
		NFT:               nft,
		Families:          []proxy.IPFamily{proxy.IPv4, proxy.IPv6},
		LocalTrafficCIDRs: []netip.Prefix{netip.MustParsePrefix("10.244.0.0/16"), netip.MustParsePrefix("fd00:244::/32")},
		ServiceCIDRs:      []netip.Prefix{netip.MustParsePrefix("10.96.0.0/16"), netip.MustParsePrefix("fd00:96::/112")},
		NodeIPs:           []netip.Addr{netip.MustParseAddr("192.168.0.10"), netip.MustParseAddr("fd00:1::10")},
	}
}

// port builds a ServicePort from "namespace/name:portname/PROTO" (the
// port name may be empty), its cluster IP and port, and its endpoints,
// which serve every kind of traffic unless a tweak says otherwise.
func port(key, clusterIP string, p uint16, eps []proxy.Endpoint, tweaks ...func(*proxy.ServicePort)) *proxy.ServicePort {
	nsName, rest, _ := strings.Cut(key, ":")
	ns, name, _ := strings.Cut(nsName, "/")
	portName, proto, _ := strings.Cut(rest, "/")
	ip := netip.MustParseAddr(clusterIP)
	sp := &proxy.ServicePort{
		Key: proxy.ServicePortKey{
			ServicePortName: proxy.ServicePortName{
				NamespacedName: types.NamespacedName{Namespace: ns, Name: name},
				Port:           portName,
				Protocol:       proxy.Protocol(proto),
			},
			Family: proxy.FamilyOf(ip),
		},
		Type:              proxy.ClusterIP,
		ClusterIP:         ip,
		Port:              p,
		ClusterEndpoints:  eps,
		InternalEndpoints: eps,
		ExternalEndpoints: eps,
		HasEndpoints:      len(eps) > 0,
	}
	for _, ep := range eps {
		if ep.Local {
			sp.LocalEndpoints = append(sp.LocalEndpoints, ep)
		}
	}
	for _, t := range tweaks {
		t(sp)
	}
	return sp
}

func nodePort(np uint16) func(*proxy.ServicePort) {
	return func(sp *proxy.ServicePort) { sp.Type, sp.NodePort = proxy.NodePort, np }
}

func externalIPs(ips ...string) func(*proxy.ServicePort) {
	return func(sp *proxy.ServicePort) {
		for _, ip := range ips {
			sp.ExternalIPs = append(sp.ExternalIPs, netip.MustParseAddr(ip))
		}
	}
}

func loadBalancer(ips ...string) func(*proxy.ServicePort) {
	return func(sp *proxy.ServicePort) {
		sp.Type = proxy.LoadBalancer
		for _, ip := range ips {
			sp.LoadBalancerIPs = append(sp.LoadBalancerIPs, netip.MustParseAddr(ip))
		}
	}
}

func sourceRanges(ps ...string) func(*proxy.ServicePort) {
	return func(sp *proxy.ServicePort) {
		for _, p := range ps {
			sp.LoadBalancerSourceRanges = append(sp.LoadBalancerSourceRanges, netip.MustParsePrefix(p))
		}
	}
}

func affinity(d time.Duration) func(*proxy.ServicePort) {
	return func(sp *proxy.ServicePort) { sp.SessionAffinity = d }
}

// externalLocal is eTP Local: external traffic uses the local endpoints.
func externalLocal(sp *proxy.ServicePort) {
	sp.ExternalPolicyLocal = true
	sp.ExternalEndpoints = sp.LocalEndpoints
}

// internalLocal is iTP Local: cluster IP traffic uses the local endpoints.
func internalLocal(sp *proxy.ServicePort) {
	sp.InternalPolicyLocal = true
	sp.InternalEndpoints = sp.LocalEndpoints
}

// ep is a ready endpoint "ip:port"; local says it is on this node.
func ep(addrPort string, local bool) proxy.Endpoint {
	ap := netip.MustParseAddrPort(addrPort)
	return proxy.Endpoint{IP: ap.Addr(), Port: ap.Port(), Local: local, Ready: true, Serving: true}
}

func eps(list ...proxy.Endpoint) []proxy.Endpoint { return list }

func state(ports ...*proxy.ServicePort) *proxy.State {
	s := &proxy.State{ServicePorts: map[proxy.ServicePortKey]*proxy.ServicePort{}, NodeName: "node-a"}
	for _, sp := range ports {
		s.ServicePorts[sp.Key] = sp
	}
	return s
}

// with returns a copy of s with ports added or replaced.
func with(s *proxy.State, ports ...*proxy.ServicePort) *proxy.State {
	n := state()
	for k, v := range s.ServicePorts {
		n.ServicePorts[k] = v
	}
	for _, sp := range ports {
		n.ServicePorts[sp.Key] = sp
	}
	return n
}

// without returns a copy of s without the given ports.
func without(s *proxy.State, ports ...*proxy.ServicePort) *proxy.State {
	n := with(s)
	for _, sp := range ports {
		delete(n.ServicePorts, sp.Key)
	}
	return n
}

func changed(ports ...*proxy.ServicePort) map[proxy.ServicePortKey]struct{} {
	m := map[proxy.ServicePortKey]struct{}{}
	for _, sp := range ports {
		m[sp.Key] = struct{}{}
	}
	return m
}

// newFakeBackend returns a Backend on a knftables Fake.
func newFakeBackend(t testing.TB, tweak ...func(*Options)) (*Backend, *knftables.Fake) {
	t.Helper()
	fake := knftables.NewFake(knftables.InetFamily, TableName)
	opts := testOptions(fake)
	opts.Logger = ktesting.NewLogger(t, ktesting.NewConfig())
	for _, f := range tweak {
		f(&opts)
	}
	b, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	return b, fake
}

func mustSync(t testing.TB, b *Backend, u proxy.Update) {
	t.Helper()
	if err := b.Sync(context.Background(), u); err != nil {
		t.Fatal(err)
	}
}

// representative is one service of each kind, both families.
func representative() *proxy.State {
	remote := ep("10.244.2.7:8080", false)
	local := ep("10.244.1.5:8080", true)
	return state(
		port("default/web:http/TCP", "10.96.0.10", 80, eps(local, remote)),
		port("default/dns:dns/UDP", "10.96.0.53", 53, eps(ep("10.244.2.8:53", false))),
		port("default/web6:/TCP", "fd00:96::10", 80, eps(ep("[fd00:244:1::5]:8080", true))),
		port("default/np:/TCP", "10.96.0.20", 80, eps(local, remote), nodePort(30080)),
		port("default/lb:/TCP", "10.96.0.30", 443, eps(local, remote), nodePort(30443),
			loadBalancer("198.51.100.100"), sourceRanges("203.0.113.0/25", "192.0.2.0/24"), externalIPs("198.51.100.1")),
		port("default/local:/TCP", "10.96.0.40", 80, eps(local, remote), nodePort(30040),
			loadBalancer("198.51.100.101"), externalLocal),
		port("default/remote-only:/TCP", "10.96.0.41", 80, eps(remote), nodePort(30041), externalLocal),
		port("default/sticky:/TCP", "10.96.0.50", 80, eps(local, remote), affinity(3*time.Hour), nodePort(30050)),
		port("default/empty:/TCP", "10.96.0.60", 80, nil, nodePort(30060)),
		port("default/itp:/TCP", "10.96.0.70", 80, eps(remote), internalLocal),
	)
}

func containsAll(s string, subs ...string) bool {
	for _, sub := range subs {
		if !strings.Contains(s, sub) {
			return false
		}
	}
	return true
}
