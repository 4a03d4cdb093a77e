package egress

// Address plan (real kernel; the three namespaces are made by the test and
// freed after it):
//   pod netns      eth0: 10.244.1.10/24, fd00:10:244:1::10/64; default
//                  routes via the node's bridge-side addresses
//   node netns     veth "pods" (the pod's peer): 10.244.1.1/24,
//                  fd00:10:244:1::1/64; uplink eth0: 192.168.50.1/24,
//                  fd00:50::1/64; routes to the other node's pod CIDRs
//                  10.244.2.0/24 and fd00:10:244:2::/64 via the outside
//                  netns; forwarding on; the egress table
//   outside netns  eth0 (the uplink's peer): 192.168.50.2/24, fd00:50::2/64,
//                  plus 10.244.2.10 and fd00:10:244:2::10 on lo (a pod on
//                  another node); routes back to this node's pod CIDRs via
//                  the node, so unmasqueraded traffic is answered too. A TCP
//                  server on :8080 answers each connection with the address
//                  it came from.
// Cluster CIDRs 10.244.0.0/16, fd00:10:244::/56.

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
	"k8s.io/klog/v2/ktesting"
	"sigs.k8s.io/knftables"

	"github.com/nodenet/nodenet/internal/nftnl/nftnltest"
	"github.com/nodenet/nodenet/internal/nsexec"
	"github.com/nodenet/nodenet/internal/testroot"
)

var (
	podIP4, podIP6         = netip.MustParseAddr("10.244.1.10"), netip.MustParseAddr("fd00:10:244:1::10")
	nodeIP4, nodeIP6       = netip.MustParseAddr("192.168.50.1"), netip.MustParseAddr("fd00:50::1")
	outsideIP4, outsideIP6 = netip.MustParseAddr("192.168.50.2"), netip.MustParseAddr("fd00:50::2")
	remotePod4, remotePod6 = netip.MustParseAddr("10.244.2.10"), netip.MustParseAddr("fd00:10:244:2::10")
)

// kernelNet is the three namespaces.
type kernelNet struct {
	pod, node, outside netns.NsHandle
}

func newKernelNet(t *testing.T) *kernelNet {
	t.Helper()
	testroot.Require(t, "network namespaces, veths, nftables NAT")
	var n kernelNet
	for _, h := range []*netns.NsHandle{&n.pod, &n.node, &n.outside} {
		ns, err := nsexec.New()
		must(t, err)
		t.Cleanup(func() { ns.Close() })
		*h = ns
		// No duplicate address detection, set before the links exist: a
		// tentative address stalls the first IPv6 connections.
		must(t, sysctls(ns, "ipv6/conf/all/accept_dad", "0", "ipv6/conf/default/accept_dad", "0"))
	}
	pod, node, outside := handleAt(t, n.pod), handleAt(t, n.node), handleAt(t, n.outside)

	must(t, node.LinkAdd(&netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: "pods"}, PeerName: "eth0", PeerNamespace: netlink.NsFd(int(n.pod))}))
	must(t, node.LinkAdd(&netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: "eth0"}, PeerName: "eth0", PeerNamespace: netlink.NsFd(int(n.outside))}))
	must(t, sysctls(n.node, "ipv4/ip_forward", "1", "ipv6/conf/all/forwarding", "1"))

	addrs(t, pod, "eth0", "10.244.1.10/24", "fd00:10:244:1::10/64")
	addrs(t, node, "pods", "10.244.1.1/24", "fd00:10:244:1::1/64")
	addrs(t, node, "eth0", "192.168.50.1/24", "fd00:50::1/64")
	addrs(t, outside, "eth0", "192.168.50.2/24", "fd00:50::2/64")
	addrs(t, outside, "lo", "10.244.2.10/32", "fd00:10:244:2::10/128")
	for _, l := range []struct {
		h    *netlink.Handle
		name string
	}{{pod, "eth0"}, {pod, "lo"}, {node, "pods"}, {node, "eth0"}, {node, "lo"}, {outside, "eth0"}, {outside, "lo"}} {
		link, err := l.h.LinkByName(l.name)
		must(t, err)
		must(t, l.h.LinkSetUp(link))
	}
	for _, l := range []struct {
		h    *netlink.Handle
		name string
	}{{pod, "eth0"}, {node, "pods"}, {node, "eth0"}, {outside, "eth0"}} {
		waitIPv6Ready(t, l.h, l.name)
	}
	route(t, pod, "eth0", "0.0.0.0/0", "10.244.1.1")
	route(t, pod, "eth0", "::/0", "fd00:10:244:1::1")
	route(t, node, "eth0", "10.244.2.0/24", "192.168.50.2")
	route(t, node, "eth0", "fd00:10:244:2::/64", "fd00:50::2")
	route(t, outside, "eth0", "10.244.1.0/24", "192.168.50.1")
	route(t, outside, "eth0", "fd00:10:244:1::/64", "fd00:50::1")
	n.serve(t)
	return &n
}

