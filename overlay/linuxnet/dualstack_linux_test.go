package linuxnet_test

// Address plan: nodes_linux_test.go's IPv4 plan plus, for dual-stack
// l2bridge, fd00:30::(10+i)/64 on node i's eth0 (the IPv6 underlay),
// fd00:10:244:i::/64 as node i's IPv6 pod CIDR with gateway ::1 on the
// bridge, and pods at fd00:10:244:i::(10+j).

import (
	"context"
	"net/netip"
	"testing"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/nodenet/nodenet/config"
	"github.com/nodenet/nodenet/internal/netaddr"
	"github.com/nodenet/nodenet/overlay"
)

// dualStack gives node n an IPv6 underlay address and pod CIDR.
func (n *node) dualStack(tb testing.TB) netip.Addr {
	tb.Helper()
	n.ipv6, _ = netaddr.AtOffset(netip.MustParsePrefix("fd00:30::/64"), 10+n.idx)
	// Without duplicate address detection, so it is usable at once.
	addr := &netlink.Addr{IPNet: netaddr.IPNet(netip.PrefixFrom(n.ipv6, 64)), Flags: unix.IFA_F_NODAD}
	if err := n.nl.AddrAdd(n.link(tb, "eth0"), addr); err != nil {
		tb.Fatalf("add %s to eth0: %v", n.ipv6, err)
	}
	cidr := netip.PrefixFrom(netip.AddrFrom16([16]byte{0xfd, 0, 0, 0x10, 0x02, 0x44, 0, byte(n.idx)}), 64)
	n.spec.PodCIDRs = append(n.spec.PodCIDRs, cidr)
	n.spec.Gateways = append(n.spec.Gateways, cidr.Addr().Next())
	n.spec.NodeIPv6 = n.ipv6
	return n.ipv6
}

func TestL2BridgeDualStackRoutesBothFamilies(t *testing.T) {
	u := newDualStackUnderlay(t)
	a, b := u.addNode(t, config.NetworkModeL2Bridge), u.addNode(t, config.NetworkModeL2Bridge)
	a.dualStack(t)
	b.dualStack(t)
	a.ensure(t)
	b.ensure(t)
	remote := func(n *node) overlay.RemoteNode {
		r := n.remote()
		r.NodeIPv6 = n.local.NodeIPv6
		return r
	}
	for _, pair := range [][2]*node{{a, b}, {b, a}} {
		if _, err := pair[0].nw.SyncRemotes(context.Background(), []overlay.RemoteNode{remote(pair[1])}); err != nil {
			t.Fatal(err)
		}
	}
	pa, pb := a.addPod(t), b.addPod(t)
	pa6, pb6 := pa.ip6, pb.ip6

	t.Run("the IPv6 pod CIDR is routed via the peer's IPv6 node IP", func(t *testing.T) {
		routes, err := a.nl.RouteListFiltered(netlink.FAMILY_V6, &netlink.Route{Dst: netaddr.IPNet(b.spec.PodCIDRs[1])}, netlink.RT_FILTER_DST)
		if err != nil {
			t.Fatal(err)
		}
		if len(routes) != 1 || !routes[0].Gw.Equal(b.ipv6.AsSlice()) {
			t.Fatalf("routes to %s: %+v, want one via %s", b.spec.PodCIDRs[1], routes, b.ipv6)
		}
	})
	t.Run("pods on two nodes reach each other over IPv4 and IPv6", func(t *testing.T) {
		ping(t, pa, pb.IP)
		ping(t, pa, pb6)
		ping(t, pb, pa6)
	})
	t.Run("a peer without an IPv6 node IP keeps its IPv4 route and loses the IPv6 one", func(t *testing.T) {
		r := remote(b)
		r.NodeIPv6 = netip.Addr{}
		res, err := a.nw.SyncRemotes(context.Background(), []overlay.RemoteNode{r})
		if err != nil {
			t.Fatal(err)
		}
		if res.Writes != 1 {
			t.Errorf("%d writes, want 1 (the IPv6 route removed)", res.Writes)
		}
		noPing(t, pa, pb6)
		ping(t, pa, pb.IP)
	})
}
