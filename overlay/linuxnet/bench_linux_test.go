package linuxnet_test

// Address plan: one netnode node with a veth uplink "ul0" at 10.77.0.1/16
// (peer "ul0p", same namespace, for carrier) beside its eth0. Remote node i is the fake
// address 10.77.(i/250).(i%250+2) on that subnet with pod CIDR
// 10.(128+i/256).(i%256).0/24 and VTEP MAC 02:00:00:00:hi:lo; this node's
// pod CIDR is 10.64.0.0/24. Nothing answers on those addresses: the
// benchmark measures programming the kernel, not traffic.

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"testing"

	"github.com/vishvananda/netlink"

	"github.com/nodenet/nodenet/config"
	"github.com/nodenet/nodenet/internal/netaddr"
	"github.com/nodenet/nodenet/overlay"
	"github.com/nodenet/nodenet/overlay/linuxnet"
)

func fakeRemotes(n int) []overlay.RemoteNode {
	out := make([]overlay.RemoteNode, n)
	for i := range out {
		out[i] = overlay.RemoteNode{
			Name:     fmt.Sprintf("fake-%d", i),
			PodCIDRs: []netip.Prefix{netip.PrefixFrom(netip.AddrFrom4([4]byte{10, byte(128 + i/256), byte(i % 256), 0}), 24)},
			NodeIP:   netip.AddrFrom4([4]byte{10, 77, byte(i / 250), byte(i%250 + 2)}),
			VtepMAC:  net.HardwareAddr{2, 0, 0, 0, byte(i >> 8), byte(i)},
		}
	}
	return out
}

// benchNode is a node whose uplink ul0 holds the node IP: the mesh under
// test.
func benchNode(b *testing.B) (*node, overlay.LocalSpec) {
	n := newUnderlay(b).addNode(b, config.NetworkModeOverlay)
	if err := n.nl.LinkAdd(&netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: "ul0"}, PeerName: "ul0p"}); err != nil {
		b.Fatal(err)
	}
	for _, name := range []string{"ul0", "ul0p"} {
		if err := n.nl.LinkSetUp(n.link(b, name)); err != nil {
			b.Fatal(err)
		}
	}
	uplink := netip.MustParsePrefix("10.77.0.1/16")
	if err := n.nl.AddrAdd(n.link(b, "ul0"), &netlink.Addr{IPNet: netaddr.IPNet(uplink)}); err != nil {
		b.Fatal(err)
	}
	podCIDR := netip.MustParsePrefix("10.64.0.0/24")
	return n, overlay.LocalSpec{
		Mode: config.NetworkModeOverlay, Name: "nodenet", NodeIP: uplink.Addr(),
		PodCIDRs: []netip.Prefix{podCIDR}, Gateways: []netip.Addr{podCIDR.Addr().Next()},
		VNI: testVNI, Port: testPort,
	}
}

func benchNetwork(b *testing.B, n *node, spec overlay.LocalSpec) *linuxnet.Network {
	nw, err := linuxnet.New(linuxnet.Options{NetNS: n.Handle})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(nw.Close)
	if _, err := nw.EnsureLocal(context.Background(), spec); err != nil {
		b.Fatal(err)
	}
	return nw
}

func syncBench(b *testing.B, nw *linuxnet.Network, remotes []overlay.RemoteNode) overlay.SyncResult {
	res, err := nw.SyncRemotes(context.Background(), remotes)
	if err != nil {
		b.Fatal(err)
	}
	return res
}

func BenchmarkMesh(b *testing.B) {
	for _, size := range []int{1000, 5000} {
		all := fakeRemotes(size + 1)
		remotes, joiner := all[:size], all
		b.Run(fmt.Sprintf("nodes=%d/first build", size), func(b *testing.B) {
			in, spec := benchNode(b)
			writes := 0
			for b.Loop() {
				b.StopTimer()
				// Deleting the vxlan device drops its FDB, neighbours and routes.
				if l, err := in.nl.LinkByName(linuxnet.VXLANDeviceName(spec.Name, spec.VNI)); err == nil {
					if err := in.nl.LinkDel(l); err != nil {
						b.Fatal(err)
					}
				}
				nw := benchNetwork(b, in, spec)
				b.StartTimer()
				writes = syncBench(b, nw, remotes).Writes
			}
			b.ReportMetric(float64(writes), "writes/op")
		})
		b.Run(fmt.Sprintf("nodes=%d/one node joins", size), func(b *testing.B) {
			in, spec := benchNode(b)
			nw := benchNetwork(b, in, spec)
			syncBench(b, nw, remotes)
			writes := 0
			for b.Loop() {
				writes = syncBench(b, nw, joiner).Writes
				b.StopTimer()
				syncBench(b, nw, remotes)
				b.StartTimer()
			}
			b.ReportMetric(float64(writes), "writes/op")
		})
		b.Run(fmt.Sprintf("nodes=%d/one node leaves", size), func(b *testing.B) {
			in, spec := benchNode(b)
			nw := benchNetwork(b, in, spec)
			syncBench(b, nw, joiner)
			writes := 0
			for b.Loop() {
				writes = syncBench(b, nw, remotes).Writes
				b.StopTimer()
				syncBench(b, nw, joiner)
				b.StartTimer()
			}
			b.ReportMetric(float64(writes), "writes/op")
		})
		b.Run(fmt.Sprintf("nodes=%d/resync with no change", size), func(b *testing.B) {
			in, spec := benchNode(b)
			nw := benchNetwork(b, in, spec)
			syncBench(b, nw, remotes)
			writes := 0
			for b.Loop() {
				writes = syncBench(b, nw, remotes).Writes
			}
			b.ReportMetric(float64(writes), "writes/op")
		})
	}
}
