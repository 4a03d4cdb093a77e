package conntrack

import (
	"fmt"
	"net"
	"net/netip"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
	"k8s.io/klog/v2/ktesting"

	"github.com/nodenet/nodenet/internal/nsexec"
	"github.com/nodenet/nodenet/internal/testroot"
	"github.com/nodenet/nodenet/proxy"
	"github.com/nodenet/nodenet/test/netnode"
)

// newNS returns a throwaway network namespace with loopback up, the given
// addresses on lo and the service range routed to lo.
func newNS(t *testing.T, addrs ...string) netns.NsHandle {
	t.Helper()
	ns, err := nsexec.New()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ns.Close() })
	err = nsexec.Do(ns, func() error {
		lo, err := netlink.LinkByName("lo")
		if err != nil {
			return err
		}
		if err := netlink.LinkSetUp(lo); err != nil {
			return err
		}
		for _, a := range addrs {
			addr, err := netlink.ParseAddr(a)
			if err != nil {
				return err
			}
			if err := netlink.AddrAdd(lo, addr); err != nil {
				return fmt.Errorf("add %s: %w", a, err)
			}
		}
		_, svc, _ := net.ParseCIDR("10.96.0.0/16")
		return netlink.RouteAdd(&netlink.Route{LinkIndex: lo.Attrs().Index, Dst: svc, Scope: netlink.SCOPE_LINK})
	})
	if err != nil {
		t.Fatal(err)
	}
	return ns
}