// serve starts the outside server: each connection gets back the address
// it came from, then is closed.
func (n *kernelNet) serve(t *testing.T) {
	t.Helper()
	var l net.Listener
	must(t, nsexec.Do(n.outside, func() (err error) {
		l, err = net.Listen("tcp", ":8080")
		return err
	}))
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			from := netip.MustParseAddrPort(c.RemoteAddr().String()).Addr().Unmap()
			fmt.Fprintln(c, from)
			c.Close()
		}
	}()
}

// sourceSeen connects from the pod to dst:8080 and returns the source
// address the outside server saw.
func (n *kernelNet) sourceSeen(t *testing.T, dst netip.Addr) netip.Addr {
	t.Helper()
	var answer []byte
	err := nsexec.Do(n.pod, func() error {
		// The timeout only keeps a broken network from hanging the test.
		c, err := net.DialTimeout("tcp", netip.AddrPortFrom(dst, 8080).String(), 10*time.Second)
		if err != nil {
			return err
		}
		defer c.Close()
		answer, err = io.ReadAll(c)
		return err
	})
	if err != nil {
		t.Fatalf("connect from the pod to %s: %v", dst, err)
	}
	from, err := netip.ParseAddr(strings.TrimSpace(string(answer)))
	if err != nil {
		t.Fatalf("server answered %q: %v", answer, err)
	}
	return from
}

// inNode runs fn in the node namespace, where the egress table is.
func (n *kernelNet) inNode(t *testing.T, fn func() error) {
	t.Helper()
	if err := nsexec.Do(n.node, fn); err != nil {
		t.Fatal(err)
	}
}

