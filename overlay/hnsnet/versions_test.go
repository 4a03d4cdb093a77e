package hnsnet

// The version matrix for the node network: overlay and l2bridge on a
// simulated host of every Windows Server release hns models
// (hns.Releases), asserting what nodenet uses on each (HostRoute, remote
// subnet routes, a VXLAN port other than 4789, an IPv6 subnet) and that
// the packet traces are right on all. Addresses: fixture_test.go's plan;
// remote node 1 has pods 10.128.1.0/24 behind 192.168.2.2.

import (
	"errors"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/nodenet/nodenet/hns"
	"github.com/nodenet/nodenet/overlay"
	"github.com/nodenet/nodenet/overlay/hostroute"
)

// networkRow is a modelled release and what the node network may use on
// it, written out so a change of the version table fails a row.
type networkRow struct {
	release   hns.Release
	vxlanPort bool // a VXLAN port other than 4789 (HNS 10.3 on)
	ipv6      bool // an IPv6 subnet for l2bridge dual-stack (HNS 11.10 on)
}

func networkMatrix(t *testing.T) []networkRow {
	t.Helper()
	want := map[hns.Version]networkRow{
		{Major: 9, Minor: 3}:  {},
		{Major: 9, Minor: 5}:  {},
		hns.VersionWS2022:     {vxlanPort: true, ipv6: true},
		{Major: 15, Minor: 4}: {vxlanPort: true, ipv6: true},
		{Major: 15, Minor: 5}: {vxlanPort: true, ipv6: true},
	}
	var rows []networkRow
	for _, r := range hns.Releases {
		row, ok := want[r.Version]
		if !ok {
			t.Fatalf("the matrix has no row for %s (HNS %s)", r.Name, r.Version)
		}
		row.release = r
		rows = append(rows, row)
	}
	if len(rows) != len(want) {
		t.Fatalf("the matrix has %d rows, hns models %d releases", len(want), len(rows))
	}
	return rows
}