// nft loads ruleset into ns.
func nft(t *testing.T, ns netns.NsHandle, ruleset string) {
	t.Helper()
	err := nsexec.Do(ns, func() error {
		cmd := exec.Command("nft", "-f", "-")
		cmd.Stdin = strings.NewReader(ruleset)
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("nft: %w: %s", err, out)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// dnat is a table that DNATs each service address:53 to an endpoint, for
// locally sent packets.
func dnat(services map[string]string) string {
	var b strings.Builder
	b.WriteString("table ip svc\nflush table ip svc\ntable ip svc {\n chain out {\n  type nat hook output priority -100;\n")
	for vip, ep := range services {
		fmt.Fprintf(&b, "  ip daddr %s udp dport 53 dnat to %s\n", vip, ep)
	}
	b.WriteString(" }\n}\n")
	return b.String()
}

// echo serves UDP on addr in ns, answering every datagram with name.
func echo(t *testing.T, ns netns.NsHandle, addr, name string) {
	t.Helper()
	enter := func(fn func() error) error { return nsexec.Do(ns, fn) }
	netnode.AnswerUDP(t, enter, "udp4", net.UDPAddrFromAddrPort(netip.MustParseAddrPort(addr)), name)
}

// client is a UDP socket in ns that always sends from the same port.
type client struct {
	conn *net.UDPConn
	port uint16
}

func dial(t *testing.T, ns netns.NsHandle, to string) *client {
	t.Helper()
	var conn *net.UDPConn
	err := nsexec.Do(ns, func() (err error) {
		conn, err = net.DialUDP("udp4", &net.UDPAddr{IP: net.ParseIP("10.1.0.9")}, net.UDPAddrFromAddrPort(netip.MustParseAddrPort(to)))
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return &client{conn: conn, port: uint16(conn.LocalAddr().(*net.UDPAddr).Port)}
}

// ask sends one datagram and returns the answer, or "" when none comes.
func (c *client) ask(t *testing.T) string {
	t.Helper()
	if _, err := c.conn.Write([]byte("ping")); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 64)
	_ = c.conn.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
	n, err := c.conn.Read(buf)
	if err != nil {
		return ""
	}
	return string(buf[:n])
}

// entries returns ns's UDP conntrack entries by original source port.
func entries(t *testing.T, ns netns.NsHandle) map[uint16]*netlink.ConntrackFlow {
	t.Helper()
	var flows []*netlink.ConntrackFlow
	err := nsexec.Do(ns, func() (err error) {
		flows, err = netlink.ConntrackTableList(netlink.ConntrackTable, unix.AF_INET)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	m := map[uint16]*netlink.ConntrackFlow{}
	for _, f := range flows {
		if f.Forward.Protocol == unix.IPPROTO_UDP {
			m[f.Forward.SrcPort] = f
		}
	}
	return m
}

func TestCleanerFlushesExactlyTheStaleEntriesInTheKernel(t *testing.T) {
	testroot.Require(t, "a network namespace, nftables and conntrack")
	ns := newNS(t, "10.1.0.5/32", "10.1.0.6/32", "10.1.0.9/32")
	echo(t, ns, "10.1.0.5:5353", "pod-a")
	echo(t, ns, "10.1.0.6:5353", "pod-b")
	nft(t, ns, dnat(map[string]string{"10.96.0.10": "10.1.0.5:5353", "10.96.0.11": "10.1.0.6:5353"}))

	stuck := dial(t, ns, "10.96.0.10:53")  // DNATed to pod-a, which goes away
	other := dial(t, ns, "10.96.0.11:53")  // another service, unchanged
	direct := dial(t, ns, "10.1.0.5:5353") // straight to pod-a, no service
	early := dial(t, ns, "10.96.0.12:53")  // a service that does not exist yet
	for c, want := range map[*client]string{stuck: "pod-a", other: "pod-b", direct: "pod-a", early: ""} {
		if got := c.ask(t); got != want {
			t.Fatalf("client on port %d got %q, want %q", c.port, got, want)
		}
	}
	before := entries(t, ns)
	for _, c := range []*client{stuck, other, direct, early} {
		if before[c.port] == nil {
			t.Fatalf("no conntrack entry for the client on port %d: %v", c.port, before)
		}
	}

	// pod-a leaves dns, and the new service appears with pod-b. The rules
	// change, but the stuck client's entry still DNATs to pod-a.
	prev := state(
		port("dns", proxy.UDP, "10.96.0.10", 53, "10.1.0.5:5353", "10.1.0.6:5353"),
		port("other", proxy.UDP, "10.96.0.11", 53, "10.1.0.6:5353"),
	)
	next := state(
		port("dns", proxy.UDP, "10.96.0.10", 53, "10.1.0.6:5353"),
		port("other", proxy.UDP, "10.96.0.11", 53, "10.1.0.6:5353"),
		port("new", proxy.UDP, "10.96.0.12", 53, "10.1.0.6:5353"),
	)
	nft(t, ns, dnat(map[string]string{"10.96.0.10": "10.1.0.6:5353", "10.96.0.11": "10.1.0.6:5353", "10.96.0.12": "10.1.0.6:5353"}))
	if got := stuck.ask(t); got != "pod-a" {
		t.Fatalf("before the flush the client reached %q; want it still stuck on pod-a, or this test proves nothing", got)
	}

	c := New(Options{Logger: ktesting.NewLogger(t, ktesting.NewConfig(ktesting.Verbosity(4)))})
	err := nsexec.Do(ns, func() error {
		return c.Flush(prev, next, keys(next.ServicePorts[port("dns", proxy.UDP, "10.96.0.10", 53).Key], next.ServicePorts[port("new", proxy.UDP, "10.96.0.12", 53).Key]))
	})
	if err != nil {
		t.Fatal(err)
	}

	after := entries(t, ns)
	for _, c := range []*client{stuck, early} {
		if f := after[c.port]; f != nil {
			t.Errorf("stale entry survived: %s", f)
		}
	}
	for _, c := range []*client{other, direct} {
		if after[c.port] == nil {
			t.Errorf("unrelated entry was flushed: %s", before[c.port])
		}
	}
	if len(after) != len(before)-2 {
		t.Errorf("%d UDP entries left, want %d:\nbefore %v\nafter %v", len(after), len(before)-2, before, after)
	}
	for c, want := range map[*client]string{stuck: "pod-b", early: "pod-b", other: "pod-b"} {
		if got := c.ask(t); got != want {
			t.Errorf("after the flush the client on port %d got %q, want %q", c.port, got, want)
		}
	}
}
