//go:build linux

package vethbridge

// Address plan (these addresses exist only inside the test's netnses):
//
//	node netns     bridge nn-test     10.244.1.1/24, fd00:10:244:1::1/64
//	pod CIDRs                         10.244.1.0/24, fd00:10:244:1::/64
//	pod netns n    interface eth0     10.244.1.(10+n)/24, fd00:10:244:1::(10+n)/64
//	                                  (pod 0: 10.244.1.10, fd00:10:244:1::a)
//	TCP                               port 8080 on a pod and on the node's 10.244.1.1
//	DNS                               10.96.0.10, search svc.cluster.local

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/containernetworking/plugins/pkg/netlinksafe"
	"github.com/containernetworking/plugins/pkg/ns"
	"github.com/containernetworking/plugins/pkg/testutils"
	"github.com/containernetworking/plugins/pkg/utils/sysctl"
	"github.com/vishvananda/netlink"
	"golang.org/x/net/icmp"
	"golang.org/x/net/ipv4"
	"golang.org/x/net/ipv6"
	"golang.org/x/sys/unix"
	"k8s.io/klog/v2"

	"github.com/nodenet/nodenet/cni"
	"github.com/nodenet/nodenet/config"
	"github.com/nodenet/nodenet/internal/netaddr"
	"github.com/nodenet/nodenet/internal/testroot"
)

const testBridge = "nn-test"

var (
	podCIDR4 = netip.MustParsePrefix("10.244.1.0/24")
	podCIDR6 = netip.MustParsePrefix("fd00:10:244:1::/64")
	gw4      = netip.MustParseAddr("10.244.1.1")
	gw6      = netip.MustParseAddr("fd00:10:244:1::1")
)

func requireRoot(tb testing.TB) {
	tb.Helper()
	testroot.Require(tb, "network namespaces, veths, bridges")
}

// newNetNS makes a persistent netns that is removed when the test ends
// (its links go with it).
func newNetNS(tb testing.TB) ns.NetNS {
	tb.Helper()
	n, err := testutils.NewNS()
	if err != nil {
		tb.Fatalf("create netns: %v", err)
	}
	tb.Cleanup(func() { removeNetNS(tb, n) })
	return n
}

// removeNetNS closes, unmounts (lazily, so that a handle left open cannot
// keep it) and removes a netns made by newNetNS; doing it twice is fine.
func removeNetNS(tb testing.TB, n ns.NetNS) {
	tb.Helper()
	_ = n.Close()
	if _, err := os.Stat(n.Path()); errors.Is(err, os.ErrNotExist) {
		return
	}
	if err := unix.Unmount(n.Path(), unix.MNT_DETACH); err != nil {
		tb.Errorf("unmount netns %s: %v", n.Path(), err)
	}
	if err := os.Remove(n.Path()); err != nil {
		tb.Errorf("remove netns %s: %v", n.Path(), err)
	}
}

// in runs f in netns n (ns.Do: a locked OS thread, the original netns
// restored after).
func in(tb testing.TB, n ns.NetNS, f func() error) {
	tb.Helper()
	if err := n.Do(func(ns.NetNS) error { return f() }); err != nil {
		tb.Fatalf("in %s: %v", n.Path(), err)
	}
}

// testNode is a node: a netns holding the bridge, and the wiring for it.
type testNode struct {
	ns ns.NetNS
	nw *cni.NodeNetwork
	w  *Wiring
	// pods holds the pod netnses newPod made, by path.
	pods map[string]ns.NetNS
}

type nodeOptions struct {
	dualStack bool
	mtu       int
	// noBridge leaves the bridge out; bridgeDown leaves it down;
	// noGateway6 leaves the IPv6 gateway off it.
	noBridge, bridgeDown, noGateway6 bool
}

