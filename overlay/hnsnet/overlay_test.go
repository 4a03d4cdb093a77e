// Address plan: see fixture_test.go (node 192.168.1.11 on "Ethernet",
// pods 10.244.1.0/24, source VIP 10.244.1.2, remote node i at
// 192.168.(2+i/250).(1+i%250) with pods 10.(128+i/256).(i%256).0/24).
package hnsnet

import (
	"errors"
	"net/netip"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/nodenet/nodenet/cni/hnsendpoint"
	"github.com/nodenet/nodenet/hns"
	"github.com/nodenet/nodenet/overlay"
)

func TestOverlayNetwork(t *testing.T) {
	older := hns.Version{Major: 10, Minor: 2} // before VxlanPort (10.3)
	for _, tc := range []struct {
		name      string
		version   hns.Version
		port      uint16
		wantPort  bool
		wantSpec  string // field of the expected *overlay.SpecError
		wantCalls int    // HNS writes: create, HostRoute, source-VIP endpoint
	}{
		{name: "the default port makes no VxlanPort policy", port: 4789, wantCalls: 3},
		{name: "an unset port means 4789 and makes no VxlanPort policy", port: 0, wantCalls: 3},
		{name: "another port makes a VxlanPort policy", port: 4790, wantPort: true, wantCalls: 3},
		{name: "another port on a host without VxlanPort is a spec error with nothing written", version: older, port: 4790, wantSpec: "network.vxlan.port"},
		{name: "the default port works on a host without VxlanPort", version: older, port: 4789, wantCalls: 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHost(tc.version)
			spec := overlaySpec()
			spec.Port = tc.port
			ln, err := h.agent(t).EnsureLocal(ctx, spec)
			if tc.wantSpec != "" {
				var se *overlay.SpecError
				if !errors.As(err, &se) || se.Field != tc.wantSpec {
					t.Fatalf("err = %v, want a SpecError for %s", err, tc.wantSpec)
				}
				if h.sim.Writes() != 0 {
					t.Errorf("writes = %d, want 0", h.sim.Writes())
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if ln.Writes != tc.wantCalls || h.sim.Writes() != tc.wantCalls {
				t.Errorf("writes: reported %d, simulator %d, want %d", ln.Writes, h.sim.Writes(), tc.wantCalls)
			}
			nw, err := h.sim.GetNetworkByName(ctx, netName)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.ContainsFunc(nw.Policies, func(p hns.NetworkPolicy) bool { return p.Type == hns.NetworkPolicyHostRoute }) {
				t.Errorf("the network has no HostRoute policy (the node could not reach its pods): %+v", nw.Policies)
			}
			if nw.Type != hns.NetworkTypeOverlay {
				t.Errorf("type = %s", nw.Type)
			}
			sn := nw.Subnets()
			if len(sn) != 1 || sn[0].IpAddressPrefix != podCIDR || vsid(nw) != 4096 {
				t.Errorf("subnets = %+v, want one %s with VSID 4096", sn, podCIDR)
			}
			if len(sn) == 1 && (len(sn[0].Routes) != 1 || sn[0].Routes[0] != (hns.Route{NextHop: podGW, DestinationPrefix: "0.0.0.0/0"})) {
				t.Errorf("subnet routes = %+v, want the default route via %s", sn[0].Routes, podGW)
			}
			if adapterOf(nw) != "Ethernet" {
				t.Errorf("adapter = %q", adapterOf(nw))
			}
			hasPort := false
			for _, p := range nw.Policies {
				if p.VxlanPort != nil {
					hasPort = p.VxlanPort.Port == tc.port
				}
			}
			if hasPort != tc.wantPort {
				t.Errorf("VxlanPort policy present = %t, want %t (policies %+v)", hasPort, tc.wantPort, nw.Policies)
			}
			mac, _ := drMAC(nw)
			if ln.VtepMAC.String() != mac.String() || len(mac) != 6 {
				t.Errorf("VtepMAC = %s, want the network's DR MAC %s", ln.VtepMAC, mac)
			}
			if ln.MTU != 1450 || ln.Uplink != "Ethernet" || ln.ID != nw.ID {
				t.Errorf("MTU %d uplink %q id %q", ln.MTU, ln.Uplink, ln.ID)
			}
		})
	}
}

func TestSourceVIPEndpoint(t *testing.T) {
	for _, tc := range []struct {
		name       string
		disturb    func(t *testing.T, h *host, ln *overlay.LocalNetwork)
		wantWrites int
	}{
		{name: "a correct node writes nothing", disturb: func(*testing.T, *host, *overlay.LocalNetwork) {}},
		{
			name: "an endpoint deleted out of band is re-created",
			disturb: func(t *testing.T, h *host, ln *overlay.LocalNetwork) {
				if err := h.sim.DeleteEndpoint(ctx, ln.SourceVIPEndpointID); err != nil {
					t.Fatal(err)
				}
			},
			wantWrites: 1,
		},
		{
			name: "our endpoint with another address is replaced",
			disturb: func(t *testing.T, h *host, ln *overlay.LocalNetwork) {
				if err := h.sim.DeleteEndpoint(ctx, ln.SourceVIPEndpointID); err != nil {
					t.Fatal(err)
				}
				if _, err := h.sim.CreateEndpoint(ctx, &hns.Endpoint{Name: SourceVIPEndpointName(netName), HostComputeNetwork: ln.ID,
					IpConfigurations: []hns.IPConfig{{IpAddress: "10.244.1.9", PrefixLength: 24}}}); err != nil {
					t.Fatal(err)
				}
			},
			wantWrites: 2,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHost(hns.Version{})
			n := h.agent(t)
			ln := mustEnsure(t, n, overlaySpec())
			tc.disturb(t, h, ln)
			if err := n.Check(ctx); (err == nil) != (tc.wantWrites == 0) {
				t.Errorf("Check = %v before repair", err)
			}
			h.sim.ResetCalls()
			ln2 := mustEnsure(t, n, overlaySpec())
			if ln2.Writes != tc.wantWrites || h.sim.Writes() != tc.wantWrites {
				t.Errorf("writes: reported %d, simulator %d, want %d", ln2.Writes, h.sim.Writes(), tc.wantWrites)
			}
			ep, err := h.sim.GetEndpointByID(ctx, ln2.SourceVIPEndpointID)
			if err != nil {
				t.Fatal(err)
			}
			want := hns.Endpoint{ID: ep.ID, Name: "nodenet_sourcevip", HostComputeNetwork: ln2.ID,
				IpConfigurations: []hns.IPConfig{{IpAddress: sourceVIP, PrefixLength: 24}}, MacAddress: hostMAC, SchemaVersion: hns.V2}
			if diff := cmp.Diff(want, *ep); diff != "" {
				t.Errorf("source VIP endpoint (-want +got):\n%s", diff)
			}
			if ln2.SourceVIP != netip.MustParseAddr(sourceVIP) || !slices.Equal(ln2.Reserved, []netip.Addr{netip.MustParseAddr(sourceVIP)}) {
				t.Errorf("handed over source VIP %s, reserved %v", ln2.SourceVIP, ln2.Reserved)
			}
			if err := n.Check(ctx); err != nil {
				t.Errorf("Check after repair: %v", err)
			}
		})
	}
}

