package hostport

// Address plan (real kernel; every namespace is made by the test and
// removed after it):
//   node netns    bridge "nnbr0": 10.244.1.1/24, fd00:10:244:1::1/64 (the
//                 pod CIDRs' gateways); uplink "eth0": 192.168.1.11/24,
//                 192.168.1.12/24, fd00:1::11/64; forwarding on
//   client netns  "eth0" (the uplink's peer): 192.168.1.100/24,
//                 fd00:1::100/64; no route to the pod CIDRs
//   pod netns     "eth0": 10.244.1.3/24, fd00:10:244:1::3/64, default
//                 routes via the gateways; its peer "vethpod" is a port of
//                 nnbr0. A TCP server on :8080 and a UDP server on :5353
//                 answer "pong <address the pod saw>".
// hostPorts: 30080/tcp → 8080, 30053/udp → 5353.

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/containernetworking/plugins/pkg/ns"
	"github.com/containernetworking/plugins/pkg/testutils"
	"github.com/containernetworking/plugins/pkg/utils/sysctl"
	"github.com/google/go-cmp/cmp"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
	"sigs.k8s.io/knftables"

	"github.com/nodenet/nodenet/cni"
	"github.com/nodenet/nodenet/internal/nftnl/nftnltest"
	"github.com/nodenet/nodenet/internal/testroot"
)

func requireRoot(tb testing.TB) {
	tb.Helper()
	testroot.Require(tb, "network namespaces, nftables")
}

var (
	nodeIP     = netip.MustParseAddr("192.168.1.11")
	nodeIP2    = netip.MustParseAddr("192.168.1.12")
	nodeIP6    = netip.MustParseAddr("fd00:1::11")
	clientIP   = netip.MustParseAddr("192.168.1.100")
	clientIP6  = netip.MustParseAddr("fd00:1::100")
	gateway    = netip.MustParseAddr("10.244.1.1")
	gateway6   = netip.MustParseAddr("fd00:10:244:1::1")
	kernelPod4 = "10.244.1.3"
	kernelPod6 = "fd00:10:244:1::3"
)

// testNet is the three namespaces.
type testNet struct {
	node, client, pod ns.NetNS
	nw                *cni.NodeNetwork
}