// mustNetwork returns the HNS network id of h.
func mustNetwork(t *testing.T, h *host, id string) *hns.Network {
	t.Helper()
	nw, err := h.sim.GetNetworkByID(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	return nw
}

func (r networkRow) name() string {
	return r.release.Name + " (HNS " + r.release.Version.String() + ")"
}

// An overlay network gets its HostRoute policy and a remote subnet route
// per peer on every release, and a pod's packet to a remote pod leaves
// encapsulated to the peer's node IP with VSID 4096.
func TestVersionMatrixOverlay(t *testing.T) {
	for _, row := range networkMatrix(t) {
		t.Run(row.name(), func(t *testing.T) {
			h := newHost(row.release.Version)
			n := h.agent(t)
			ln := mustEnsure(t, n, overlaySpec())
			mustSync(t, n, remotes(2))
			nw := mustNetwork(t, h, ln.ID)
			if !slices.ContainsFunc(nw.Policies, func(p hns.NetworkPolicy) bool { return p.Type == hns.NetworkPolicyHostRoute }) {
				t.Errorf("no HostRoute policy on HNS %s", row.release.Version)
			}
			if got := len(remoteSubnets(t, h.sim)); got != 2 {
				t.Errorf("%d remote subnet routes, want 2", got)
			}
			if _, err := h.sim.CreateEndpoint(ctx, &hns.Endpoint{Name: "nodenet-pod:abc:eth0", HostComputeNetwork: ln.ID,
				IpConfigurations: []hns.IPConfig{{IpAddress: podIP, PrefixLength: 24}}}); err != nil {
				t.Fatal(err)
			}
			r := remote(1)
			tr, err := h.sim.Trace(hns.FromEndpoint, hns.Packet{Protocol: hns.ProtocolTCP, Src: podIP, SrcPort: 40000, Dst: "10.128.1.3", DstPort: 80})
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

// A VXLAN port other than 4789 is a VxlanPort policy where HNS has it
// (10.3 on); elsewhere a SpecError for network.vxlan.port naming 10.3,
// with nothing written.
func TestVersionMatrixVXLANPort(t *testing.T) {
	for _, row := range networkMatrix(t) {
		t.Run(row.name(), func(t *testing.T) {
			h := newHost(row.release.Version)
			spec := overlaySpec()
			spec.Port = 4790
			ln, err := h.agent(t).EnsureLocal(ctx, spec)
			if !row.vxlanPort {
				var se *overlay.SpecError
				if !errors.As(err, &se) || se.Field != "network.vxlan.port" || !strings.Contains(se.Reason, "10.3") {
					t.Fatalf("err = %v, want a SpecError for network.vxlan.port naming HNS 10.3", err)
				}
				if w := h.sim.Writes(); w != 0 {
					t.Errorf("%d writes, want 0", w)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			nw := mustNetwork(t, h, ln.ID)
			if !slices.ContainsFunc(nw.Policies, func(p hns.NetworkPolicy) bool { return p.VxlanPort != nil && p.VxlanPort.Port == 4790 }) {
				t.Errorf("no VxlanPort 4790 policy: %+v", nw.Policies)
			}
		})
	}
}

// l2bridge with an IPv6 pod CIDR: an IPv6 subnet where HNS has dual-stack
// (11.10 on), and the node reaches its pod over both families; elsewhere
// the spec is refused before any HNS write, naming 11.10.
func TestVersionMatrixL2BridgeDualStack(t *testing.T) {
	for _, row := range networkMatrix(t) {
		t.Run(row.name(), func(t *testing.T) {
			h := newHost(row.release.Version)
			h.routes.SetInterfaces(hostroute.FakeInterface{Index: 12, Name: "vEthernet (Ethernet)", Prefixes: []netip.Prefix{
				netip.MustParsePrefix("192.168.0.0/16"), netip.MustParsePrefix("fd00:77::/64")}})
			h.ads.attached = true
			spec := l2bridgeSpec()
			spec.PodCIDRs = append(spec.PodCIDRs, netip.MustParsePrefix("fd00:10:244:1::/64"))
			spec.Gateways = append(spec.Gateways, netip.MustParseAddr("fd00:10:244:1::1"))
			spec.NodeIPv6 = netip.MustParseAddr("fd00:77::11")
			ln, err := h.agent(t).EnsureLocal(ctx, spec)
			if !row.ipv6 {
				var se *overlay.SpecError
				if !errors.As(err, &se) || se.Field != "node.spec.podCIDRs" || !strings.Contains(err.Error(), "11.10") {
					t.Fatalf("err = %v, want a spec error on node.spec.podCIDRs naming HNS 11.10", err)
				}
				if n := h.sim.Calls(hns.OpCreateNetwork); n != 0 {
					t.Errorf("%d CreateNetwork calls, want none: the version is checked first", n)
				}
				if nws, _ := h.sim.ListNetworks(ctx); len(nws) != 0 {
					t.Errorf("networks left: %+v", nws)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			nw := mustNetwork(t, h, ln.ID)
			if got := subnetList(nw, hns.NetworkTypeL2Bridge); !strings.Contains(got, "fd00:10:244:1::/64") {
				t.Errorf("subnets %s, want the IPv6 pod CIDR too", got)
			}
			pod, err := h.sim.CreateEndpoint(ctx, &hns.Endpoint{HostComputeNetwork: ln.ID, IpConfigurations: []hns.IPConfig{
				{IpAddress: podIP, PrefixLength: 24}, {IpAddress: "fd00:10:244:1::5", PrefixLength: 64}}})
			if err != nil {
				t.Fatal(err)
			}
			for _, c := range []struct{ src, dst string }{{nodeIP, podIP}, {"fd00:77::11", "fd00:10:244:1::5"}} {
				tr, err := h.sim.Trace(hns.FromHost, hns.Packet{Protocol: hns.ProtocolTCP, Src: c.src, SrcPort: 40000, Dst: c.dst, DstPort: 8080})
				if err != nil {
					t.Fatal(err)
				}
				if got := tr.Backends(); !slices.Equal(got, []string{pod.ID}) {
					t.Errorf("node %s -> pod %s reaches %v, want the pod\n%s", c.src, c.dst, got, tr)
				}
			}
		})
	}
}
