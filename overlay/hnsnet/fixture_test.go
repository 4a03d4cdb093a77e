// Address plan (shared by this package's tests):
//
//	node underlay      192.168.1.11/24 on adapter "Ethernet" (index 4,
//	                   MAC 00-15-5D-01-01-0B, MTU 1500); after the network
//	                   attaches it is on "vEthernet (Ethernet)" (index 12)
//	this node's pods   10.244.1.0/24, gateway 10.244.1.1, source VIP /
//	                   host endpoint 10.244.1.2, a pod at 10.244.1.5
//	IPv6 pods          fd00:10:244:1::/64, gateway fd00:10:244:1::1
//	remote node i      pods 10.(128+i/256).(i%256).0/24, node IP
//	                   192.168.(2+i/250).(1+i%250), VTEP MAC
//	                   0e:2a:00:00:<i>
//	VXLAN              VNI 4096, port 4789
package hnsnet

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"testing"

	"github.com/nodenet/nodenet/config"
	"github.com/nodenet/nodenet/hns"
	"github.com/nodenet/nodenet/overlay"
	"github.com/nodenet/nodenet/overlay/hostroute"
)

var ctx = context.Background()

const (
	nodeIP    = "192.168.1.11"
	hostMAC   = "00-15-5D-01-01-0B"
	podCIDR   = "10.244.1.0/24"
	podGW     = "10.244.1.1"
	sourceVIP = "10.244.1.2"
	podIP     = "10.244.1.5"
	netName   = "nodenet"
)

// adapters is a host's adapter list; attached says whether the node IP
// has moved to the HNS host vNIC.
type adapters struct{ attached bool }

func (a *adapters) list(context.Context) ([]Adapter, error) {
	mac, _ := net.ParseMAC(hostMAC)
	phys := Adapter{Name: "Ethernet", Index: 4, MTU: 1500, MAC: mac}
	ip := netip.MustParsePrefix(nodeIP + "/24")
	if !a.attached {
		phys.IPs = []netip.Prefix{ip}
		return []Adapter{phys}, nil
	}
	return []Adapter{phys, {Name: "vEthernet (Ethernet)", Index: 12, MTU: 1500, MAC: mac, IPs: []netip.Prefix{ip}}}, nil
}

func newSim(v hns.Version) *hns.Simulator {
	return hns.NewSimulator(hns.SimulatorOptions{
		Version:      v,
		HostAdapters: []hns.HostAdapter{{Name: "Ethernet", IPs: []string{nodeIP}, MAC: hostMAC}},
	})
}

type host struct {
	sim    *hns.Simulator
	routes *hostroute.Fake
	ads    *adapters
}

func newHost(v hns.Version) *host {
	h := &host{sim: newSim(v), routes: hostroute.NewFake(), ads: &adapters{}}
	h.routes.SetInterfaces(
		hostroute.FakeInterface{Index: 4, Name: "Ethernet", Prefixes: []netip.Prefix{netip.MustParsePrefix("192.168.0.0/16")}},
		hostroute.FakeInterface{Index: 12, Name: "vEthernet (Ethernet)", Prefixes: []netip.Prefix{netip.MustParsePrefix("192.168.0.0/16")}},
	)
	return h
}

// agent returns a fresh Network on h, as after an agent restart.
func (h *host) agent(tb testing.TB) *Network {
	tb.Helper()
	n, err := New(Options{HNS: h.sim, HostRoutes: h.routes, Adapters: h.ads.list})
	if err != nil {
		tb.Fatal(err)
	}
	return n
}

func overlaySpec() overlay.LocalSpec {
	return overlay.LocalSpec{
		Mode:      config.NetworkModeOverlay,
		Name:      netName,
		PodCIDRs:  []netip.Prefix{netip.MustParsePrefix(podCIDR)},
		Gateways:  []netip.Addr{netip.MustParseAddr(podGW)},
		NodeIP:    netip.MustParseAddr(nodeIP),
		VNI:       4096,
		Port:      4789,
		SourceVIP: netip.MustParseAddr(sourceVIP),
	}
}

func l2bridgeSpec() overlay.LocalSpec {
	s := overlaySpec()
	s.Mode, s.VNI, s.Port, s.SourceVIP = config.NetworkModeL2Bridge, 0, 0, netip.Addr{}
	return s
}

func remote(i int) overlay.RemoteNode {
	return overlay.RemoteNode{
		Name:     fmt.Sprintf("node-%d", i),
		PodCIDRs: []netip.Prefix{netip.PrefixFrom(netip.AddrFrom4([4]byte{10, byte(128 + i/256), byte(i % 256), 0}), 24)},
		NodeIP:   netip.AddrFrom4([4]byte{192, 168, byte(2 + i/250), byte(1 + i%250)}),
		VtepMAC:  net.HardwareAddr{0x0e, 0x2a, 0, 0, byte(i >> 8), byte(i)},
	}
}

func remotes(n int) []overlay.RemoteNode {
	out := make([]overlay.RemoteNode, n)
	for i := range out {
		out[i] = remote(i)
	}
	return out
}

func mustEnsure(tb testing.TB, n *Network, spec overlay.LocalSpec) *overlay.LocalNetwork {
	tb.Helper()
	ln, err := n.EnsureLocal(ctx, spec)
	if err != nil {
		tb.Fatalf("EnsureLocal: %v", err)
	}
	return ln
}

func mustSync(tb testing.TB, n *Network, rs []overlay.RemoteNode) overlay.SyncResult {
	tb.Helper()
	res, err := n.SyncRemotes(ctx, rs)
	if err != nil {
		tb.Fatalf("SyncRemotes: %v", err)
	}
	return res
}

// remoteSubnets returns the network's remote subnet routes by prefix.
func remoteSubnets(tb testing.TB, sim *hns.Simulator) map[string]hns.RemoteSubnetRoutePolicy {
	tb.Helper()
	nw, err := sim.GetNetworkByName(ctx, netName)
	if err != nil {
		tb.Fatal(err)
	}
	out := map[string]hns.RemoteSubnetRoutePolicy{}
	for _, p := range nw.Policies {
		if p.RemoteSubnetRoute != nil {
			out[p.RemoteSubnetRoute.DestinationPrefix] = *p.RemoteSubnetRoute
		}
	}
	return out
}
