// Address plan: see fixture_test.go. In l2bridge mode the host endpoint
// takes 10.244.1.2 (config.SourceVIPOffset) and remote node i is reached
// by a host route 10.(128+i/256).(i%256).0/24 via 192.168.(2+i/250).(1+i%250)
// on the host vNIC (index 12, 192.168.0.0/16 on-link in the fake).
package hnsnet

import (
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/nodenet/nodenet/hns"
	"github.com/nodenet/nodenet/overlay"
	"github.com/nodenet/nodenet/overlay/hostroute"
)

func TestL2BridgeNetwork(t *testing.T) {
	h := newHost(hns.Version{})
	n := h.agent(t)
	ln := mustEnsure(t, n, l2bridgeSpec())
	nw, err := h.sim.GetNetworkByID(ctx, ln.ID)
	if err != nil {
		t.Fatal(err)
	}
	if nw.Type != hns.NetworkTypeL2Bridge || subnetList(nw, nw.Type) != podCIDR || adapterOf(nw) != "Ethernet" {
		t.Errorf("network = %s %s adapter %q", nw.Type, subnetList(nw, nw.Type), adapterOf(nw))
	}
	eps, _ := h.sim.ListEndpoints(ctx, ln.ID)
	if len(eps) != 1 || eps[0].Name != "nodenet_ep" || !hasIP(&eps[0], netip.MustParseAddr(sourceVIP)) {
		t.Fatalf("endpoints = %+v, want the host endpoint nodenet_ep at %s", eps, sourceVIP)
	}
	ns, err := h.sim.GetNamespace(ctx, eps[0].HostComputeNamespace)
	if err != nil || ns.Type != hns.NamespaceTypeHostDefault || ns.Compartment != hns.DefaultCompartment {
		t.Errorf("host endpoint namespace = %+v, %v; want it attached to the host's default namespace", ns, err)
	}
	if !slices.Equal(ln.Reserved, []netip.Addr{netip.MustParseAddr(sourceVIP)}) || ln.SourceVIP.IsValid() || ln.VtepMAC != nil {
		t.Errorf("reserved %v, source VIP %v, VTEP MAC %v", ln.Reserved, ln.SourceVIP, ln.VtepMAC)
	}
	// 3, not 4: the host's default namespace exists; no namespace is
	// created (issue 14 found every attach creating one).
	if ln.Writes != 3 || ln.MTU != 1500 {
		t.Errorf("writes %d (want network, endpoint, attach = 3), MTU %d", ln.Writes, ln.MTU)
	}
	if err := n.Check(ctx); err != nil {
		t.Errorf("Check: %v", err)
	}
	spec := l2bridgeSpec()
	spec.SourceVIP = netip.MustParseAddr(sourceVIP)
	if _, err := h.agent(t).EnsureLocal(ctx, spec); !overlay.IsSpecError(err) {
		t.Errorf("a source VIP in l2bridge mode: err = %v, want a SpecError", err)
	}
}

