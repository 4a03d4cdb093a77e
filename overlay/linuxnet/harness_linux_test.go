package linuxnet_test

// Address plan (every name below lives in a private network namespace, so
// tests run in parallel with each other and with other packages):
//   172.30.0.0/24    underlay: node i is 172.30.0.(10+i) on its "eth0",
//                    a veth whose peer is a port of bridge "ul" in the
//                    underlay namespace
//   10.244.i.0/24    pod CIDR of node i; 10.244.i.1 its gateway (on bridge
//                    "nodenet"), pods at 10.244.i.(10+j)
//   VNI 4096, UDP 4789 (overlay mode)

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"os/exec"
	"testing"
	"time"

	"github.com/containernetworking/plugins/pkg/ns"
	"github.com/containernetworking/plugins/pkg/testutils"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"k8s.io/klog/v2/ktesting"

	"github.com/nodenet/nodenet/config"
	"github.com/nodenet/nodenet/internal/netaddr"
	"github.com/nodenet/nodenet/internal/testroot"
	"github.com/nodenet/nodenet/overlay"
	"github.com/nodenet/nodenet/overlay/linuxnet"
)

const (
	bridgeName = "nodenet"
	testVNI    = 4096
	testPort   = 4789
	vxlanName  = "nodenet.4096"
)

// testNS is a network namespace with a netlink handle inside it.
type testNS struct {
	ns.NetNS
	h  netns.NsHandle
	nl *netlink.Handle
}

func newTestNS(tb testing.TB) *testNS {
	tb.Helper()
	testroot.Require(tb, "network namespaces, veths, bridges and vxlan")
	n, err := testutils.NewNS()
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		n.Close()
		_ = testutils.UnmountNS(n)
	})
	h, err := netns.GetFromPath(n.Path())
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { h.Close() })
	nl, err := netlink.NewHandleAt(h)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(nl.Close)
	t := &testNS{NetNS: n, h: h, nl: nl}
	t.setUp(tb, "lo")
	return t
}

func (t *testNS) link(tb testing.TB, name string) netlink.Link {
	tb.Helper()
	l, err := t.nl.LinkByName(name)
	if err != nil {
		tb.Fatalf("link %s: %v", name, err)
	}
	return l
}

func (t *testNS) setUp(tb testing.TB, name string) {
	tb.Helper()
	if err := t.nl.LinkSetUp(t.link(tb, name)); err != nil {
		tb.Fatalf("set %s up: %v", name, err)
	}
}

func (t *testNS) addAddr(tb testing.TB, name string, p netip.Prefix) {
	tb.Helper()
	if err := t.nl.AddrAdd(t.link(tb, name), &netlink.Addr{IPNet: netaddr.IPNet(p)}); err != nil {
		tb.Fatalf("add %v to %s: %v", p, name, err)
	}
}

// vethTo creates a veth name in t whose peer peerName lands in other.
func (t *testNS) vethTo(tb testing.TB, name string, other *testNS, peerName string, mtu int) {
	tb.Helper()
	v := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: name, MTU: mtu}, PeerName: peerName, PeerNamespace: netlink.NsFd(int(other.h))}
	if err := t.nl.LinkAdd(v); err != nil {
		tb.Fatalf("create veth %s/%s: %v", name, peerName, err)
	}
	if mtu != 0 {
		if err := other.nl.LinkSetMTU(other.link(tb, peerName), mtu); err != nil {
			tb.Fatal(err)
		}
	}
}

// underlay is the L2 segment the nodes share.
type underlay struct {
	*testNS
	nodes int
}

func newUnderlay(tb testing.TB) *underlay {
	u := &underlay{testNS: newTestNS(tb)}
	if err := u.nl.LinkAdd(&netlink.Bridge{LinkAttrs: netlink.LinkAttrs{Name: "ul"}}); err != nil {
		tb.Fatal(err)
	}
	u.setUp(tb, "ul")
	return u
}

// node is one test node: its namespace, its uplink on the underlay and a
// linuxnet.Network working in it.
type node struct {
	*testNS
	idx   int
	ip    netip.Addr
	ipv6  netip.Addr // dual-stack tests only
	spec  overlay.LocalSpec
	nw    *linuxnet.Network
	local *overlay.LocalNetwork
	pods  int
}

func (u *underlay) addNode(tb testing.TB, mode config.NetworkMode) *node {
	tb.Helper()
	u.nodes++
	n := &node{testNS: newTestNS(tb), idx: u.nodes}
	n.ip = netip.AddrFrom4([4]byte{172, 30, 0, byte(10 + n.idx)})
	port := fmt.Sprintf("ul-n%d", n.idx)
	n.vethTo(tb, "eth0", u.testNS, port, 0)
	if err := u.nl.LinkSetMaster(u.link(tb, port), u.link(tb, "ul")); err != nil {
		tb.Fatal(err)
	}
	u.setUp(tb, port)
	n.setUp(tb, "eth0")
	n.addAddr(tb, "eth0", netip.PrefixFrom(n.ip, 24))
	podCIDR := netip.PrefixFrom(netip.AddrFrom4([4]byte{10, 244, byte(n.idx), 0}), 24)
	n.spec = overlay.LocalSpec{
		Mode:     mode,
		Name:     bridgeName,
		PodCIDRs: []netip.Prefix{podCIDR},
		Gateways: []netip.Addr{podCIDR.Addr().Next()},
		NodeIP:   n.ip,
		VNI:      testVNI,
		Port:     testPort,
	}
	n.nw = n.newNetwork(tb)
	return n
}

