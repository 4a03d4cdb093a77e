package cni_test

// Address plan: every test node is a netnode node (its eth0 on the
// slot's underlay, see test/netnode) holding the node bridge "nodenet".
//   10.244.1.0/24  pod CIDR of the default test node; 10.244.1.1 is the
//                  gateway (the bridge's address), 10.244.1.2 the reserved
//                  overlay source VIP, pods get 10.244.1.3 and up
//   10.244.9.0/29  pod CIDR of the small-pool node: .1 gateway, .2 source
//                  VIP, .3-.6 for pods (4 addresses)
//   10.244.0.0/16  cluster CIDR; 10.96.0.0/12 service CIDR

import (
	"errors"
	"net/netip"
	"os"
	"path/filepath"
	"testing"

	"github.com/containernetworking/cni/pkg/types"
	"github.com/vishvananda/netlink"

	"github.com/nodenet/nodenet/cni"
	"github.com/nodenet/nodenet/config"
	"github.com/nodenet/nodenet/test/netnode"
)

const (
	bridgeName = "nodenet"
	podCIDR    = "10.244.1.0/24"
)

// testNode is a node with the bridge the overlay dataplane would make,
// the NodeNetwork the agent would hand the CNI server, and, once started,
// that server and a runtime driving the real nodenet-cni binary.
type testNode struct {
	*netnode.Node
	*netnode.NodenetCNI
	nw *cni.NodeNetwork
}

func newTestNode(t testing.TB, cidr string) *testNode {
	t.Helper()
	prefix := netip.MustParsePrefix(cidr)
	gw := prefix.Addr().Next()
	env := netnode.New(t, netnode.Options{Nodes: []string{"node-a"}})
	n := &testNode{Node: env.Node("node-a"), nw: &cni.NodeNetwork{
		Mode:         config.NetworkModeOverlay,
		Name:         bridgeName,
		PodCIDRs:     []netip.Prefix{prefix},
		Gateways:     []netip.Addr{gw},
		SourceVIP:    gw.Next(),
		MTU:          1450,
		ClusterCIDRs: []netip.Prefix{netip.MustParsePrefix("10.244.0.0/16")},
		ServiceCIDRs: []netip.Prefix{netip.MustParsePrefix("10.96.0.0/12")},
		DNS:          cni.DNS{Nameservers: []string{"10.96.0.10"}, Search: []string{"cluster.local"}},
	}}
	n.AddBridge(t, bridgeName, n.nw.MTU, netip.PrefixFrom(gw, prefix.Bits()))
	return n
}

// startCNI starts the CNI server and the runtime, with the plugins this
// test binary built; with opts.Network nil the server waits for it.
func (n *testNode) startCNI(t testing.TB, opts netnode.NodenetCNIOptions) {
	t.Helper()
	opts.BinDir = binaries(t)
	n.NodenetCNI = n.StartNodenetCNI(t, opts)
}

// allocations lists the IPAM store's allocation files (host-local's
// layout: one file per address).
func (n *testNode) allocations() []string {
	entries, _ := os.ReadDir(filepath.Join(n.IPAMDir, n.nw.Name))
	var out []string
	for _, e := range entries {
		if _, err := netip.ParseAddr(e.Name()); err == nil {
			out = append(out, e.Name())
		}
	}
	return out
}

// bridgePorts lists the interfaces attached to the node bridge.
func (n *testNode) bridgePorts(t testing.TB) []string {
	t.Helper()
	nl := n.Netlink(t)
	br, err := nl.LinkByName(bridgeName)
	if err != nil {
		t.Fatal(err)
	}
	links, err := nl.LinkList()
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, l := range links {
		if l.Attrs().MasterIndex == br.Attrs().Index {
			out = append(out, l.Attrs().Name)
		}
	}
	return out
}

// eth0 returns the pod's interface, or an error once it is gone.
func eth0(p *netnode.Pod) (netlink.Link, error) {
	var l netlink.Link
	err := p.Do(func() (err error) {
		l, err = netlink.LinkByName("eth0")
		return err
	})
	return l, err
}

// cniCode returns the CNI error code of err (0 when it isn't one).
func cniCode(err error) uint {
	var e *types.Error
	if errors.As(err, &e) {
		return e.Code
	}
	return 0
}