// newNode makes a node netns with bridge nn-test holding the gateways.
func newNode(tb testing.TB, o nodeOptions) *testNode {
	tb.Helper()
	n := newNetNS(tb)
	nw := &cni.NodeNetwork{
		Mode:     config.NetworkModeOverlay,
		Name:     testBridge,
		PodCIDRs: []netip.Prefix{podCIDR4},
		Gateways: []netip.Addr{gw4},
		MTU:      o.mtu,
		DNS:      cni.DNS{Nameservers: []string{"10.96.0.10"}, Search: []string{"svc.cluster.local"}},
	}
	if o.dualStack {
		nw.PodCIDRs = append(nw.PodCIDRs, podCIDR6)
		nw.Gateways = append(nw.Gateways, gw6)
	}
	in(tb, n, func() error {
		lo, err := netlinksafe.LinkByName("lo")
		if err != nil {
			return err
		}
		if err := netlink.LinkSetUp(lo); err != nil {
			return err
		}
		if o.noBridge {
			return nil
		}
		attrs := netlink.NewLinkAttrs()
		attrs.Name = testBridge
		br := &netlink.Bridge{LinkAttrs: attrs}
		if err := netlink.LinkAdd(br); err != nil {
			return fmt.Errorf("add bridge: %w", err)
		}
		for i, gw := range nw.Gateways {
			if gw.Is6() && o.noGateway6 {
				continue
			}
			addr := &netlink.Addr{IPNet: netaddr.IPNet(netip.PrefixFrom(gw, nw.PodCIDRs[i].Bits()))}
			if gw.Is6() {
				addr.Flags = unix.IFA_F_NODAD // usable at once, like a settled gateway
			}
			if err := netlink.AddrAdd(br, addr); err != nil {
				return fmt.Errorf("add %v to bridge: %w", addr, err)
			}
		}
		if o.bridgeDown {
			return nil
		}
		return netlink.LinkSetUp(br)
	})
	logger := klog.Background().V(4)
	w, err := New(Options{HostNetNS: n.Path(), Logger: &logger})
	if err != nil {
		tb.Fatalf("New: %v", err)
	}
	return &testNode{ns: n, nw: nw, w: w, pods: map[string]ns.NetNS{}}
}

// newPod makes pod netns number i (see the address plan) and its request.
func (nd *testNode) newPod(tb testing.TB, i int) *cni.Pod {
	tb.Helper()
	n := newNetNS(tb)
	nd.pods[n.Path()] = n
	pod := &cni.Pod{
		Attachment: cni.Attachment{ContainerID: fmt.Sprintf("%064x", 0xc0ffee00+i), IfName: "eth0"},
		Netns:      n.Path(),
		Namespace:  "default",
		Name:       fmt.Sprintf("pod-%d", i),
	}
	for j, cidr := range nd.nw.PodCIDRs {
		pod.Addresses = append(pod.Addresses, cni.Address{IP: podIP(cidr, i), Gateway: nd.nw.Gateways[j]})
	}
	return pod
}

// podIP is pod i's address in cidr: host part 10+i.
func podIP(cidr netip.Prefix, i int) netip.Prefix {
	b := cidr.Addr().AsSlice()
	b[len(b)-1] = byte(10 + i)
	ip, _ := netip.AddrFromSlice(b)
	return netip.PrefixFrom(ip, cidr.Bits())
}

// podNS is the pod's netns, as newPod made it.
func (nd *testNode) podNS(pod *cni.Pod) ns.NetNS {
	return nd.pods[pod.Netns]
}

// add wires the pod or fails the test.
func (nd *testNode) add(tb testing.TB, pod *cni.Pod) {
	tb.Helper()
	if _, err := nd.w.Add(context.Background(), nd.nw, pod); err != nil {
		tb.Fatalf("Add: %v", err)
	}
}

// link looks a link up in netns n; nil when absent.
func link(tb testing.TB, n ns.NetNS, name string) netlink.Link {
	tb.Helper()
	var l netlink.Link
	in(tb, n, func() error {
		var err error
		l, err = netlinksafe.LinkByName(name)
		if isNotFound(err) {
			l, err = nil, nil
		}
		return err
	})
	return l
}

// hairpin reads the bridge port's hairpin flag in netns n.
func hairpin(tb testing.TB, n ns.NetNS, name string) bool {
	tb.Helper()
	var on bool
	in(tb, n, func() error {
		l, err := netlinksafe.LinkByName(name)
		if err != nil {
			return err
		}
		pi, err := netlinksafe.LinkGetProtinfo(l)
		on = pi.Hairpin
		return err
	})
	return on
}

// readSysctl reads a sysctl of netns n.
func readSysctl(tb testing.TB, n ns.NetNS, name string) string {
	tb.Helper()
	var v string
	in(tb, n, func() error {
		var err error
		v, err = sysctl.Sysctl(name)
		return err
	})
	return v
}