func newTestNet(t testing.TB) *testNet {
	t.Helper()
	requireRoot(t)
	n := &testNet{nw: &cni.NodeNetwork{
		Name:     "nnbr0",
		PodCIDRs: []netip.Prefix{netip.MustParsePrefix("10.244.1.0/24"), netip.MustParsePrefix("fd00:10:244:1::/64")},
		Gateways: []netip.Addr{gateway, gateway6},
		NodeIPs:  []netip.Addr{nodeIP, nodeIP6},
	}}
	for _, p := range []*ns.NetNS{&n.node, &n.client, &n.pod} {
		netNS, err := testutils.NewNS()
		if err != nil {
			t.Fatal(err)
		}
		*p = netNS
		t.Cleanup(func() {
			netNS.Close()
			if err := testutils.UnmountNS(netNS); err != nil {
				t.Errorf("remove netns: %v", err)
			}
		})
	}
	// No duplicate address detection anywhere (set before the links exist,
	// so link-local addresses skip it too): a tentative address makes the
	// first IPv6 connections of a test stall for about a second.
	for _, netNS := range []ns.NetNS{n.node, n.client, n.pod} {
		must(t, setSysctls(netNS, "net.ipv6.conf.all.accept_dad", "0", "net.ipv6.conf.default.accept_dad", "0"))
	}
	node, client, pod := handleAt(t, n.node), handleAt(t, n.client), handleAt(t, n.pod)

	br := &netlink.Bridge{LinkAttrs: netlink.LinkAttrs{Name: "nnbr0"}}
	must(t, node.LinkAdd(br))
	uplink := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: "eth0"}, PeerName: "uplink-peer", PeerNamespace: netlink.NsFd(n.client.Fd())}
	must(t, node.LinkAdd(uplink))
	podVeth := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: "vethpod", MasterIndex: linkIndex(t, node, "nnbr0")}, PeerName: "pod-peer", PeerNamespace: netlink.NsFd(n.pod.Fd())}
	must(t, node.LinkAdd(podVeth))
	rename(t, client, "uplink-peer", "eth0")
	rename(t, pod, "pod-peer", "eth0")

	// Hairpin mode on the pod's port, as cni/vethbridge sets it: with
	// br_netfilter, a packet DNATed to a pod on the bridge it came from is
	// bridged back out of the port it came in on.
	must(t, node.LinkSetHairpin(&netlink.Veth{LinkAttrs: netlink.LinkAttrs{Index: linkIndex(t, node, "vethpod")}}, true))
	must(t, setSysctls(n.node, "net.ipv4.ip_forward", "1", "net.ipv6.conf.all.forwarding", "1"))
	addrs(t, node, "nnbr0", "10.244.1.1/24", "fd00:10:244:1::1/64")
	addrs(t, node, "eth0", "192.168.1.11/24", "192.168.1.12/24", "fd00:1::11/64")
	addrs(t, client, "eth0", "192.168.1.100/24", "fd00:1::100/64")
	addrs(t, pod, "eth0", kernelPod4+"/24", kernelPod6+"/64")
	for _, l := range []struct {
		h    *netlink.Handle
		name string
	}{{node, "nnbr0"}, {node, "eth0"}, {node, "vethpod"}, {node, "lo"}, {client, "eth0"}, {client, "lo"}, {pod, "eth0"}, {pod, "lo"}} {
		link, err := l.h.LinkByName(l.name)
		must(t, err)
		must(t, l.h.LinkSetUp(link))
	}
	for _, gw := range []netip.Addr{gateway, gateway6} {
		must(t, pod.RouteAdd(&netlink.Route{LinkIndex: linkIndex(t, pod, "eth0"), Gw: gw.AsSlice()}))
	}
	return n
}

// setSysctls sets name, value, ... in netns n.
func setSysctls(n ns.NetNS, kv ...string) error {
	return n.Do(func(ns.NetNS) error {
		for i := 0; i+1 < len(kv); i += 2 {
			if _, err := sysctl.Sysctl(kv[i], kv[i+1]); err != nil {
				return err
			}
		}
		return nil
	})
}

func handleAt(t testing.TB, n ns.NetNS) *netlink.Handle {
	t.Helper()
	nsh, err := netns.GetFromPath(n.Path())
	must(t, err)
	defer nsh.Close()
	h, err := netlink.NewHandleAt(nsh)
	must(t, err)
	t.Cleanup(h.Close)
	return h
}

func linkIndex(t testing.TB, h *netlink.Handle, name string) int {
	t.Helper()
	l, err := h.LinkByName(name)
	must(t, err)
	return l.Attrs().Index
}

func rename(t testing.TB, h *netlink.Handle, from, to string) {
	t.Helper()
	l, err := h.LinkByName(from)
	must(t, err)
	must(t, h.LinkSetName(l, to))
}

