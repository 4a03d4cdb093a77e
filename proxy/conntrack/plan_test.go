package conntrack

import (
	"net/netip"
	"slices"
	"testing"

	"k8s.io/apimachinery/pkg/types"

	"github.com/nodenet/nodenet/proxy"
)

// port builds a ServicePort of service name in the family of clusterIP,
// whose endpoints (ip:port) serve every traffic kind.
func port(name string, proto proxy.Protocol, clusterIP string, p uint16, eps ...string) *proxy.ServicePort {
	ip := netip.MustParseAddr(clusterIP)
	sp := &proxy.ServicePort{
		Key: proxy.ServicePortKey{
			ServicePortName: proxy.ServicePortName{NamespacedName: types.NamespacedName{Namespace: "ns", Name: name}, Protocol: proto},
			Family:          proxy.FamilyOf(ip),
		},
		Type:      proxy.ClusterIP,
		ClusterIP: ip,
		Port:      p,
	}
	for _, s := range eps {
		ap := netip.MustParseAddrPort(s)
		sp.ClusterEndpoints = append(sp.ClusterEndpoints, proxy.Endpoint{IP: ap.Addr(), Port: ap.Port(), Ready: true, Serving: true})
	}
	sp.InternalEndpoints, sp.ExternalEndpoints = sp.ClusterEndpoints, sp.ClusterEndpoints
	sp.HasEndpoints = len(eps) > 0
	return sp
}

// with returns a copy of sp changed by fn (ServicePorts are immutable).
func with(sp *proxy.ServicePort, fn func(*proxy.ServicePort)) *proxy.ServicePort {
	c := *sp
	fn(&c)
	return &c
}

func state(sps ...*proxy.ServicePort) *proxy.State {
	s := &proxy.State{ServicePorts: map[proxy.ServicePortKey]*proxy.ServicePort{}}
	for _, sp := range sps {
		s.ServicePorts[sp.Key] = sp
	}
	return s
}

func keys(sps ...*proxy.ServicePort) map[proxy.ServicePortKey]struct{} {
	m := map[proxy.ServicePortKey]struct{}{}
	for _, sp := range sps {
		m[sp.Key] = struct{}{}
	}
	return m
}

// flow is an entry from orig dst to reply src.
func flow(proto proxy.Protocol, dst, replySrc string) Entry {
	return Entry{Protocol: proto, OrigDst: netip.MustParseAddrPort(dst), ReplySrc: netip.MustParseAddrPort(replySrc)}
}

