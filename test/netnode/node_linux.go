package netnode

import (
	"fmt"
	"net/netip"

	"github.com/vishvananda/netlink"

	"github.com/nodenet/nodenet/internal/netaddr"
)

// Node is a node's network namespace with eth0 on the underlay.
type Node struct {
	*NS
	// Name is the node's name (Kubernetes Node name in e2e tests).
	Name string
	// IP is eth0's address, the node's InternalIP.
	IP netip.Addr
	// Prefix is IP with the underlay's prefix length.
	Prefix netip.Prefix

	env  *Env
	pods int // hand-wired pods so far, naming their host ends
}

// AddNode creates one more node namespace; New calls it for Options.Nodes.
func (e *Env) AddNode(t TB, name string) *Node {
	t.Helper()
	if e.Node(name) != nil {
		t.Fatalf("netnode: node %s exists", name)
	}
	host := firstNodeHost + len(e.Nodes)
	n := &Node{Name: name, IP: e.Addr(byte(host)), env: e}
	n.Prefix = netip.PrefixFrom(n.IP, e.Subnet.Bits())
	n.NS = newNS(t, e.name(name))
	if err := n.setup(host); err != nil {
		t.Fatalf("netnode: node %s: %v", name, err)
	}
	e.Nodes = append(e.Nodes, n)
	return n
}

// setup plugs eth0 into the underlay and sets the sysctls a node has.
func (n *Node) setup(host int) error {
	if !n.env.opts.EnableIPv6 {
		// Before any link exists, so no link gets IPv6 at all.
		for _, key := range []string{"net.ipv6.conf.all.disable_ipv6", "net.ipv6.conf.default.disable_ipv6"} {
			if err := n.Sysctl(key, "1"); err != nil {
				return err
			}
		}
	}
	if !n.env.opts.NoForwarding {
		if err := n.Sysctl("net.ipv4.ip_forward", "1"); err != nil {
			return err
		}
	}
	// flanneld refuses to start without br_netfilter's sysctl, and real
	// nodes run with it on (kubeadm's preflight wants it).
	if err := n.sysctlIfPresent("net.bridge.bridge-nf-call-iptables", "1"); err != nil {
		return err
	}
	port := fmt.Sprintf("n%d", host)
	err := n.env.Underlay.Do(func() error {
		veth := &netlink.Veth{
			LinkAttrs:     netlink.LinkAttrs{Name: port, MTU: n.env.opts.MTU},
			PeerName:      "eth0",
			PeerNamespace: netlink.NsFd(int(n.Handle)),
		}
		if err := netlink.LinkAdd(veth); err != nil {
			return fmt.Errorf("add veth %s: %w", port, err)
		}
		return attach(port)
	})
	if err != nil {
		return err
	}
	return n.Do(func() error {
		eth0, err := netlink.LinkByName("eth0")
		if err != nil {
			return err
		}
		if err := netlink.AddrAdd(eth0, &netlink.Addr{IPNet: netaddr.IPNet(n.Prefix)}); err != nil {
			return fmt.Errorf("address eth0: %w", err)
		}
		return netlink.LinkSetUp(eth0)
	})
}

// AddBridge creates bridge name in the node with addrs, up: the node
// bridge the node network would make, for tests without it. mtu 0 keeps
// the kernel's default.
func (n *Node) AddBridge(t TB, name string, mtu int, addrs ...netip.Prefix) {
	t.Helper()
	err := n.Do(func() error {
		br := &netlink.Bridge{LinkAttrs: netlink.LinkAttrs{Name: name, MTU: mtu}}
		if err := netlink.LinkAdd(br); err != nil {
			return fmt.Errorf("add bridge %s: %w", name, err)
		}
		for _, a := range addrs {
			if err := netlink.AddrAdd(br, linkAddr(a)); err != nil {
				return fmt.Errorf("address %s on %s: %w", a, name, err)
			}
		}
		return netlink.LinkSetUp(br)
	})
	if err != nil {
		t.Fatalf("netnode: node %s: %v", n.Name, err)
	}
}
