package e2e

// Address plan: see services_helpers_linux_test.go.

import (
	"context"
	"errors"
	"net/netip"
	"slices"
	"syscall"
	"testing"

	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"

	"github.com/nodenet/nodenet/internal/testroot"
	"github.com/nodenet/nodenet/test/netnode"
)

// TestServices sends real packets through node-1's nftables service
// proxy, programmed from Service and EndpointSlice objects by the brain.
func TestServices(t *testing.T) {
	testroot.Require(t, "node network namespaces and nftables")
	e := newServiceEnv(t)
	p := startProxy(t, e.node1)
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
		var first string
		err := netnode.Eventually(ctx, converge, func(context.Context) (err error) {
			first, err = u.ask()
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		// The same source port keeps the same conntrack entry, so the same
		// backend, whatever the random pick would do for a new flow.
		for range 5 {
			if got, err := u.ask(); got != first {
				t.Fatalf("a client keeping its port moved from %s to %q (%v) with nothing changed", first, got, err)
			}
		}
		remaining := slices.DeleteFunc(slices.Clone(dnsSlice.Endpoints), func(ep discoveryv1.Endpoint) bool {
			return ep.Addresses[0] == e.backends[first].IP.String()
		})
		next := dnsSlice.DeepCopy()
		next.ResourceVersion = "2"
		next.Endpoints = remaining
		want := be2.Name
		if first == be2.Name {
			want = be3.Name
		}
		// The removed backend still runs and answers: only the flush can
		// move the client.
		p.update(dnsSlice, next)
		p.sync(t)
		err = netnode.Eventually(ctx, converge, func(context.Context) error {
			got, err := u.ask()
			if err == nil && got != want {
				err = errors.New("still answered by " + got)
			}
			return err
		})
		if err != nil {
			t.Errorf("after %s left the service: %v", first, err)
		}
	})
}