func TestRemoteSubnetRoutes(t *testing.T) {
	moved := remote(1)
	moved.NodeIP = netip.MustParseAddr("192.168.9.9")
	remac := remote(2)
	remac.VtepMAC[5] = 0xee
	for _, tc := range []struct {
		name    string
		next    []overlay.RemoteNode
		want    overlay.SyncResult
		wantNow map[string]string // prefix -> provider address
	}{
		{name: "a node joining is one write", next: remotes(4),
			want: overlay.SyncResult{Added: 1, Writes: 1}},
		{name: "a node leaving is one write", next: remotes(2),
			want: overlay.SyncResult{Removed: 1, Writes: 1}},
		{name: "a node changing IP is a remove and an add", next: []overlay.RemoteNode{remote(0), moved, remote(2)},
			want: overlay.SyncResult{Updated: 1, Writes: 2}},
		{name: "a node changing VTEP MAC is a remove and an add", next: []overlay.RemoteNode{remote(0), remote(1), remac},
			want: overlay.SyncResult{Updated: 1, Writes: 2}},
		{name: "an unchanged mesh writes nothing", next: remotes(3)},
		{name: "nodes without a VTEP MAC or IPv4 pod CIDR are skipped", next: func() []overlay.RemoteNode {
			rs := remotes(3)
			rs[1].VtepMAC = nil
			rs[2].PodCIDRs = []netip.Prefix{netip.MustParsePrefix("fd00:10:244:2::/64")}
			return rs
		}(), want: overlay.SyncResult{Removed: 2, Writes: 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHost(hns.Version{})
			n := h.agent(t)
			mustEnsure(t, n, overlaySpec())
			if res := mustSync(t, n, remotes(3)); res != (overlay.SyncResult{Added: 3, Writes: 1}) {
				t.Fatalf("first build = %+v, want 3 added in 1 write", res)
			}
			h.sim.ResetCalls()
			res := mustSync(t, n, tc.next)
			if res != tc.want || h.sim.Writes() != tc.want.Writes {
				t.Errorf("result %+v (simulator writes %d), want %+v", res, h.sim.Writes(), tc.want)
			}
			if got := h.sim.Calls(hns.OpGetNetworkByID); got != 1 {
				t.Errorf("GetNetworkByID calls = %d, want 1", got)
			}
			got := remoteSubnets(t, h.sim)
			want := map[string]hns.RemoteSubnetRoutePolicy{}
			for _, r := range tc.next {
				if len(r.VtepMAC) != 6 || !r.PodCIDRs[0].Addr().Is4() {
					continue
				}
				want[r.PodCIDRs[0].String()] = hns.RemoteSubnetRoutePolicy{DestinationPrefix: r.PodCIDRs[0].String(), IsolationID: 4096,
					ProviderAddress: r.NodeIP.String(), DistributedRouterMacAddress: dashMAC(r.VtepMAC)}
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("remote subnet routes (-want +got):\n%s", diff)
			}
		})
	}
}

