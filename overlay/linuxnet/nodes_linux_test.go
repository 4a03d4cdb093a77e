package linuxnet_test

// Address plan: every test builds its own test/netnode environment, so
// tests run in parallel with each other and with other packages:
//   192.168.(77+k).0/24  underlay of netnode slot k: node i (from 1,
//                        "node-i") is .(10+i) on its eth0; the host .1
//   10.244.i.0/24        pod CIDR of node i; 10.244.i.1 its gateway (on
//                        bridge "nodenet"), pods at 10.244.i.(10+j)
//   VNI 4096, UDP 4789 (overlay mode)
// Nodes start with forwarding off: linuxnet turns it on.

import (
	"context"
	"fmt"
	"net/netip"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	"k8s.io/klog/v2/ktesting"

	"github.com/nodenet/nodenet/config"
	"github.com/nodenet/nodenet/internal/netaddr"
	"github.com/nodenet/nodenet/overlay"
	"github.com/nodenet/nodenet/overlay/linuxnet"
	"github.com/nodenet/nodenet/test/netnode"
)

const (
	bridgeName = "nodenet"
	testVNI    = 4096
	testPort   = 4789
	vxlanName  = "nodenet.4096"
)

// underlay is a netnode environment the test adds nodes to.
type underlay struct {
	*netnode.Env
}

func newUnderlay(tb testing.TB) *underlay {
	return &underlay{netnode.New(tb, netnode.Options{NoForwarding: true})}
}

// newDualStackUnderlay keeps IPv6 on in the nodes.
func newDualStackUnderlay(tb testing.TB) *underlay {
	return &underlay{netnode.New(tb, netnode.Options{NoForwarding: true, EnableIPv6: true})}
}

// node is one test node with a linuxnet.Network working in it.
type node struct {
	*netnode.Node
	idx   int
	nl    *netlink.Handle // inside the node
	ipv6  netip.Addr      // dual-stack tests only
	spec  overlay.LocalSpec
	nw    *linuxnet.Network
	local *overlay.LocalNetwork
	pods  int
}

func (u *underlay) addNode(tb testing.TB, mode config.NetworkMode) *node {
	tb.Helper()
	idx := len(u.Nodes) + 1
	nn := u.AddNode(tb, fmt.Sprintf("node-%d", idx))
	n := &node{Node: nn, idx: idx, nl: nn.Netlink(tb)}
	podCIDR := netip.PrefixFrom(netip.AddrFrom4([4]byte{10, 244, byte(idx), 0}), 24)
	n.spec = overlay.LocalSpec{
		Mode:     mode,
		Name:     bridgeName,
		PodCIDRs: []netip.Prefix{podCIDR},
		Gateways: []netip.Addr{podCIDR.Addr().Next()},
		NodeIP:   n.IP,
		VNI:      testVNI,
		Port:     testPort,
	}
	n.nw = n.newNetwork(tb)
	return n
}

func (n *node) link(tb testing.TB, name string) netlink.Link {
	tb.Helper()
	l, err := n.nl.LinkByName(name)
	if err != nil {
		tb.Fatalf("node %d: link %s: %v", n.idx, name, err)
	}
	return l
}

func (n *node) newNetwork(tb testing.TB) *linuxnet.Network {
	tb.Helper()
	nw, err := linuxnet.New(linuxnet.Options{NetNS: n.Handle, Logger: ktesting.NewLogger(tb, ktesting.NewConfig())})
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
	return overlay.RemoteNode{Name: n.Name, PodCIDRs: n.local.PodCIDRs, NodeIP: n.local.NodeIP, VtepMAC: n.local.VtepMAC}
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

// pod is wired to its node's bridge like a CNI ADD would: the j-th pod
// of node i has 10.244.i.(10+j), and in dual-stack fd00:10:244:i::(10+j).
type pod struct {
	*netnode.Pod
	ip6 netip.Addr // dual-stack only
}

func (n *node) addPod(tb testing.TB) *pod {
	tb.Helper()
	n.pods++
	w := netnode.PodWiring{Bridge: bridgeName, Gateways: n.spec.Gateways, MTU: n.local.MTU}
	for _, cidr := range n.spec.PodCIDRs {
		ip, _ := netaddr.AtOffset(cidr, 10+n.pods)
		w.Addrs = append(w.Addrs, netip.PrefixFrom(ip, cidr.Bits()))
	}
	p := &pod{Pod: n.WirePod(tb, fmt.Sprintf("pod-%d", n.pods), w)}
	if len(w.Addrs) > 1 {
		p.ip6 = w.Addrs[1].Addr()
	}
	return p
}

// pinger is a node or a pod.
type pinger interface {
	Ping(context.Context, netip.Addr) error
	NoPing(context.Context, netip.Addr) error
}

// ping wants dst to answer from inside from, retrying while ARP and the
// bridge ports settle.
func ping(tb testing.TB, from pinger, dst netip.Addr) {
	tb.Helper()
	if err := netnode.Eventually(context.Background(), 10*time.Second, func(ctx context.Context) error { return from.Ping(ctx, dst) }); err != nil {
		tb.Fatal(err)
	}
}

// noPing wants dst not to answer from inside from.
func noPing(tb testing.TB, from pinger, dst netip.Addr) {
	tb.Helper()
	if err := from.NoPing(context.Background(), dst); err != nil {
		tb.Fatal(err)
	}
}