func TestL2BridgeHostRoutes(t *testing.T) {
	moved := remote(1)
	moved.NodeIP = netip.MustParseAddr("192.168.9.9")
	foreign := hostroute.Route{Destination: netip.MustParsePrefix("10.200.0.0/16"), NextHop: netip.MustParseAddr("192.168.1.1"), InterfaceIndex: 12, Metric: 256}
	for _, tc := range []struct {
		name string
		next []overlay.RemoteNode
		want overlay.SyncResult
	}{
		{"a node joining adds one route", remotes(4), overlay.SyncResult{Added: 1, Writes: 1}},
		{"a node leaving deletes its route", remotes(2), overlay.SyncResult{Removed: 1, Writes: 1}},
		{"a node changing IP replaces its route", []overlay.RemoteNode{remote(0), moved, remote(2)}, overlay.SyncResult{Updated: 1, Writes: 2}},
		{"an unchanged mesh writes nothing", remotes(3), overlay.SyncResult{}},
		{"an empty mesh deletes our routes and keeps foreign ones", nil, overlay.SyncResult{Removed: 3, Writes: 3}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHost(hns.Version{})
			n := h.agent(t)
			mustEnsure(t, n, l2bridgeSpec())
			h.ads.attached = true
			if err := h.routes.Add(ctx, foreign); err != nil {
				t.Fatal(err)
			}
			if res := mustSync(t, n, remotes(3)); res != (overlay.SyncResult{Added: 3, Writes: 3}) {
				t.Fatalf("first build = %+v", res)
			}
			before := h.routes.Writes()
			res := mustSync(t, n, tc.next)
			if res != tc.want || h.routes.Writes()-before != tc.want.Writes {
				t.Errorf("result %+v (fake writes %d), want %+v", res, h.routes.Writes()-before, tc.want)
			}
			got, _ := h.routes.List(ctx)
			want := []hostroute.Route{foreign}
			for _, r := range tc.next {
				want = append(want, hostroute.Route{Destination: r.PodCIDRs[0], NextHop: r.NodeIP, InterfaceIndex: 12, Metric: RouteMetric})
			}
			slices.SortFunc(want, func(a, b hostroute.Route) int { return strings.Compare(a.String(), b.String()) })
			if !slices.Equal(got, want) {
				t.Errorf("routes = %v\nwant %v", got, want)
			}
		})
	}
}

// Dual-stack l2bridge adds fd00:10:244:1::/64 to this node, fd00:77::/64
// on the host vNIC, and remote node fd00:10:244:2::/64 via fd00:77::12.
func TestL2BridgeDualStackHostRoutes(t *testing.T) {
	h := newHost(hns.Version{})
	h.routes.SetInterfaces(hostroute.FakeInterface{Index: 12, Name: "vEthernet (Ethernet)", Prefixes: []netip.Prefix{
		netip.MustParsePrefix("192.168.0.0/16"), netip.MustParsePrefix("fd00:77::/64")}})
	spec := l2bridgeSpec()
	spec.PodCIDRs = append(spec.PodCIDRs, netip.MustParsePrefix("fd00:10:244:1::/64"))
	spec.Gateways = append(spec.Gateways, netip.MustParseAddr("fd00:10:244:1::1"))
	spec.NodeIPv6 = netip.MustParseAddr("fd00:77::11")
	n := h.agent(t)
	if ln := mustEnsure(t, n, spec); ln.NodeIPv6 != spec.NodeIPv6 {
		t.Errorf("NodeIPv6 %v not handed over", ln.NodeIPv6)
	}
	h.ads.attached = true
	peer := overlay.RemoteNode{Name: "node-2", NodeIP: netip.MustParseAddr("192.168.1.12"), NodeIPv6: netip.MustParseAddr("fd00:77::12"),
		PodCIDRs: []netip.Prefix{netip.MustParsePrefix("10.244.2.0/24"), netip.MustParsePrefix("fd00:10:244:2::/64")}}
	routesTo := func() []string {
		list, _ := h.routes.List(ctx)
		var out []string
		for _, r := range list {
			if r.Metric == RouteMetric {
				out = append(out, r.Destination.String()+" via "+r.NextHop.String())
			}
		}
		slices.Sort(out)
		return out
	}

	res := mustSync(t, n, []overlay.RemoteNode{peer})
	want := []string{"10.244.2.0/24 via 192.168.1.12", "fd00:10:244:2::/64 via fd00:77::12"}
	if got := routesTo(); !slices.Equal(got, want) || res.Writes != 2 {
		t.Errorf("routes %v in %d writes, want %v in 2", got, res.Writes, want)
	}
	t.Run("a peer that loses its IPv6 address loses only its IPv6 route", func(t *testing.T) {
		peer.NodeIPv6 = netip.Addr{}
		res := mustSync(t, n, []overlay.RemoteNode{peer})
		if got := routesTo(); !slices.Equal(got, want[:1]) || res.Writes != 1 {
			t.Errorf("routes %v in %d writes, want %v in 1", got, res.Writes, want[:1])
		}
	})
}