func TestPlan(t *testing.T) {
	dns := port("dns", proxy.UDP, "10.96.0.10", 53, "10.244.1.5:5353", "10.244.2.6:5353")
	dnsOneLeft := port("dns", proxy.UDP, "10.96.0.10", 53, "10.244.2.6:5353")
	dnsEmpty := port("dns", proxy.UDP, "10.96.0.10", 53)
	other := port("other", proxy.UDP, "10.96.0.11", 53, "10.244.1.5:5353")
	web := port("web", proxy.TCP, "10.96.0.20", 80, "10.244.1.5:8080", "10.244.2.6:8080")
	external := func(sp *proxy.ServicePort) {
		sp.Type = proxy.NodePort
		sp.NodePort = 30053
		sp.ExternalIPs = []netip.Addr{netip.MustParseAddr("192.0.2.10")}
		sp.LoadBalancerIPs = []netip.Addr{netip.MustParseAddr("198.51.100.7")}
	}
	// A client that kept sending to each frontend of dns, DNATed to the
	// endpoint that is now gone, to the one that stays, or not at all.
	toGone := []Entry{
		flow(proxy.UDP, "10.96.0.10:53", "10.244.1.5:5353"),
		flow(proxy.UDP, "192.0.2.10:53", "10.244.1.5:5353"),
		flow(proxy.UDP, "198.51.100.7:53", "10.244.1.5:5353"),
		flow(proxy.UDP, "172.18.0.2:30053", "10.244.1.5:5353"),
	}
	toStaying := []Entry{
		flow(proxy.UDP, "10.96.0.10:53", "10.244.2.6:5353"),
		flow(proxy.UDP, "192.0.2.10:53", "10.244.2.6:5353"),
		flow(proxy.UDP, "172.18.0.2:30053", "10.244.2.6:5353"),
	}
	unNATed := []Entry{
		flow(proxy.UDP, "10.96.0.10:53", "10.96.0.10:53"),
		flow(proxy.UDP, "172.18.0.2:30053", "172.18.0.2:30053"),
	}
	unrelated := []Entry{
		flow(proxy.UDP, "10.96.0.11:53", "10.244.1.5:5353"),   // other service, same endpoint
		flow(proxy.UDP, "10.244.1.5:5353", "10.244.1.5:5353"), // straight to the pod
		flow(proxy.TCP, "10.96.0.10:53", "10.244.1.5:5353"),   // not a UDP service port
		flow(proxy.UDP, "10.96.0.10:54", "10.244.1.5:5353"),   // another port
	}

	tests := []struct {
		name       string
		prev, next *proxy.State
		changed    map[proxy.ServicePortKey]struct{}
		stale      []Entry
		kept       []Entry
	}{
		{
			name:    "a removed endpoint's entries go on every frontend, the remaining endpoint's stay",
			prev:    state(with(dns, external), other),
			next:    state(with(dnsOneLeft, external), other),
			changed: keys(dns),
			stale:   slices.Concat(toGone, unNATed),
			kept:    slices.Concat(toStaying, unrelated),
		},
		{
			name:    "the last endpoint's removal flushes its entries so clients get rejected",
			prev:    state(dnsOneLeft, other),
			next:    state(dnsEmpty, other),
			changed: keys(dns),
			stale:   []Entry{flow(proxy.UDP, "10.96.0.10:53", "10.244.2.6:5353")},
			kept:    unrelated,
		},
		{
			name:    "a service that gets its first endpoint loses the entries made while it had none",
			prev:    state(with(dnsEmpty, external), other),
			next:    state(with(dnsOneLeft, external), other),
			changed: keys(dns),
			stale:   slices.Concat(unNATed, toGone),
			kept:    slices.Concat(toStaying, unrelated),
		},
		{
			name:    "a new service's frontends lose entries made before it existed",
			prev:    state(other),
			next:    state(dns, other),
			changed: keys(dns),
			stale:   []Entry{flow(proxy.UDP, "10.96.0.10:53", "10.96.0.10:53")},
			kept:    slices.Concat(toStaying[:1], unrelated),
		},
		{
			name:  "the first sync reconciles every frontend",
			next:  state(with(dns, external), other),
			stale: slices.Concat(unNATed, []Entry{flow(proxy.UDP, "10.96.0.11:53", "10.244.2.6:5353")}),
			kept:  slices.Concat(toGone, toStaying, unrelated),
		},
		{
			name:    "a removed service's entries all go",
			prev:    state(with(dns, external), other),
			next:    state(other),
			changed: keys(dns),
			stale:   slices.Concat(toGone, toStaying, unNATed),
			kept:    unrelated,
		},
		{
			name:    "an endpoint whose target port changed is a removed endpoint",
			prev:    state(dns),
			next:    state(port("dns", proxy.UDP, "10.96.0.10", 53, "10.244.1.5:53", "10.244.2.6:5353")),
			changed: keys(dns),
			stale:   []Entry{flow(proxy.UDP, "10.96.0.10:53", "10.244.1.5:5353")},
			kept:    []Entry{flow(proxy.UDP, "10.96.0.10:53", "10.244.1.5:53"), toStaying[0]},
		},
		{
			name:    "an added endpoint makes nothing stale",
			prev:    state(dnsOneLeft),
			next:    state(dns),
			changed: keys(dns),
			kept:    slices.Concat(toGone, toStaying, unNATed),
		},
		{
			name:    "a change that keeps frontends and endpoints makes nothing stale",
			prev:    state(dns),
			next:    state(with(dns, func(sp *proxy.ServicePort) { sp.SessionAffinity = 10800e9 })),
			changed: keys(dns),
			kept:    slices.Concat(toGone, toStaying, unNATed),
		},
		{
			name:    "a port not in changed is left alone",
			prev:    state(dns, other),
			next:    state(dnsEmpty, other),
			changed: keys(other),
			kept:    slices.Concat(toGone, toStaying),
		},
		{
			name:    "TCP entries never go stale",
			prev:    state(web),
			next:    state(port("web", proxy.TCP, "10.96.0.20", 80, "10.244.2.6:8080")),
			changed: keys(web),
			kept:    []Entry{flow(proxy.TCP, "10.96.0.20:80", "10.244.1.5:8080")},
		},
		{
			name:    "SCTP entries go stale like UDP ones",
			prev:    state(port("sig", proxy.SCTP, "10.96.0.30", 3868, "10.244.1.5:3868", "10.244.2.6:3868")),
			next:    state(port("sig", proxy.SCTP, "10.96.0.30", 3868, "10.244.2.6:3868")),
			changed: keys(port("sig", proxy.SCTP, "10.96.0.30", 3868)),
			stale:   []Entry{flow(proxy.SCTP, "10.96.0.30:3868", "10.244.1.5:3868")},
			kept:    []Entry{flow(proxy.SCTP, "10.96.0.30:3868", "10.244.2.6:3868"), flow(proxy.UDP, "10.96.0.30:3868", "10.244.1.5:3868")},
		},
		{
			name:    "a removed service's address taken over by a new one keeps the new one's entries",
			prev:    state(dns),
			next:    state(port("dns2", proxy.UDP, "10.96.0.10", 53, "10.244.3.7:53")),
			changed: keys(dns, port("dns2", proxy.UDP, "10.96.0.10", 53)),
			stale:   slices.Concat(toGone[:1], toStaying[:1]),
			kept:    []Entry{flow(proxy.UDP, "10.96.0.10:53", "10.244.3.7:53")},
		},
		{
			name:    "a service address whose port equals a planned node port is that service's",
			prev:    state(with(dns, external), port("high", proxy.UDP, "10.96.0.40", 30053, "10.244.3.7:53")),
			next:    state(with(dnsOneLeft, external), port("high", proxy.UDP, "10.96.0.40", 30053, "10.244.3.7:53")),
			changed: keys(dns),
			stale:   toGone,
			kept:    []Entry{flow(proxy.UDP, "10.96.0.40:30053", "10.244.3.7:53")},
		},
		{
			name:    "IPv6 frontends and 4-in-6 mapped addresses",
			prev:    state(port("dns6", proxy.UDP, "fd00:96::a", 53, "[fd00:244::5]:53", "[fd00:244::6]:53"), dns),
			next:    state(port("dns6", proxy.UDP, "fd00:96::a", 53, "[fd00:244::6]:53"), dnsOneLeft),
			changed: keys(dns, port("dns6", proxy.UDP, "fd00:96::a", 53)),
			stale: []Entry{
				flow(proxy.UDP, "[fd00:96::a]:53", "[fd00:244::5]:53"),
				flow(proxy.UDP, "[::ffff:10.96.0.10]:53", "[::ffff:10.244.1.5]:5353"),
			},
			kept: []Entry{flow(proxy.UDP, "[fd00:96::a]:53", "[fd00:244::6]:53")},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			plan := NewPlan(tt.prev, tt.next, tt.changed)
			for _, e := range tt.stale {
				if !plan.Stale(e) {
					t.Errorf("%s → %s kept, want it flushed", e.OrigDst, e.ReplySrc)
				}
			}
			for _, e := range tt.kept {
				if plan.Stale(e) {
					t.Errorf("%s %s → %s flushed, want it kept", e.Protocol, e.OrigDst, e.ReplySrc)
				}
			}
			if len(tt.stale) == 0 && !plan.Empty() {
				t.Errorf("plan has %d frontends, want none: nothing should even list the table", len(plan.Keep))
			}
		})
	}
}

func TestPlanFamilies(t *testing.T) {
	dns6 := port("dns6", proxy.UDP, "fd00:96::a", 53, "[fd00:244::5]:53")
	dns := port("dns", proxy.UDP, "10.96.0.10", 53, "10.244.1.5:53")
	if got := NewPlan(nil, state(dns6, dns), nil).Families(); !slices.Equal(got, []proxy.IPFamily{proxy.IPv4, proxy.IPv6}) {
		t.Errorf("Families() = %v, want IPv4 then IPv6", got)
	}
	if got := NewPlan(nil, state(dns6), nil).Families(); !slices.Equal(got, []proxy.IPFamily{proxy.IPv6}) {
		t.Errorf("Families() = %v, want IPv6 only", got)
	}
}