// ping sends ICMP echo requests from netns n to dst until one is answered
// (3 tries, 1 s each).
func ping(n ns.NetNS, dst netip.Addr) error {
	var last error
	for try := range 3 {
		last = n.Do(func(ns.NetNS) error { return pingOnce(dst, try) })
		if last == nil {
			return nil
		}
	}
	return fmt.Errorf("ping %s from %s: %w", dst, n.Path(), last)
}

func pingOnce(dst netip.Addr, seq int) error {
	network, proto := "ip4:icmp", 1
	var req, reply icmp.Type = ipv4.ICMPTypeEcho, ipv4.ICMPTypeEchoReply
	if dst.Is6() {
		network, proto = "ip6:ipv6-icmp", 58
		req, reply = ipv6.ICMPTypeEchoRequest, ipv6.ICMPTypeEchoReply
	}
	c, err := icmp.ListenPacket(network, "")
	if err != nil {
		return err
	}
	defer c.Close()
	id := os.Getpid() & 0xffff
	msg := icmp.Message{Type: req, Body: &icmp.Echo{ID: id, Seq: seq, Data: []byte("nodenet vethbridge test")}}
	b, err := msg.Marshal(nil) // the kernel fills in the ICMPv6 checksum
	if err != nil {
		return err
	}
	if err := c.SetDeadline(time.Now().Add(time.Second)); err != nil {
		return err
	}
	if _, err := c.WriteTo(b, &net.IPAddr{IP: dst.AsSlice()}); err != nil {
		return err
	}
	buf := make([]byte, 1500)
	for {
		n, from, err := c.ReadFrom(buf)
		if err != nil {
			return err
		}
		m, err := icmp.ParseMessage(proto, buf[:n])
		if err != nil || m.Type != reply {
			continue
		}
		if e, ok := m.Body.(*icmp.Echo); ok && e.ID == id && e.Seq == seq && from.String() == dst.String() {
			return nil
		}
	}
}

// serveTCP listens on addr inside netns n and answers every connection
// with greeting.
func serveTCP(tb testing.TB, n ns.NetNS, addr netip.AddrPort, greeting string) {
	tb.Helper()
	var l net.Listener
	in(tb, n, func() error {
		var err error
		l, err = net.Listen("tcp", addr.String()) // the socket stays in n
		return err
	})
	tb.Cleanup(func() { _ = l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			_, _ = io.WriteString(c, greeting)
			_ = c.Close()
		}
	}()
}

// dialTCP connects to addr from inside netns n and returns what the
// server said.
func dialTCP(n ns.NetNS, addr netip.AddrPort) (string, error) {
	var got string
	err := n.Do(func(ns.NetNS) error {
		c, err := net.DialTimeout("tcp", addr.String(), 3*time.Second) // the socket is made in n
		if err != nil {
			return err
		}
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(3 * time.Second))
		b, err := io.ReadAll(c)
		got = string(b)
		return err
	})
	if err != nil {
		return "", fmt.Errorf("tcp %s from %s: %w", addr, n.Path(), err)
	}
	return got, nil
}

// errAfter is a context whose Err starts failing after limit calls: it
// makes Add stop at each of its steps in turn.
type errAfter struct {
	context.Context
	calls, limit int
}

func (c *errAfter) Err() error {
	c.calls++
	if c.calls > c.limit {
		return context.Canceled
	}
	return nil
}

// addVeth makes veth name (with alias, on bridge master when not "") and
// its peer in the calling thread's netns.
func addVeth(name, peer, alias, master string) error {
	attrs := netlink.NewLinkAttrs()
	attrs.Name = name
	v := &netlink.Veth{LinkAttrs: attrs, PeerName: peer}
	if err := netlink.LinkAdd(v); err != nil {
		return fmt.Errorf("add veth %s: %w", name, err)
	}
	l, err := netlinksafe.LinkByName(name)
	if err != nil {
		return err
	}
	if alias != "" { // the kernel ignores IFLA_IFALIAS when it creates a link
		if err := netlink.LinkSetAlias(l, alias); err != nil {
			return err
		}
	}
	if master != "" {
		br, err := netlinksafe.LinkByName(master)
		if err != nil {
			return err
		}
		return netlink.LinkSetMaster(l, br)
	}
	return nil
}

func mustContain(tb testing.TB, err error, want string) {
	tb.Helper()
	if err == nil {
		tb.Fatalf("got no error, want one containing %q", want)
	}
	if !strings.Contains(err.Error(), want) {
		tb.Fatalf("error %q does not contain %q", err, want)
	}
}