// addrs adds addresses without duplicate address detection, so IPv6 ones
// are usable at once.
func addrs(t testing.TB, h *netlink.Handle, link string, cidrs ...string) {
	t.Helper()
	l, err := h.LinkByName(link)
	must(t, err)
	for _, c := range cidrs {
		a, err := netlink.ParseAddr(c)
		must(t, err)
		a.Flags = unix.IFA_F_NODAD
		must(t, h.AddrAdd(l, a))
	}
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// serve starts the pod's TCP and UDP servers; they answer each line or
// datagram with "pong <the sender's address as the pod saw it>".
func (n *testNet) serve(t testing.TB) {
	t.Helper()
	var l net.Listener
	var pc net.PacketConn
	must(t, n.pod.Do(func(ns.NetNS) error {
		var err error
		if l, err = net.Listen("tcp", ":8080"); err != nil {
			return err
		}
		pc, err = net.ListenPacket("udp", ":5353")
		return err
	}))
	t.Cleanup(func() { l.Close(); pc.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				_ = c.SetDeadline(time.Now().Add(5 * time.Second))
				if _, err := bufio.NewReader(c).ReadString('\n'); err == nil {
					fmt.Fprintf(c, "pong %s\n", c.RemoteAddr().(*net.TCPAddr).AddrPort().Addr().Unmap())
				}
			}()
		}
	}()
	go func() {
		buf := make([]byte, 64)
		for {
			_, from, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			_, _ = pc.WriteTo([]byte("pong "+from.(*net.UDPAddr).AddrPort().Addr().Unmap().String()+"\n"), from)
		}
	}()
}

// dialTCP connects from netns from to dst and returns the address the pod
// saw the connection come from.
func dialTCP(from ns.NetNS, dst netip.AddrPort) (seenAs string, err error) {
	return dialTCPFrom(from, netip.Addr{}, dst)
}

// dialTCPFrom is dialTCP from source address src (any when invalid).
func dialTCPFrom(from ns.NetNS, src netip.Addr, dst netip.AddrPort) (seenAs string, err error) {
	err = from.Do(func(ns.NetNS) error {
		d := net.Dialer{Timeout: 2 * time.Second}
		if src.IsValid() {
			d.LocalAddr = &net.TCPAddr{IP: src.AsSlice()}
		}
		c, err := d.Dial("tcp", dst.String())
		if err != nil {
			return err
		}
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(2 * time.Second))
		if _, err := c.Write([]byte("ping\n")); err != nil {
			return err
		}
		line, err := bufio.NewReader(c).ReadString('\n')
		if err != nil {
			return err
		}
		seenAs = strings.TrimSpace(strings.TrimPrefix(line, "pong "))
		return nil
	})
	return seenAs, err
}

// sendUDP sends one datagram from netns from, source port srcPort, to dst
// and waits a second for the answer.
func sendUDP(from ns.NetNS, srcPort int, dst netip.AddrPort) (seenAs string, err error) {
	err = from.Do(func(ns.NetNS) error {
		pc, err := net.ListenUDP("udp", &net.UDPAddr{Port: srcPort})
		if err != nil {
			return err
		}
		defer pc.Close()
		if _, err := pc.WriteToUDPAddrPort([]byte("ping\n"), dst); err != nil {
			return err
		}
		_ = pc.SetReadDeadline(time.Now().Add(time.Second))
		buf := make([]byte, 64)
		n, _, err := pc.ReadFromUDPAddrPort(buf)
		if err != nil {
			return err
		}
		seenAs = strings.TrimSpace(strings.TrimPrefix(string(buf[:n]), "pong "))
		return nil
	})
	return seenAs, err
}

func (n *testNet) wiring(t testing.TB) *Wiring {
	t.Helper()
	w, err := New(Options{Inner: newFakeInner(), HostNetNS: n.node.Path()})
	must(t, err)
	return w
}