func TestInTheKernelPodsLeaveTheClusterWithTheNodesAddressAndReachPodsWithTheirOwn(t *testing.T) {
	n := newKernelNet(t)
	ctx := context.Background()
	spec := Spec{
		PodCIDRs:     prefixes("10.244.1.0/24", "fd00:10:244:1::/64"),
		ClusterCIDRs: prefixes("10.244.0.0/16", "fd00:10:244::/56"),
	}
	type flow struct {
		name      string
		dst, want netip.Addr
	}
	check := func(t *testing.T, flows []flow) {
		t.Helper()
		for _, f := range flows {
			if got := n.sourceSeen(t, f.dst); got != f.want {
				t.Errorf("%s: the server saw %s, want %s", f.name, got, f.want)
			}
		}
	}
	unmasqueraded := []flow{
		{"pod to outside (IPv4)", outsideIP4, podIP4},
		{"pod to outside (IPv6)", outsideIP6, podIP6},
		{"pod to a pod on another node (IPv4)", remotePod4, podIP4},
		{"pod to a pod on another node (IPv6)", remotePod6, podIP6},
	}
	masqueraded := []flow{
		{"pod to outside (IPv4)", outsideIP4, nodeIP4},
		{"pod to outside (IPv6)", outsideIP6, nodeIP6},
		{"pod to a pod on another node (IPv4)", remotePod4, podIP4},
		{"pod to a pod on another node (IPv6)", remotePod6, podIP6},
	}

	t.Run("without the table every pod source reaches the server as it is", func(t *testing.T) {
		check(t, unmasqueraded)
	})

	var e *Egress
	n.inNode(t, func() (err error) {
		e, err = New(Options{Logger: ktesting.NewLogger(t, ktesting.NewConfig())})
		return err
	})
	t.Run("with the table only traffic to outside the cluster CIDRs takes the node's address", func(t *testing.T) {
		var changed bool
		n.inNode(t, func() (err error) { changed, err = e.Ensure(ctx, spec); return err })
		if !changed {
			t.Error("the first Ensure reported no change")
		}
		check(t, masqueraded)
	})

	t.Run("a restarted agent finds the kernel's rules equal and writes nothing", func(t *testing.T) {
		// A rewrite would give the rules new handles.
		var before, after []uint64
		n.inNode(t, func() error {
			restarted, err := New(Options{})
			if err != nil {
				return err
			}
			if before, err = handles(ctx, restarted); err != nil {
				return err
			}
			changed, err := restarted.Ensure(ctx, spec)
			if err != nil {
				return err
			}
			if changed {
				return fmt.Errorf("Ensure with the same spec reported a change")
			}
			after, err = handles(ctx, restarted)
			return err
		})
		if len(before) != 2 || !slices.Equal(before, after) {
			t.Errorf("rule handles %v before, %v after; want the same 2", before, after)
		}
		check(t, masqueraded)
	})

	t.Run("a spec that counts the uplink subnet as cluster leaves that traffic alone", func(t *testing.T) {
		wider := Spec{PodCIDRs: spec.PodCIDRs, ClusterCIDRs: append(prefixes("192.168.50.0/24", "fd00:50::/64"), spec.ClusterCIDRs...)}
		var changed bool
		n.inNode(t, func() (err error) { changed, err = e.Ensure(ctx, wider); return err })
		if !changed {
			t.Error("Ensure with a new spec reported no change")
		}
		check(t, unmasqueraded)
		n.inNode(t, func() (err error) { changed, err = e.Ensure(ctx, spec); return err })
		check(t, masqueraded)
	})

	t.Run("after Remove pod sources reach the server as they are again", func(t *testing.T) {
		var changed bool
		n.inNode(t, func() (err error) { changed, err = e.Remove(ctx); return err })
		if !changed {
			t.Error("Remove reported no change")
		}
		check(t, unmasqueraded)
		n.inNode(t, func() (err error) { changed, err = e.Remove(ctx); return err })
		if changed {
			t.Error("a second Remove reported a change")
		}
	})
}

// TestTheNetlinkTableIsTheOneNFTWrites ensures the same specs through
// netlink (as the agent does) and through nft (knftables.New, run inside
// the other namespace) in two namespaces and compares what nft lists and
// the expressions the kernel holds for each rule: the netlink encoding of
// the rules means what their nft text means.
func TestTheNetlinkTableIsTheOneNFTWrites(t *testing.T) {
	testroot.Require(t, "network namespaces, nftables")
	ctx := context.Background()
	var viaNetlink, viaNFT netns.NsHandle
	for _, h := range []*netns.NsHandle{&viaNetlink, &viaNFT} {
		ns, err := nsexec.New()
		must(t, err)
		t.Cleanup(func() { ns.Close() })
		*h = ns
	}
	var nl, text *Egress
	must(t, nsexec.Do(viaNetlink, func() (err error) {
		nl, err = New(Options{Logger: ktesting.NewLogger(t, ktesting.NewConfig())})
		return err
	}))
	must(t, nsexec.Do(viaNFT, func() error {
		nft, err := knftables.New(knftables.InetFamily, TableName)
		if err != nil {
			return err
		}
		text, err = New(Options{NFT: nft, Logger: ktesting.NewLogger(t, ktesting.NewConfig())})
		return err
	}))
	for _, tc := range []struct {
		name string
		spec Spec
	}{
		{"dual stack", Spec{PodCIDRs: prefixes("10.244.1.0/24", "fd00:10:244:1::/64"), ClusterCIDRs: prefixes("10.244.0.0/16", "fd00:10:244::/56")}},
		{"several pod and cluster CIDRs", Spec{PodCIDRs: prefixes("10.244.9.0/24", "10.244.1.0/24", "fd00:10:244:1::/64", "fd00:10:244:9::/64"),
			ClusterCIDRs: prefixes("10.245.0.0/16", "10.244.0.0/16", "fd00:10:244::/56", "fd00:10:245::/56")}},
		{"a pod CIDR outside the cluster CIDRs, IPv4 only", Spec{PodCIDRs: prefixes("10.99.1.0/24"), ClusterCIDRs: prefixes("10.244.0.0/15")}},
		{"no pod CIDR", Spec{ClusterCIDRs: prefixes("10.244.0.0/16")}},
	} {
		// Ensure writes nothing when the rules are already those of the
		// spec: start each case from another table.
		for _, x := range []struct {
			ns netns.NsHandle
			e  *Egress
		}{{viaNetlink, nl}, {viaNFT, text}} {
			must(t, nsexec.Do(x.ns, func() error {
				if _, err := x.e.Remove(ctx); err != nil {
					return err
				}
				changed, err := x.e.Ensure(ctx, tc.spec)
				if err == nil && !changed {
					err = fmt.Errorf("Ensure reported no change")
				}
				return err
			}))
		}
		got, gotExprs := nftListing(t, viaNetlink)
		want, wantExprs := nftListing(t, viaNFT)
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("%s: the netlink table differs from nft's (-nft +netlink):\n%s", tc.name, diff)
		}
		if diff := cmp.Diff(wantExprs, gotExprs); diff != "" {
			t.Errorf("%s: the kernel holds other expressions for the netlink table's rules (-nft +netlink):\n%s", tc.name, diff)
		}
		if len(tc.spec.PodCIDRs) > 0 && !strings.Contains(gotExprs, "[ masq flags 0x10 ]") {
			t.Errorf("%s: no masquerade read back:\n%s", tc.name, gotExprs)
		}
	}
}