func TestRestartOnACorrectNodeWritesNothing(t *testing.T) {
	for _, mode := range []string{"overlay", "l2bridge"} {
		t.Run("a restarted "+mode+" agent adopts everything with zero writes", func(t *testing.T) {
			h := newHost(hns.Version{})
			spec := overlaySpec()
			if mode == "l2bridge" {
				spec = l2bridgeSpec()
			}
			a := h.agent(t)
			first := mustEnsure(t, a, spec)
			h.ads.attached = true // the node IP moved to the host vNIC
			mustSync(t, a, remotes(5))
			simWrites, routeWrites := h.sim.Writes(), h.routes.Writes()

			n := h.agent(t)
			again := mustEnsure(t, n, spec)
			res := mustSync(t, n, remotes(5))
			if again.Writes != 0 || res.Writes != 0 || h.sim.Writes() != simWrites || h.routes.Writes() != routeWrites {
				t.Errorf("writes after restart: ensure %d, sync %d, simulator %d->%d, routes %d->%d",
					again.Writes, res.Writes, simWrites, h.sim.Writes(), routeWrites, h.routes.Writes())
			}
			if again.ID != first.ID || again.VtepMAC.String() != first.VtepMAC.String() || again.SourceVIPEndpointID != first.SourceVIPEndpointID {
				t.Errorf("adopted %+v, first run made %+v", again, first)
			}
			if err := n.Check(ctx); err != nil {
				t.Errorf("Check: %v", err)
			}
		})
	}
}