func TestKernel(t *testing.T) {
	n := newTestNet(t)
	n.serve(t)
	ctx := context.Background()
	w := n.wiring(t)
	must(t, w.Ready(ctx, n.nw))
	pod := testPod("web", []string{kernelPod4, kernelPod6}, tcp(30080, 8080))

	reaches := func(t *testing.T, from ns.NetNS, dst netip.AddrPort, wantSeenAs netip.Addr) {
		t.Helper()
		seen, err := dialTCP(from, dst)
		if err != nil {
			t.Fatalf("connect to %s: %v", dst, err)
		}
		if wantSeenAs.IsValid() && seen != wantSeenAs.String() {
			t.Errorf("the pod saw the connection to %s come from %s, want %s", dst, seen, wantSeenAs)
		}
	}
	fails := func(t *testing.T, from ns.NetNS, dst netip.AddrPort) {
		t.Helper()
		if seen, err := dialTCP(from, dst); err == nil {
			t.Errorf("connect to %s reached the pod (seen as %s), want a failure", dst, seen)
		}
	}
	hp := func(a netip.Addr, port uint16) netip.AddrPort { return netip.AddrPortFrom(a, port) }

	t.Run("before Add the hostPort is closed", func(t *testing.T) {
		fails(t, n.client, hp(nodeIP, 30080))
	})

	if _, err := w.Add(ctx, n.nw, pod); err != nil {
		t.Fatalf("Add: %v", err)
	}
	if testing.Verbose() {
		out, _ := nftList(n.node)
		t.Logf("the kernel's table after Add:\n%s", out)
	}

	t.Run("a client reaches the pod through the node's address and the pod sees the client's address", func(t *testing.T) {
		reaches(t, n.client, hp(nodeIP, 30080), clientIP)
		reaches(t, n.client, hp(nodeIP2, 30080), clientIP)
	})
	t.Run("a client reaches the pod through the node's IPv6 address", func(t *testing.T) {
		reaches(t, n.client, hp(nodeIP6, 30080), clientIP6)
	})
	t.Run("the node reaches its own hostPort", func(t *testing.T) {
		reaches(t, n.node, hp(nodeIP, 30080), nodeIP)
		reaches(t, n.node, hp(nodeIP6, 30080), nodeIP6)
	})
	for _, brnf := range []string{"1", "0"} {
		// br_netfilter's bridge-nf-call-ip(6)tables decide whether the
		// DNATed packet is bridged back to the pod or routed: both must
		// work. (The sysctls exist when br_netfilter is loaded.)
		name := map[string]string{"1": "with", "0": "without"}[brnf]
		t.Run("the pod reaches its own hostPort through the node's address, masqueraded to its gateway, "+name+" br_netfilter", func(t *testing.T) {
			if _, err := os.Stat("/proc/sys/net/bridge/bridge-nf-call-iptables"); err != nil {
				t.Skip("br_netfilter is not loaded")
			}
			must(t, setSysctls(n.node, "net.bridge.bridge-nf-call-iptables", brnf, "net.bridge.bridge-nf-call-ip6tables", brnf))
			defer func() {
				must(t, setSysctls(n.node, "net.bridge.bridge-nf-call-iptables", "1", "net.bridge.bridge-nf-call-ip6tables", "1"))
			}()
			reaches(t, n.pod, hp(nodeIP, 30080), gateway)
			reaches(t, n.pod, hp(nodeIP6, 30080), gateway6)
		})
	}
	t.Run("the node reaches a hostPort on 127.0.0.1 from its own address, as upstream's HostPort spec does", func(t *testing.T) {
		seen, err := dialTCPFrom(n.node, nodeIP, hp(netip.MustParseAddr("127.0.0.1"), 30080))
		if err != nil {
			t.Fatalf("connect: %v", err)
		}
		if seen != nodeIP.String() {
			t.Errorf("the pod saw the connection come from %s, want %s", seen, nodeIP)
		}
	})
	t.Run("localhost from localhost is not a hostPort", func(t *testing.T) {
		fails(t, n.node, hp(netip.MustParseAddr("127.0.0.1"), 30080))
		fails(t, n.node, hp(netip.IPv6Loopback(), 30080))
	})
	t.Run("traffic to the pod's own port passes the node untouched", func(t *testing.T) {
		fails(t, n.client, hp(nodeIP, 8080))
	})
	t.Run("Check passes, then names a mapping deleted behind its back", func(t *testing.T) {
		if err := w.Check(ctx, n.nw, pod, nil); err != nil {
			t.Fatalf("Check: %v", err)
		}
		if out, err := nft(n.node, "delete element inet nodenet-hostport hostports-v6 { tcp . 30080 }"); err != nil {
			t.Fatalf("%v: %s", err, out)
		}
		err := w.Check(ctx, n.nw, pod, nil)
		if err == nil || !strings.Contains(err.Error(), "hostPort tcp/30080 on every IPv6 address → [fd00:10:244:1::3]:8080 is not programmed") {
			t.Fatalf("Check: %v, want the missing IPv6 mapping named", err)
		}
		fails(t, n.client, hp(nodeIP6, 30080))
		// A retried ADD repairs it.
		if _, err := w.Add(ctx, n.nw, pod); err != nil {
			t.Fatal(err)
		}
		reaches(t, n.client, hp(nodeIP6, 30080), clientIP6)
	})
	t.Run("another pod can't take the hostPort", func(t *testing.T) {
		other := testPod("api", []string{"10.244.1.4"}, onIP(tcp(30080, 80), "192.168.1.12"))
		_, err := w.Add(ctx, n.nw, other)
		if !errors.Is(err, ErrConflict) || !strings.Contains(err.Error(), "pod default/web") {
			t.Fatalf("Add: %v, want a conflict naming pod default/web", err)
		}
	})
	t.Run("after Del the hostPort is closed", func(t *testing.T) {
		must(t, w.Del(ctx, n.nw, pod))
		fails(t, n.client, hp(nodeIP, 30080))
		fails(t, n.client, hp(nodeIP6, 30080))
		fails(t, n.pod, hp(nodeIP, 30080))
	})
	t.Run("with a hostIP only that address answers", func(t *testing.T) {
		p := *pod
		p.PortMappings = []cni.PortMapping{onIP(tcp(30080, 8080), nodeIP2.String())}
		if _, err := w.Add(ctx, n.nw, &p); err != nil {
			t.Fatal(err)
		}
		defer func() { must(t, w.Del(ctx, n.nw, &p)) }()
		reaches(t, n.client, hp(nodeIP2, 30080), clientIP)
		fails(t, n.client, hp(nodeIP, 30080))
		fails(t, n.client, hp(nodeIP6, 30080))
	})
	t.Run("a UDP hostPort answers, even for a client that sent before it existed", func(t *testing.T) {
		// The first datagram finds no mapping and leaves a conntrack entry
		// that isn't DNATed; Add must delete it, or the second datagram
		// (same 5-tuple) would follow it for as long as the client sends.
		dst := hp(nodeIP, 30053)
		if seen, err := sendUDP(n.client, 40053, dst); err == nil {
			t.Fatalf("a datagram to %s was answered by %s before Add", dst, seen)
		}
		p := *pod
		p.PortMappings = []cni.PortMapping{withProto(tcp(30053, 5353), "udp")}
		if _, err := w.Add(ctx, n.nw, &p); err != nil {
			t.Fatal(err)
		}
		defer func() { must(t, w.Del(ctx, n.nw, &p)) }()
		seen, err := sendUDP(n.client, 40053, dst)
		if err != nil {
			t.Fatalf("datagram to %s: %v", dst, err)
		}
		if seen != clientIP.String() {
			t.Errorf("the pod saw the datagram come from %s, want %s", seen, clientIP)
		}
	})
	t.Run("a restarted agent finds the mappings in the kernel and removes them", func(t *testing.T) {
		if _, err := w.Add(ctx, n.nw, pod); err != nil {
			t.Fatal(err)
		}
		restarted := n.wiring(t)
		atts, err := restarted.List(ctx, n.nw)
		if err != nil {
			t.Fatal(err)
		}
		if len(atts) != 1 || atts[0] != pod.Attachment {
			t.Fatalf("List: %v, want [%v]", atts, pod.Attachment)
		}
		must(t, restarted.Del(ctx, n.nw, &cni.Pod{Attachment: pod.Attachment}))
		fails(t, n.client, hp(nodeIP, 30080))
		out, err := nftList(n.node)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(out, "c-web") {
			t.Errorf("mappings left:\n%s", out)
		}
	})
}