// nftListing returns `nft list table inet nodenet-egress` in ns and the
// expressions of its rules (nft --debug=netlink).
func nftListing(t *testing.T, ns netns.NsHandle) (listing, exprs string) {
	t.Helper()
	must(t, nsexec.Do(ns, func() error {
		out, err := exec.Command("nft", "list", "table", "inet", TableName).CombinedOutput()
		if err != nil {
			return fmt.Errorf("nft list: %w: %s", err, out)
		}
		listing = string(out)
		out, err = exec.Command("nft", "--debug=netlink", "list", "table", "inet", TableName).CombinedOutput()
		if err != nil {
			return fmt.Errorf("nft list: %w: %s", err, out)
		}
		exprs = nftnltest.RuleExpressions(string(out))
		return nil
	}))
	return listing, exprs
}

// handles are the handles of the chain's rules in the kernel.
func handles(ctx context.Context, e *Egress) ([]uint64, error) {
	rules, err := e.nft.ListRules(ctx, chainName)
	var out []uint64
	for _, r := range rules {
		out = append(out, r.Handle)
	}
	return out, err
}

// sysctls writes name, value, ... (paths under /proc/sys/net) in ns.
func sysctls(ns netns.NsHandle, kv ...string) error {
	return nsexec.Do(ns, func() error {
		for i := 0; i+1 < len(kv); i += 2 {
			if err := os.WriteFile("/proc/sys/net/"+kv[i], []byte(kv[i+1]), 0o644); err != nil {
				return err
			}
		}
		return nil
	})
}

func handleAt(t *testing.T, ns netns.NsHandle) *netlink.Handle {
	t.Helper()
	h, err := netlink.NewHandleAt(ns)
	must(t, err)
	t.Cleanup(h.Close)
	return h
}

// addrs adds addresses without duplicate address detection.
func addrs(t *testing.T, h *netlink.Handle, link string, cidrs ...string) {
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

// waitIPv6Ready waits until IPv6 runs on link, which it shows by adding
// the link-local address: the kernel starts IPv6 on a veth only once it
// has seen the carrier come up, and drops neighbour discovery until then,
// which would stall the first IPv6 connection for a second.
func waitIPv6Ready(t *testing.T, h *netlink.Handle, link string) {
	t.Helper()
	l, err := h.LinkByName(link)
	must(t, err)
	for deadline := time.Now().Add(10 * time.Second); ; {
		as, err := h.AddrList(l, netlink.FAMILY_V6)
		must(t, err)
		for _, a := range as {
			if a.IP.IsLinkLocalUnicast() {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("IPv6 did not start on %s", link)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func route(t *testing.T, h *netlink.Handle, link, dst, gw string) {
	t.Helper()
	l, err := h.LinkByName(link)
	must(t, err)
	_, d, err := net.ParseCIDR(dst)
	must(t, err)
	must(t, h.RouteAdd(&netlink.Route{LinkIndex: l.Attrs().Index, Dst: d, Gw: net.ParseIP(gw)}))
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