func TestMismatch(t *testing.T) {
	for _, tc := range []struct {
		name      string
		existing  func(*hns.Network)
		wantField string
	}{
		{"an existing network of another type is a type mismatch", func(n *hns.Network) {
			n.Type = hns.NetworkTypeL2Bridge
			n.Ipams[0].Subnets[0].Policies = nil
			n.Flags = 0
		}, "type"},
		{"an existing network with another subnet is a subnet mismatch", func(n *hns.Network) {
			n.Ipams[0].Subnets[0].IpAddressPrefix = "10.244.7.0/24"
			n.Ipams[0].Subnets[0].Routes[0].NextHop = "10.244.7.1"
		}, "subnet"},
		{"an existing network with another VNI is a VNI mismatch", func(n *hns.Network) {
			n.Ipams[0].Subnets[0].Policies[0].Isolation.IsolationID = 4097
		}, "VNI"},
		{"an existing network with another VXLAN port is a port mismatch", func(n *hns.Network) {
			n.Policies = append(n.Policies, hns.NetworkPolicy{Type: hns.NetworkPolicyVxlanPort, VxlanPort: &hns.VxlanPortPolicy{Port: 8472}})
		}, "VXLAN port"},
	} {
		for _, recreate := range []bool{false, true} {
			name := tc.name + " and nothing is written"
			if recreate {
				name = tc.name + " that allowRecreate replaces when no pods are attached"
			}
			t.Run(name, func(t *testing.T) {
				h := newHost(hns.Version{})
				p, err := planFor(overlaySpec())
				if err != nil {
					t.Fatal(err)
				}
				existing := p.desiredNetwork("Ethernet")
				tc.existing(existing)
				old, err := h.sim.CreateNetwork(ctx, existing)
				if err != nil {
					t.Fatal(err)
				}
				h.sim.ResetCalls()
				spec := overlaySpec()
				spec.AllowRecreate = recreate
				ln, err := h.agent(t).EnsureLocal(ctx, spec)
				if !recreate {
					var m *overlay.MismatchError
					if !errors.As(err, &m) || m.Field != tc.wantField || m.Network != netName {
						t.Fatalf("err = %v, want a MismatchError on %s", err, tc.wantField)
					}
					if h.sim.Writes() != 0 {
						t.Errorf("writes = %d, want 0", h.sim.Writes())
					}
					return
				}
				if err != nil {
					t.Fatal(err)
				}
				if ln.ID == old.ID || ln.Writes != 4 {
					t.Errorf("network %s (old %s), writes %d: want a new network in 4 writes (delete, create, HostRoute, endpoint)", ln.ID, old.ID, ln.Writes)
				}
			})
		}
	}
}

func TestAllowRecreateKeepsANetworkWithPods(t *testing.T) {
	h := newHost(hns.Version{})
	mustEnsure(t, h.agent(t), overlaySpec())
	nw, _ := h.sim.GetNetworkByName(ctx, netName)
	if _, err := h.sim.CreateEndpoint(ctx, &hns.Endpoint{Name: "nodenet-pod:abc:eth0", HostComputeNetwork: nw.ID,
		IpConfigurations: []hns.IPConfig{{IpAddress: podIP, PrefixLength: 24}}}); err != nil {
		t.Fatal(err)
	}
	h.sim.ResetCalls()
	spec := overlaySpec()
	spec.VNI, spec.AllowRecreate = 5000, true
	_, err := h.agent(t).EnsureLocal(ctx, spec)
	if !overlay.IsMismatch(err) || h.sim.Writes() != 0 {
		t.Errorf("err = %v, writes %d: want a mismatch that says pods are attached, and no write", err, h.sim.Writes())
	}
}

func TestSpecErrorsWriteNothing(t *testing.T) {
	for _, tc := range []struct {
		name      string
		spec      func(*overlay.LocalSpec)
		wantField string
	}{
		{"VNI 4095 is refused", func(s *overlay.LocalSpec) { s.VNI = 4095 }, "network.vxlan.vni"},
		{"a missing external interface is refused", func(s *overlay.LocalSpec) { s.ExternalInterface = "Ethernet 7" }, "network.externalInterface"},
		{"a node IP no adapter holds is refused", func(s *overlay.LocalSpec) { s.NodeIP = netip.MustParseAddr("192.168.1.99") }, "network.externalInterface"},
	} {
		for _, existing := range []bool{false, true} {
			name := tc.name + " on an empty host"
			if existing {
				name = tc.name + " and the existing network is untouched"
			}
			t.Run(name, func(t *testing.T) {
				h := newHost(hns.Version{})
				var before *overlay.LocalNetwork
				if existing {
					before = mustEnsure(t, h.agent(t), overlaySpec())
				}
				h.sim.ResetCalls()
				spec := overlaySpec()
				tc.spec(&spec)
				_, err := h.agent(t).EnsureLocal(ctx, spec)
				var se *overlay.SpecError
				if !errors.As(err, &se) || se.Field != tc.wantField {
					t.Fatalf("err = %v, want a SpecError for %s", err, tc.wantField)
				}
				if h.sim.Writes() != 0 {
					t.Errorf("writes = %d, want 0", h.sim.Writes())
				}
				if existing {
					if nw, err := h.sim.GetNetworkByID(ctx, before.ID); err != nil || nw.Name != netName {
						t.Errorf("existing network: %v", err)
					}
				}
			})
		}
	}
}