// TestTheTableIsProgrammedInHostNetNS: the Wiring's netlink socket is
// opened inside HostNetNS and stays bound to it, so every later call
// programs the node's namespace whatever thread it runs on, and never the
// caller's.
func TestTheTableIsProgrammedInHostNetNS(t *testing.T) {
	n := newTestNet(t)
	ctx := context.Background()
	const table = "nodenet-hostport-probe"
	w, err := New(Options{Inner: newFakeInner(), HostNetNS: n.node.Path(), TableName: table})
	must(t, err)
	must(t, w.Ready(ctx, n.nw))
	must(t, n.node.Do(func(ns.NetNS) error {
		out, err := exec.Command("nft", "list", "table", "inet", table).CombinedOutput()
		if err != nil {
			return fmt.Errorf("the table is not in the node's netns: %w: %s", err, out)
		}
		return nil
	}))
	if out, err := exec.Command("nft", "list", "table", "inet", table).CombinedOutput(); err == nil {
		t.Errorf("the table is in the test's own netns too:\n%s", out)
	}
}

// TestTheNetlinkTableIsTheOneNFTWrites programs the same pods through
// netlink (as the agent does) and through nft (knftables.New, run inside
// the other namespace) into two namespaces and compares what nft lists
// after each step: every chain, rule, map and element (with its comment)
// must read back the same, so the netlink encoding of each rule shape
// means what its nft text means. The packet tests (TestKernel) then
// exercise the netlink-written table.
func TestTheNetlinkTableIsTheOneNFTWrites(t *testing.T) {
	requireRoot(t)
	ctx := context.Background()
	var viaNetlink, viaNFT ns.NetNS
	for _, p := range []*ns.NetNS{&viaNetlink, &viaNFT} {
		netNS, err := testutils.NewNS()
		must(t, err)
		*p = netNS
		t.Cleanup(func() {
			netNS.Close()
			_ = testutils.UnmountNS(netNS)
		})
	}
	nl, err := New(Options{Inner: newFakeInner(), HostNetNS: viaNetlink.Path()})
	must(t, err)
	var text *Wiring
	must(t, viaNFT.Do(func(ns.NetNS) error {
		nft, err := knftables.New(knftables.InetFamily, DefaultTableName)
		if err != nil {
			return err
		}
		text, err = New(Options{Inner: newFakeInner(), NFT: nft, HostNetNS: viaNFT.Path()})
		return err
	}))

	nw := testNetwork()
	web := testPod("web", dual, tcp(30080, 8080), withProto(onIP(tcp(53, 5353), "192.168.1.11"), "udp"),
		withProto(tcp(9000, 9000), "sctp"), onIP(tcp(30443, 8443), "fd00:1::11"))
	api := testPod("api", dual4, onIP(tcp(30081, 80), "192.168.1.12"), withProto(tcp(30082, 82), "udp"))
	for _, step := range []struct {
		name string
		do   func(w *Wiring) error
	}{
		{"Ready", func(w *Wiring) error { return w.Ready(ctx, nw) }},
		{"a pod with every kind of hostPort", func(w *Wiring) error { _, err := w.Add(ctx, nw, web); return err }},
		{"a second pod", func(w *Wiring) error { _, err := w.Add(ctx, nw, api); return err }},
		{"a retried ADD with other hostPorts", func(w *Wiring) error {
			_, err := w.Add(ctx, nw, testPod("web", dual, tcp(30080, 9090), tcp(30084, 84)))
			return err
		}},
		{"Del", func(w *Wiring) error { return w.Del(ctx, nw, api) }},
		{"several pod CIDRs of a family", func(w *Wiring) error {
			return w.Ready(ctx, &cni.NodeNetwork{PodCIDRs: []netip.Prefix{netip.MustParsePrefix("10.244.9.0/24"),
				netip.MustParsePrefix("10.244.1.0/24"), netip.MustParsePrefix("fd00:10:244:1::/64"), netip.MustParsePrefix("fd00:10:244:9::/64")}})
		}},
		{"IPv4 pod CIDRs only", func(w *Wiring) error {
			return w.Ready(ctx, &cni.NodeNetwork{PodCIDRs: []netip.Prefix{netip.MustParsePrefix("10.244.1.0/24")}})
		}},
	} {
		must(t, step.do(nl))
		must(t, viaNFT.Do(func(ns.NetNS) error { return step.do(text) }))
		got, err := nftListIn(viaNetlink)
		must(t, err)
		want, err := nftListIn(viaNFT)
		must(t, err)
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("%s: the netlink table differs from nft's (-nft +netlink):\n%s", step.name, diff)
		}
		gotExprs, err := ruleExpressions(viaNetlink)
		must(t, err)
		wantExprs, err := ruleExpressions(viaNFT)
		must(t, err)
		if diff := cmp.Diff(wantExprs, gotExprs); diff != "" {
			t.Errorf("%s: the kernel holds other expressions for the netlink table's rules (-nft +netlink):\n%s", step.name, diff)
		}
		if n := strings.Count(gotExprs, "[ nat dnat "); n != 4 {
			t.Errorf("%s: %d DNAT expressions read back, want 4:\n%s", step.name, n, gotExprs)
		}
		if step.name == "a second pod" && !strings.Contains(got, `comment "c-api/eth0 default/api"`) {
			t.Errorf("%s: the listing lacks the element comments:\n%s", step.name, got)
		}
		if testing.Verbose() {
			t.Logf("after %s:\n%s", step.name, got)
		}
	}
}

