package e2e

// Address plan: see services_helpers_linux_test.go.

import (
	"context"
	"errors"
	"net/netip"
	"syscall"
	"testing"

	v1 "k8s.io/api/core/v1"

	"github.com/nodenet/nodenet/internal/testroot"
	"github.com/nodenet/nodenet/test/netnode"
)

// TestServices sends real packets through node-1's nftables service
// proxy, programmed from Service and EndpointSlice objects by the brain.
func TestServices(t *testing.T) {
	testroot.Require(t, "node network namespaces and nftables")
	e := newServiceEnv(t, serviceEnvOptions{})
	p := e.startProxy(t)
	be1, be2, be3 := e.backends["be-1"], e.backends["be-2"], e.backends["be-3"]

	web := service("web", "10.96.0.10", v1.ProtocolTCP, nodePort(30080, v1.ServiceExternalTrafficPolicyCluster), withExternalIP(externalIP))
	sticky := service("sticky", "10.96.0.11", v1.ProtocolTCP, withClientIPAffinity)
	local := service("local", "10.96.0.12", v1.ProtocolTCP, nodePort(30081, v1.ServiceExternalTrafficPolicyLocal))
	empty := service("empty", "10.96.0.13", v1.ProtocolTCP, nodePort(30082, v1.ServiceExternalTrafficPolicyCluster))
	dns := service("dns", "10.96.0.14", v1.ProtocolUDP)
	dnsSlice := slice(dns, 1, be2, be3)
	p.apply(
		web, slice(web, 1, be1, be2, be3),
		sticky, slice(sticky, 1, be1, be2, be3),
		local, slice(local, 1, be1, be2),
		empty, slice(empty, 1),
		dns, dnsSlice,
	)
	p.sync(t)

	ctx := t.Context()
	webCluster := netip.MustParseAddrPort("10.96.0.10:80")
	webNodePort := netip.AddrPortFrom(e.node1.IP, 30080)
	webExternal := netip.AddrPortFrom(netip.MustParseAddr(externalIP), 80)

	t.Run("a pod and a host outside the node reach a backend through the cluster IP, the node port and an external IP", func(t *testing.T) {
		for _, from := range []*netnode.NS{e.client.NS, e.outside.NS} {
			for _, dst := range []netip.AddrPort{webCluster, webNodePort, webExternal} {
				a := eventuallyAsk(t, from, dst)
				if e.backends[a.Backend] == nil {
					t.Errorf("%s -> %s: answered by %q, not a backend", from.Name, dst, a.Backend)
				}
			}
		}
	})

	t.Run("a pod's traffic to a cluster IP keeps the pod's address", func(t *testing.T) {
		if a := eventuallyAsk(t, e.client.NS, webCluster); a.Source != e.client.IP {
			t.Errorf("%s saw the client as %s, want the pod's %s", a.Backend, a.Source, e.client.IP)
		}
	})

	t.Run("ClientIP session affinity keeps a client on one backend, while without it several backends answer", func(t *testing.T) {
		const connections = 12
		for _, tc := range []struct {
			dst  netip.AddrPort
			want func(n int) bool
			what string
		}{
			{netip.MustParseAddrPort("10.96.0.11:80"), func(n int) bool { return n == 1 }, "one backend"},
			{webCluster, func(n int) bool { return n >= 2 }, "several backends"},
		} {
			seen := map[string]int{}
			for range connections {
				seen[eventuallyAsk(t, e.client.NS, tc.dst).Backend]++
			}
			if !tc.want(len(seen)) {
				t.Errorf("%d connections to %s reached %v, want %s", connections, tc.dst, seen, tc.what)
			}
		}
	})

	t.Run("externalTrafficPolicy Local preserves the client's address, while Cluster masquerades traffic from outside", func(t *testing.T) {
		for range 6 {
			a := eventuallyAsk(t, e.outside.NS, netip.AddrPortFrom(e.node1.IP, 30081))
			if a.Backend != be1.Name || a.Source != e.outside.IP {
				t.Errorf("eTP Local: answered by %s seeing %s, want %s (node-1's only endpoint) seeing %s", a.Backend, a.Source, be1.Name, e.outside.IP)
			}
		}
		for range 6 {
			a := eventuallyAsk(t, e.outside.NS, webNodePort)
			if a.Source == e.outside.IP {
				t.Errorf("eTP Cluster: %s saw the outside client's own address %s, want it masqueraded", a.Backend, a.Source)
			}
		}
	})

	t.Run("a service without endpoints refuses connections instead of letting them time out", func(t *testing.T) {
		for _, c := range []struct {
			from *netnode.NS
			dst  netip.AddrPort
		}{
			{e.client.NS, netip.MustParseAddrPort("10.96.0.13:80")},
			{e.outside.NS, netip.AddrPortFrom(e.node1.IP, 30082)},
		} {
			_, err := ask(ctx, c.from, c.dst)
			if !errors.Is(err, syscall.ECONNREFUSED) {
				t.Errorf("%s -> %s: %v, want connection refused", c.from.Name, c.dst, err)
			}
		}
	})

	t.Run("removing a UDP backend flushes its conntrack entry so a client that keeps its port moves to a remaining backend", func(t *testing.T) {
		u := dialUDP(t, e.client.NS, netip.MustParseAddrPort("10.96.0.14:53"))
		e.checkUDPMove(t, p, u, dnsSlice)
	})

	t.Run("a proxy restart keeps established connections and keeps serving new ones", func(t *testing.T) {
		// One service per stream: a stream's server listens on the port
		// its client dials, so each service port is its own target port
		// (and node port), with the stream's server as only endpoint.
		// Streams to a node port service dial the node port.
		cluster := v1.ServiceExternalTrafficPolicyCluster
		longs := []struct {
			svc    *v1.Service
			server *netnode.Pod
			client *netnode.NS
		}{
			{service("long-pod-cip", "10.96.0.20", v1.ProtocolTCP, samePorts(9010)), be1, e.client.NS},
			{service("long-outside-cip", "10.96.0.21", v1.ProtocolTCP, samePorts(9011)), be2, e.outside.NS},
			{service("long-pod-np", "10.96.0.22", v1.ProtocolTCP, samePorts(30083), nodePort(30083, cluster)), be3, e.client.NS},
			{service("long-outside-np", "10.96.0.23", v1.ProtocolTCP, samePorts(30084), nodePort(30084, cluster)), be1, e.outside.NS},
		}
		// A UDP client keeping its port must keep its backend too: the
		// new proxy's first conntrack flush may only remove entries to
		// addresses that are no endpoint.
		resolver := service("resolver", "10.96.0.24", v1.ProtocolUDP)
		p.apply(resolver, slice(resolver, 1, be1, be2, be3))
		for _, l := range longs {
			p.apply(l.svc, slice(l.svc, 1, l.server))
		}
		p.sync(t)

		var streams []*netnode.Stream
		for _, l := range longs {
			sp := l.svc.Spec.Ports[0]
			dst := netip.MustParseAddr(l.svc.Spec.ClusterIP)
			if l.svc.Spec.Type == v1.ServiceTypeNodePort {
				dst = e.node1.IP
			}
			streams = append(streams, netnode.StartStream(t, netnode.StreamOptions{Server: l.server.NS, Client: l.client, Addr: dst, Port: int(sp.Port)}))
		}
		for _, s := range streams {
			if err := s.WaitPassing(ctx, 5, converge); err != nil {
				t.Fatal(err)
			}
		}
		udp := map[*udpClient]string{}
		for range 6 {
			u := dialUDP(t, e.client.NS, netip.MustParseAddrPort("10.96.0.24:53"))
			udp[u] = u.first(t)
		}

		p = p.restart(t)

		for _, s := range streams {
			if err := s.WaitPassing(ctx, 5, converge); err != nil {
				t.Errorf("across the restart: %v", err)
			}
		}
		for u, was := range udp {
			if got, err := u.ask(); got != was {
				t.Errorf("UDP %s: answered by %s before the restart, by %q (%v) after", u.conn.LocalAddr(), was, got, err)
			}
		}
		// The table is whole once the first sync returns: new connections
		// need no retry.
		for _, from := range []*netnode.NS{e.client.NS, e.outside.NS} {
			for _, dst := range []netip.AddrPort{webCluster, webNodePort, webExternal} {
				a, err := ask(ctx, from, dst)
				if err != nil || e.backends[a.Backend] == nil {
					t.Errorf("%s -> %s after the restart: answered by %q (%v)", from.Name, dst, a.Backend, err)
				}
			}
		}
	})

	t.Run("a proxy restarted with an endpoint removed while it was down keeps connections to the remaining endpoints and sends new ones only there", func(t *testing.T) {
		rolling := service("rolling", "10.96.0.25", v1.ProtocolTCP,
			nodePort(30085, v1.ServiceExternalTrafficPolicyCluster),
			withPort("s-pod", v1.ProtocolTCP, 9020, 9020, 0),
			withPort("s-outside", v1.ProtocolTCP, 30086, 30086, 30086),
			withPort("dns", v1.ProtocolUDP, 53, backendUDPPort, 0))
		rollingCIP := netip.MustParseAddrPort("10.96.0.25:80")
		rollingNodePort := netip.AddrPortFrom(e.node1.IP, 30085)
		rollingDNS := netip.MustParseAddrPort("10.96.0.25:53")

		// Streams to be-2 first, while it is the only endpoint; then the
		// service grows to every backend.
		only2 := slice(rolling, 1, be2)
		p.apply(rolling, only2)
		p.sync(t)
		streams := []*netnode.Stream{
			netnode.StartStream(t, netnode.StreamOptions{Server: be2.NS, Client: e.client.NS, Addr: rollingCIP.Addr(), Port: 9020}),
			netnode.StartStream(t, netnode.StreamOptions{Server: be2.NS, Client: e.outside.NS, Addr: e.node1.IP, Port: 30086}),
		}
		for _, s := range streams {
			if err := s.WaitPassing(ctx, 5, converge); err != nil {
				t.Fatal(err)
			}
		}
		p.update(only2, slice(rolling, 2, be1, be2, be3))
		p.sync(t)
		// be-1 serves before the restart, so its absence after means
		// something.
		err := netnode.Eventually(ctx, converge, func(ctx context.Context) error {
			a, err := ask(ctx, e.client.NS, rollingCIP)
			if err == nil && a.Backend != be1.Name {
				err = errors.New("answered by " + a.Backend)
			}
			return err
		})
		if err != nil {
			t.Fatalf("%s never answered: %v", be1.Name, err)
		}
		// One UDP client on be-1, one on another backend; each new socket
		// is a new flow and a new random pick.
		var gone, kept *udpClient
		var keptBy string
		for range 40 {
			if gone != nil && kept != nil {
				break
			}
			u := dialUDP(t, e.client.NS, rollingDNS)
			switch got := u.first(t); {
			case got == be1.Name && gone == nil:
				gone = u
			case got != be1.Name && kept == nil:
				kept, keptBy = u, got
			}
		}
		if gone == nil || kept == nil {
			t.Fatalf("40 UDP flows did not reach both %s and another backend", be1.Name)
		}

		// be-1 leaves while the agent is down; it still runs and answers.
		p = p.restart(t, slice(rolling, 3, be2, be3))

		for _, s := range streams {
			if err := s.WaitPassing(ctx, 5, converge); err != nil {
				t.Errorf("a connection to a remaining endpoint, across the restart: %v", err)
			}
		}
		for _, from := range []*netnode.NS{e.client.NS, e.outside.NS} {
			dst := rollingCIP
			if from == e.outside.NS {
				dst = rollingNodePort
			}
			seen := map[string]int{}
			for range 12 {
				a, err := ask(ctx, from, dst)
				if err != nil {
					t.Errorf("%s -> %s after the restart: %v", from.Name, dst, err)
					continue
				}
				seen[a.Backend]++
			}
			if seen[be1.Name] > 0 || seen[be2.Name]+seen[be3.Name] == 0 {
				t.Errorf("%s -> %s after the restart reached %v, want only %s and %s", from.Name, dst, seen, be2.Name, be3.Name)
			}
		}
		// The new proxy's first sync reconciles conntrack: the flow pinned
		// to be-1 moves, the other stays.
		if got, err := kept.ask(); got != keptBy {
			t.Errorf("the UDP flow on %s moved to %q (%v) across the restart", keptBy, got, err)
		}
		err = netnode.Eventually(ctx, converge, func(context.Context) error {
			got, err := gone.ask()
			if err == nil && got != be2.Name && got != be3.Name {
				err = errors.New("answered by " + got)
			}
			return err
		})
		if err != nil {
			t.Errorf("the UDP flow on %s after the restart: %v", be1.Name, err)
		}
	})
}