func (n *node) newNetwork(tb testing.TB) *linuxnet.Network {
	tb.Helper()
	nw, err := linuxnet.New(linuxnet.Options{NetNS: n.h, Logger: ktesting.NewLogger(tb, ktesting.NewConfig())})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(nw.Close)
	return nw
}

func (n *node) ensure(tb testing.TB) *overlay.LocalNetwork {
	tb.Helper()
	l, err := n.nw.EnsureLocal(context.Background(), n.spec)
	if err != nil {
		tb.Fatalf("node %d: EnsureLocal: %v", n.idx, err)
	}
	n.local = l
	return l
}

// remote is n as the other nodes see it.
func (n *node) remote() overlay.RemoteNode {
	return overlay.RemoteNode{Name: fmt.Sprintf("node-%d", n.idx), PodCIDRs: n.local.PodCIDRs, NodeIP: n.local.NodeIP, VtepMAC: n.local.VtepMAC}
}

// meshOf syncs every node with all the others.
func meshOf(tb testing.TB, nodes ...*node) {
	tb.Helper()
	for _, n := range nodes {
		var remotes []overlay.RemoteNode
		for _, o := range nodes {
			if o != n {
				remotes = append(remotes, o.remote())
			}
		}
		if _, err := n.nw.SyncRemotes(context.Background(), remotes); err != nil {
			tb.Fatalf("node %d: SyncRemotes: %v", n.idx, err)
		}
	}
}

// pod is a namespace wired to its node's bridge like a CNI ADD would.
type pod struct {
	*testNS
	ip netip.Addr
}

func (n *node) addPod(tb testing.TB) *pod {
	tb.Helper()
	n.pods++
	p := &pod{testNS: newTestNS(tb)}
	cidr := n.spec.PodCIDRs[0]
	p.ip = netip.AddrFrom4([4]byte{10, 244, byte(n.idx), byte(10 + n.pods)})
	host := fmt.Sprintf("vp%d", n.pods)
	n.vethTo(tb, host, p.testNS, "eth0", n.local.MTU)
	if err := n.nl.LinkSetMaster(n.link(tb, host), n.link(tb, bridgeName)); err != nil {
		tb.Fatal(err)
	}
	n.setUp(tb, host)
	p.setUp(tb, "eth0")
	p.addAddr(tb, "eth0", netip.PrefixFrom(p.ip, cidr.Bits()))
	gw := &netlink.Route{Dst: nil, Gw: n.spec.Gateways[0].AsSlice(), LinkIndex: p.link(tb, "eth0").Attrs().Index}
	if err := p.nl.RouteAdd(gw); err != nil {
		tb.Fatalf("pod default route: %v", err)
	}
	return p
}

// ping sends real ICMP echo requests from inside ns to dst, retrying a
// few times while ARP and the bridge ports settle.
func ping(tb testing.TB, from *testNS, dst netip.Addr) {
	tb.Helper()
	var out []byte
	var err error
	for range 10 {
		out, err = exec.Command("nsenter", "--net="+from.Path(), "ping", "-c1", "-W1", dst.String()).CombinedOutput()
		if err == nil {
			return
		}
	}
	tb.Fatalf("ping %v from %s: %v\n%s", dst, from.Path(), err, out)
}

// noPing asserts dst does not answer from inside ns.
func noPing(tb testing.TB, from *testNS, dst netip.Addr) {
	tb.Helper()
	if err := exec.Command("nsenter", "--net="+from.Path(), "ping", "-c1", "-W1", dst.String()).Run(); err == nil {
		tb.Fatalf("ping %v from %s answered; want no answer", dst, from.Path())
	}
}

// listen opens a TCP listener inside ns (the socket stays there).
func listen(tb testing.TB, in *testNS, addr netip.AddrPort) net.Listener {
	tb.Helper()
	var l net.Listener
	err := in.Do(func(ns.NetNS) error {
		var err error
		l, err = net.Listen("tcp", addr.String())
		return err
	})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { l.Close() })
	return l
}

// dial connects from inside ns.
func dial(tb testing.TB, in *testNS, addr netip.AddrPort) net.Conn {
	tb.Helper()
	var c net.Conn
	err := in.Do(func(ns.NetNS) error {
		var err error
		c, err = net.DialTimeout("tcp", addr.String(), 5*time.Second)
		return err
	})
	if err != nil {
		tb.Fatalf("connect to %v: %v", addr, err)
	}
	tb.Cleanup(func() { c.Close() })
	return c
}