func nft(n ns.NetNS, script string) (out string, err error) {
	err = n.Do(func(ns.NetNS) error {
		cmd := exec.Command("nft", "-f", "-")
		cmd.Stdin = strings.NewReader(script)
		b, err := cmd.CombinedOutput()
		out = string(b)
		return err
	})
	return out, err
}

func nftList(n ns.NetNS) (out string, err error) {
	err = n.Do(func(ns.NetNS) error {
		b, err := exec.Command("nft", "list", "table", "inet", DefaultTableName).CombinedOutput()
		out = string(b)
		return err
	})
	return out, err
}

// ruleExpressions returns the expressions the kernel holds for our
// table's rules in n, as `nft --debug=netlink` prints them.
func ruleExpressions(n ns.NetNS) (out string, err error) {
	err = n.Do(func(ns.NetNS) error {
		b, err := exec.Command("nft", "--debug=netlink", "list", "table", "inet", DefaultTableName).CombinedOutput()
		if err != nil {
			return fmt.Errorf("nft list: %w: %s", err, b)
		}
		out = nftnltest.RuleExpressions(string(b))
		return nil
	})
	return out, err
}

// nftListIn is nftList, failing with nft's output.
func nftListIn(n ns.NetNS) (string, error) {
	out, err := nftList(n)
	if err != nil {
		return "", fmt.Errorf("nft list: %w: %s", err, out)
	}
	return out, nil
}

// BenchmarkAddDelKernel is BenchmarkAddDelFake against the real kernel
// (over netlink, in a test netns): the cost a pod with one hostPort adds
// to an ADD and a DEL.
func BenchmarkAddDelKernel(b *testing.B) {
	n := newTestNet(b)
	ctx := context.Background()
	w := n.wiring(b)
	must(b, w.Ready(ctx, n.nw))
	p := testPod("web", []string{kernelPod4, kernelPod6}, tcp(30080, 8080))
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := w.Add(ctx, n.nw, p); err != nil {
			b.Fatal(err)
		}
		if err := w.Del(ctx, n.nw, p); err != nil {
			b.Fatal(err)
		}
	}
}