func TestOverlayDualStackRunsIPv4Only(t *testing.T) {
	h := newHost(hns.Version{})
	spec := overlaySpec()
	spec.PodCIDRs = append([]netip.Prefix{netip.MustParsePrefix("fd00:10:244:1::/64")}, spec.PodCIDRs...)
	spec.Gateways = append([]netip.Addr{netip.MustParseAddr("fd00:10:244:1::1")}, spec.Gateways...)
	ln := mustEnsure(t, h.agent(t), spec)
	if !slices.Equal(ln.PodCIDRs, []netip.Prefix{netip.MustParsePrefix(podCIDR)}) || !slices.Equal(ln.Gateways, []netip.Addr{netip.MustParseAddr(podGW)}) {
		t.Errorf("pod CIDRs %v gateways %v, want IPv4 only", ln.PodCIDRs, ln.Gateways)
	}
	nw, _ := h.sim.GetNetworkByName(ctx, netName)
	if got := subnetList(nw, hns.NetworkTypeL2Bridge); got != podCIDR {
		t.Errorf("network subnets = %s, want %s only", got, podCIDR)
	}
}

func TestTraceReachesRemotePodThroughTheOverlay(t *testing.T) {
	h := newHost(hns.Version{})
	n := h.agent(t)
	ln := mustEnsure(t, n, overlaySpec())
	mustSync(t, n, remotes(4))
	if _, err := h.sim.CreateEndpoint(ctx, &hns.Endpoint{Name: "nodenet-pod:abc:eth0", HostComputeNetwork: ln.ID,
		IpConfigurations: []hns.IPConfig{{IpAddress: podIP, PrefixLength: 24}}}); err != nil {
		t.Fatal(err)
	}
	for i := range 4 {
		r := remote(i)
		dst := r.PodCIDRs[0].Addr().Next().Next().Next().String()
		t.Run("a pod reaches a pod of "+r.Name+" encapsulated to its node IP", func(t *testing.T) {
			tr, err := h.sim.Trace(hns.FromEndpoint, hns.Packet{Protocol: hns.ProtocolTCP, Src: podIP, SrcPort: 40000, Dst: dst, DstPort: 80})
			if err != nil {
				t.Fatal(err)
			}
			want := &hns.Encapsulation{ProviderAddress: r.NodeIP.String(), VSID: 4096}
			if len(tr.Deliveries) != 1 || !cmp.Equal(tr.Deliveries[0].Encap, want) || tr.Deliveries[0].Packet.Src != podIP {
				t.Errorf("trace:\n%s\nwant one delivery encapsulated as %+v", tr, want)
			}
		})
	}
}

func TestAdoptedOverlayNetworkWithoutHostRouteGetsIt(t *testing.T) {
	h := newHost(hns.Version{})
	a := h.agent(t)
	mustEnsure(t, a, overlaySpec())
	// A network made by another tool (or before HostRoute existed) lacks
	// the policy: adoption adds it, one write, and keeps everything else.
	nw, err := h.sim.GetNetworkByName(ctx, netName)
	if err != nil {
		t.Fatal(err)
	}
	var hostRoute []hns.NetworkPolicy
	for _, p := range nw.Policies {
		if p.Type == hns.NetworkPolicyHostRoute {
			hostRoute = append(hostRoute, p)
		}
	}
	if err := h.sim.RemoveNetworkPolicies(ctx, nw.ID, hostRoute); err != nil {
		t.Fatal(err)
	}
	ln := mustEnsure(t, h.agent(t), overlaySpec())
	if ln.Writes != 1 || ln.ID != nw.ID {
		t.Errorf("adoption made %d writes on network %s, want 1 (the HostRoute policy) on %s", ln.Writes, ln.ID, nw.ID)
	}
}

// The pod-endpoint prefix is cni/hnsendpoint's; hnsnet keeps a copy so the
// node network does not link the CNI server, and this keeps them equal.
func TestPodEndpointPrefixIsHNSEndpoints(t *testing.T) {
	if podEndpointPrefix != hnsendpoint.NamePrefix {
		t.Errorf("podEndpointPrefix %q, cni/hnsendpoint names pods %q", podEndpointPrefix, hnsendpoint.NamePrefix)
	}
}
