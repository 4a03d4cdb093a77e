package netnode

import (
	"fmt"
	"net/netip"
	"os"
	"sync"
	"testing"

	"github.com/vishvananda/netlink"

	"github.com/nodenet/nodenet/internal/netaddr"
	"github.com/nodenet/nodenet/internal/testroot"
)

const (
	// underlayBridge is the bridge inside the underlay namespace.
	underlayBridge = "br0"
	// firstNodeHost is the first node's host number in the subnet (.11).
	firstNodeHost = 11
	defaultMTU    = 1500
)

// Options configure New.
type Options struct {
	// Nodes names the node namespaces to create, in order; the first gets
	// .11 on the underlay, the next .12, and so on. Kubernetes node names
	// fit.
	Nodes []string
	// EnableIPv6 keeps IPv6 on in the nodes. It is off by default so that
	// nothing (link-local addresses, DAD) changes a node on its own, which
	// tests that assert "no netlink writes" rely on.
	EnableIPv6 bool
	// NoForwarding leaves IPv4 forwarding off in the nodes, as a new
	// namespace has it, for tests of the code that turns it on (the node
	// network); nodes forward by default.
	NoForwarding bool
	// MTU of the underlay links (every eth0); default 1500.
	MTU int
}

// Env is one environment: an underlay segment, the host's address on it
// and the nodes.
type Env struct {
	// Subnet is the underlay subnet, e.g. 192.168.77.0/24.
	Subnet netip.Prefix
	// HostIP is the root namespace's address on the underlay (.1): bind
	// the apiserver (test/apiserver Options.BindAddress) here so nodes
	// reach it.
	HostIP netip.Addr
	// Underlay is the namespace holding the underlay bridge.
	Underlay *NS
	// Nodes in Options order.
	Nodes []*Node

	t    TB
	slot *slot
	opts Options

	pluginsOnce sync.Once
	pluginDir   string
	pluginErr   error
}

// New builds the environment and tears it down in t.Cleanup.
func New(t TB, opts Options) *Env {
	t.Helper()
	requireRoot(t, "network namespaces, veths and bridges")
	if opts.MTU == 0 {
		opts.MTU = defaultMTU
	}
	s, err := acquireSlot()
	if err != nil {
		t.Fatalf("netnode: %v", err)
	}
	// Cleanups run last-in first-out: pods and nodes go first, then the
	// host's link and the underlay, and only then is the slot free.
	t.Cleanup(s.release)
	e := &Env{t: t, slot: s, opts: opts, Subnet: s.subnet, HostIP: s.subnet.Addr().Next()}
	e.Underlay = newNS(t, e.name("underlay"))
	if err := e.buildUnderlay(t); err != nil {
		t.Fatalf("netnode: underlay: %v", err)
	}
	for _, name := range opts.Nodes {
		e.AddNode(t, name)
	}
	return e
}

// requireRoot is testroot.Require for tests; a program that is not root
// fails, since it has nothing to skip.
func requireRoot(t TB, what string) {
	t.Helper()
	if tb, ok := t.(testing.TB); ok {
		testroot.Require(tb, what)
		return
	}
	if os.Geteuid() != 0 {
		t.Fatalf("netnode: needs root: %s", what)
	}
}

// name returns the slot-scoped name of a namespace.
func (e *Env) name(parts ...string) string {
	out := e.slot.prefix()
	for _, p := range parts {
		out += "-" + p
	}
	return out
}

// buildUnderlay makes the bridge and the host's veth into it.
func (e *Env) buildUnderlay(t TB) error {
	err := e.Underlay.Do(func() error {
		br := &netlink.Bridge{LinkAttrs: netlink.LinkAttrs{Name: underlayBridge, MTU: e.opts.MTU}}
		if err := netlink.LinkAdd(br); err != nil {
			return fmt.Errorf("add bridge: %w", err)
		}
		return netlink.LinkSetUp(br)
	})
	if err != nil {
		return err
	}
	// Nothing on the underlay is filtered; this bridge is a switch.
	if err := e.Underlay.sysctlIfPresent("net.bridge.bridge-nf-call-iptables", "0"); err != nil {
		return err
	}
	hostLink := e.slot.prefix()
	veth := &netlink.Veth{
		LinkAttrs:     netlink.LinkAttrs{Name: hostLink, MTU: e.opts.MTU},
		PeerName:      "host",
		PeerNamespace: netlink.NsFd(int(e.Underlay.Handle)),
	}
	if err := netlink.LinkAdd(veth); err != nil {
		return fmt.Errorf("add host veth %s: %w", hostLink, err)
	}
	// Deleted explicitly: the kernel removes it with the underlay
	// namespace only asynchronously, and the next holder of the slot
	// wants the name at once.
	t.Cleanup(func() {
		if l, err := netlink.LinkByName(hostLink); err == nil {
			_ = netlink.LinkDel(l)
		}
	})
	host, err := netlink.LinkByName(hostLink)
	if err != nil {
		return err
	}
	addr := &netlink.Addr{IPNet: netaddr.IPNet(netip.PrefixFrom(e.HostIP, e.Subnet.Bits()))}
	if err := netlink.AddrAdd(host, addr); err != nil {
		return fmt.Errorf("address %s: %w", addr, err)
	}
	if err := netlink.LinkSetUp(host); err != nil {
		return err
	}
	return e.Underlay.Do(func() error { return attach("host") })
}

// attach enslaves link name to the underlay bridge and sets it up; call
// inside the underlay namespace.
func attach(name string) error {
	br, err := netlink.LinkByName(underlayBridge)
	if err != nil {
		return err
	}
	l, err := netlink.LinkByName(name)
	if err != nil {
		return err
	}
	if err := netlink.LinkSetMaster(l, br); err != nil {
		return fmt.Errorf("attach %s to %s: %w", name, underlayBridge, err)
	}
	return netlink.LinkSetUp(l)
}

// Addr returns the underlay address with host number host (.1 is the
// host's, nodes start at .11): for addresses a test needs on the
// segment, such as one nobody holds.
func (e *Env) Addr(host byte) netip.Addr {
	a := e.Subnet.Addr().As4()
	a[3] = host
	return netip.AddrFrom4(a)
}

// Node returns the node called name, or nil.
func (e *Env) Node(name string) *Node {
	for _, n := range e.Nodes {
		if n.Name == name {
			return n
		}
	}
	return nil
}