// TestDualStackServices sends IPv6 packets through a dual-stack service:
// both families in the brain and the backend, IPv6 pods, node addresses
// and routes.
func TestDualStackServices(t *testing.T) {
	testroot.Require(t, "node network namespaces and nftables")
	e := newServiceEnv(t, serviceEnvOptions{DualStack: true})
	p := e.startProxy(t)
	be1, be2, be3 := e.backends["be-1"], e.backends["be-2"], e.backends["be-3"]
	// A pod on the node without a proxy: it reaches the node port.
	client2 := e.addPod(t, e.node2, "client-2")

	web := service("web", "10.96.0.10", v1.ProtocolTCP, nodePort(30080, v1.ServiceExternalTrafficPolicyCluster), dualStack("fd00:10:96::10"))
	dns := service("dns", "10.96.0.14", v1.ProtocolUDP, dualStack("fd00:10:96::14"))
	dns4, dns6 := slice(dns, 1, be2, be3), e.slice6(dns, 1, be2, be3)
	p.apply(
		web, slice(web, 1, be1, be2, be3), e.slice6(web, 1, be1, be2, be3),
		dns, dns4, dns6,
	)
	p.sync(t)

	cluster6 := netip.MustParseAddrPort("[fd00:10:96::10]:80")
	nodePort6 := netip.AddrPortFrom(e.ip6[e.node1.Name], 30080)

	t.Run("pods and a host outside the node reach a backend over IPv6 through the cluster IP and the node's IPv6 node port", func(t *testing.T) {
		for _, c := range []struct {
			from *netnode.NS
			// self is the client's own address; masqueraded says the
			// backend must see another.
			self        netip.Addr
			dst         netip.AddrPort
			masqueraded bool
		}{
			{e.client.NS, e.ip6[e.client.Name], cluster6, false},
			{e.outside.NS, e.ip6[e.outside.Name], cluster6, true},
			{e.outside.NS, e.ip6[e.outside.Name], nodePort6, true},
			{client2.NS, e.ip6[client2.Name], nodePort6, true},
			// The IPv4 half of the same service still answers.
			{e.client.NS, e.client.IP, netip.MustParseAddrPort("10.96.0.10:80"), false},
		} {
			a := eventuallyAsk(t, c.from, c.dst)
			switch {
			case e.backends[a.Backend] == nil:
				t.Errorf("%s -> %s: answered by %q, not a backend", c.from.Name, c.dst, a.Backend)
			case a.Source.Is4() != c.dst.Addr().Is4():
				t.Errorf("%s -> %s: %s saw the client as %s, of the other family", c.from.Name, c.dst, a.Backend, a.Source)
			case !c.masqueraded && a.Source != c.self:
				t.Errorf("%s -> %s: %s saw the client as %s, want its own %s", c.from.Name, c.dst, a.Backend, a.Source, c.self)
			case c.masqueraded && a.Source == c.self:
				t.Errorf("%s -> %s: %s saw the client's own address %s, want it masqueraded", c.from.Name, c.dst, a.Backend, a.Source)
			}
		}
	})

	t.Run("removing a UDP backend flushes its IPv6 conntrack entry so a client that keeps its port moves to a remaining backend", func(t *testing.T) {
		u := dialUDP(t, e.client.NS, netip.MustParseAddrPort("[fd00:10:96::14]:53"))
		e.checkUDPMove(t, p, u, dns4, dns6)
	})
}
