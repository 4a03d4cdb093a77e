package linuxnet_test

// Address plan: see nodes_linux_test.go (node i at .(10+i) on the
// underlay with pod CIDR 10.244.i.0/24). The underlay's .99 is a node's
// new address after its IP change; the host's .1 is the gateway of a
// route someone else wrote; 192.0.2.7 is a node off the underlay subnet.

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/nodenet/nodenet/config"
	"github.com/nodenet/nodenet/internal/netaddr"
	"github.com/nodenet/nodenet/overlay"
	"github.com/nodenet/nodenet/overlay/linuxnet"
)

var addrCmp = cmp.Options{
	cmp.Comparer(func(a, b netip.Addr) bool { return a == b }),
	cmp.Comparer(func(a, b netip.Prefix) bool { return a == b }),
}

// device is what the tests compare about one link.
type device struct {
	Type     string
	MTU      int
	Up       bool
	Master   string
	MAC      string
	Addrs    []string // IPv4 only; IPv6 link-local addresses come and go
	VNI      int
	Port     int
	Local    string
	Uplink   string
	Learning bool
}

func readDevice(t *testing.T, in *node, name string) device {
	t.Helper()
	l := in.link(t, name)
	d := device{Type: l.Type(), MTU: l.Attrs().MTU, Up: l.Attrs().Flags&net.FlagUp != 0, MAC: l.Attrs().HardwareAddr.String()}
	if m := l.Attrs().MasterIndex; m != 0 {
		ml, _ := in.nl.LinkByIndex(m)
		d.Master = ml.Attrs().Name
	}
	addrs, err := in.nl.AddrList(l, netlink.FAMILY_V4)
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range addrs {
		d.Addrs = append(d.Addrs, a.IPNet.String())
	}
	if v, ok := l.(*netlink.Vxlan); ok {
		d.VNI, d.Port, d.Local, d.Learning = v.VxlanId, v.Port, v.SrcAddr.String(), v.Learning
		up, _ := in.nl.LinkByIndex(v.VtepDevIndex)
		d.Uplink = up.Attrs().Name
	}
	return d
}

// meshEntries renders node n's FDB, neighbour and route entries that the
// mesh owns, in `ip`-like lines, sorted.
func meshEntries(t *testing.T, in *node) []string {
	t.Helper()
	var out []string
	if vx, err := in.nl.LinkByName(vxlanName); err == nil {
		fdb, err := in.nl.NeighList(vx.Attrs().Index, unix.AF_BRIDGE)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range fdb {
			out = append(out, fmt.Sprintf("fdb %s dst %s self=%v permanent=%v", e.HardwareAddr, e.IP, e.Flags&netlink.NTF_SELF != 0, e.State == netlink.NUD_PERMANENT))
		}
		neighs, err := in.nl.NeighList(vx.Attrs().Index, netlink.FAMILY_V4)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range neighs {
			out = append(out, fmt.Sprintf("neigh %s lladdr %s permanent=%v", e.IP, e.HardwareAddr, e.State == netlink.NUD_PERMANENT))
		}
	}
	routes, err := in.nl.RouteList(nil, netlink.FAMILY_V4)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range routes {
		if r.Gw == nil {
			continue // connected routes
		}
		dev, _ := in.nl.LinkByIndex(r.LinkIndex)
		out = append(out, fmt.Sprintf("route %s via %s dev %s onlink=%v proto %d", r.Dst, r.Gw, dev.Attrs().Name, r.Flags&int(netlink.FLAG_ONLINK) != 0, r.Protocol))
	}
	slices.Sort(out)
	return out
}

func TestOverlayState(t *testing.T) {
	t.Parallel()
	u := newUnderlay(t)
	a, b, c := u.addNode(t, config.NetworkModeOverlay), u.addNode(t, config.NetworkModeOverlay), u.addNode(t, config.NetworkModeOverlay)
	local := a.ensure(t)
	b.ensure(t)
	c.ensure(t)
	meshOf(t, a, b, c)
	macA, macB, macC := linuxnet.VTEPMAC(a.IP, testVNI), linuxnet.VTEPMAC(b.IP, testVNI), linuxnet.VTEPMAC(c.IP, testVNI)

	t.Run("EnsureLocal reports the network it built", func(t *testing.T) {
		want := &overlay.LocalNetwork{
			Mode:        config.NetworkModeOverlay,
			Name:        bridgeName,
			PodCIDRs:    []netip.Prefix{netip.MustParsePrefix("10.244.1.0/24")},
			Gateways:    []netip.Addr{netip.MustParseAddr("10.244.1.1")},
			MTU:         1450,
			VtepMAC:     macA,
			NodeIP:      a.IP,
			Uplink:      "eth0",
			NodeSubnets: []netip.Prefix{u.Subnet},
			Writes:      local.Writes,
		}
		if diff := cmp.Diff(want, local, addrCmp); diff != "" {
			t.Errorf("LocalNetwork (-want +got):\n%s", diff)
		}
		if local.Writes == 0 {
			t.Error("building a network from nothing reported zero writes")
		}
	})
	t.Run("the vxlan device is flannel's shape and not a bridge port", func(t *testing.T) {
		want := device{Type: "vxlan", MTU: 1450, Up: true, MAC: macA.String(), Addrs: []string{"10.244.1.0/32"},
			VNI: testVNI, Port: testPort, Local: a.IP.String(), Uplink: "eth0", Learning: false}
		if diff := cmp.Diff(want, readDevice(t, a, vxlanName)); diff != "" {
			t.Errorf("vxlan device (-want +got):\n%s", diff)
		}
	})
	t.Run("the bridge holds the gateway with the pod MTU", func(t *testing.T) {
		got := readDevice(t, a, bridgeName)
		got.MAC = ""
		want := device{Type: "bridge", MTU: 1450, Up: true, Addrs: []string{"10.244.1.1/24"}}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("bridge (-want +got):\n%s", diff)
		}
	})
	t.Run("forwarding is on in the node namespace", func(t *testing.T) {
		out, err := a.Run(t.Context(), "cat", "/proc/sys/net/ipv4/ip_forward")
		if err != nil || strings.TrimSpace(out) != "1" {
			t.Errorf("ip_forward = %q, %v; want 1", out, err)
		}
	})
	t.Run("the bridge MAC does not change when a pod joins", func(t *testing.T) {
		before := readDevice(t, a, bridgeName).MAC
		a.addPod(t)
		if after := readDevice(t, a, bridgeName).MAC; after != before {
			t.Errorf("bridge MAC changed from %s to %s when a port joined", before, after)
		}
	})
	t.Run("each remote node has an FDB entry, a neighbour and an onlink route", func(t *testing.T) {
		want := []string{
			fmt.Sprintf("fdb %s dst %s self=true permanent=true", macB, b.IP),
			fmt.Sprintf("fdb %s dst %s self=true permanent=true", macC, c.IP),
			fmt.Sprintf("neigh 10.244.2.0 lladdr %s permanent=true", macB),
			fmt.Sprintf("neigh 10.244.3.0 lladdr %s permanent=true", macC),
			"route 10.244.2.0/24 via 10.244.2.0 dev nodenet.4096 onlink=true proto 78",
			"route 10.244.3.0/24 via 10.244.3.0 dev nodenet.4096 onlink=true proto 78",
		}
		if diff := cmp.Diff(sorted(want), meshEntries(t, a)); diff != "" {
			t.Errorf("mesh entries (-want +got):\n%s", diff)
		}
	})
	t.Run("a node whose IP changed has its FDB entry moved", func(t *testing.T) {
		moved := c.remote()
		moved.NodeIP = u.Addr(99)
		res, err := a.nw.SyncRemotes(context.Background(), []overlay.RemoteNode{b.remote(), moved})
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(overlay.SyncResult{Updated: 1, Writes: 2}, res); diff != "" {
			t.Errorf("SyncResult (-want +got):\n%s", diff)
		}
		want := []string{
			fmt.Sprintf("fdb %s dst %s self=true permanent=true", macB, b.IP),
			fmt.Sprintf("fdb %s dst %s self=true permanent=true", macC, moved.NodeIP),
			fmt.Sprintf("neigh 10.244.2.0 lladdr %s permanent=true", macB),
			fmt.Sprintf("neigh 10.244.3.0 lladdr %s permanent=true", macC),
			"route 10.244.2.0/24 via 10.244.2.0 dev nodenet.4096 onlink=true proto 78",
			"route 10.244.3.0/24 via 10.244.3.0 dev nodenet.4096 onlink=true proto 78",
		}
		if diff := cmp.Diff(sorted(want), meshEntries(t, a)); diff != "" {
			t.Errorf("mesh entries (-want +got):\n%s", diff)
		}
	})
	t.Run("a node that left loses its route, neighbour and FDB entry in three writes", func(t *testing.T) {
		res, err := a.nw.SyncRemotes(context.Background(), []overlay.RemoteNode{b.remote()})
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(overlay.SyncResult{Removed: 1, Writes: 3}, res); diff != "" {
			t.Errorf("SyncResult (-want +got):\n%s", diff)
		}
		want := []string{
			fmt.Sprintf("fdb %s dst %s self=true permanent=true", macB, b.IP),
			fmt.Sprintf("neigh 10.244.2.0 lladdr %s permanent=true", macB),
			"route 10.244.2.0/24 via 10.244.2.0 dev nodenet.4096 onlink=true proto 78",
		}
		if diff := cmp.Diff(sorted(want), meshEntries(t, a)); diff != "" {
			t.Errorf("mesh entries (-want +got):\n%s", diff)
		}
	})
	t.Run("a node joining costs three writes", func(t *testing.T) {
		res, err := a.nw.SyncRemotes(context.Background(), []overlay.RemoteNode{b.remote(), c.remote()})
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(overlay.SyncResult{Added: 1, Writes: 3}, res); diff != "" {
			t.Errorf("SyncResult (-want +got):\n%s", diff)
		}
	})
	t.Run("someone else's route survives a sync", func(t *testing.T) {
		foreign := &netlink.Route{Dst: netaddr.IPNet(netip.MustParsePrefix("10.250.0.0/16")), Gw: u.HostIP.AsSlice(), LinkIndex: a.link(t, "eth0").Attrs().Index}
		if err := a.nl.RouteAdd(foreign); err != nil {
			t.Fatal(err)
		}
		res, err := a.nw.SyncRemotes(context.Background(), nil)
		if err != nil {
			t.Fatal(err)
		}
		if res.Removed != 2 {
			t.Errorf("removed %d nodes, want 2", res.Removed)
		}
		want := []string{fmt.Sprintf("route 10.250.0.0/16 via %s dev eth0 onlink=false proto 3", u.HostIP)}
		if diff := cmp.Diff(sorted(want), meshEntries(t, a)); diff != "" {
			t.Errorf("mesh entries after removing every node (-want +got):\n%s", diff)
		}
	})
	t.Run("Check passes, fails on a lost gateway, and EnsureLocal repairs it with one write", func(t *testing.T) {
		if err := a.nw.Check(context.Background()); err != nil {
			t.Fatalf("Check on a correct node: %v", err)
		}
		br := a.link(t, bridgeName)
		if err := a.nl.AddrDel(br, &netlink.Addr{IPNet: netaddr.IPNet(netip.MustParsePrefix("10.244.1.1/24"))}); err != nil {
			t.Fatal(err)
		}
		if err := a.nw.Check(context.Background()); err == nil {
			t.Fatal("Check passed on a bridge without its gateway")
		}
		l, err := a.nw.EnsureLocal(context.Background(), a.spec)
		if err != nil {
			t.Fatal(err)
		}
		if l.Writes != 1 {
			t.Errorf("repair took %d writes, want 1", l.Writes)
		}
		if err := a.nw.Check(context.Background()); err != nil {
			t.Errorf("Check after repair: %v", err)
		}
	})
}

func TestL2BridgeState(t *testing.T) {
	t.Parallel()
	u := newUnderlay(t)
	a, b := u.addNode(t, config.NetworkModeL2Bridge), u.addNode(t, config.NetworkModeL2Bridge)
	local := a.ensure(t)
	b.ensure(t)
	far := overlay.RemoteNode{Name: "far", PodCIDRs: []netip.Prefix{netip.MustParsePrefix("10.244.9.0/24")}, NodeIP: netip.MustParseAddr("192.0.2.7")}
	res, err := a.nw.SyncRemotes(context.Background(), []overlay.RemoteNode{b.remote(), far})
	if err != nil {
		t.Fatal(err)
	}

	t.Run("there is no vxlan device and the MTU is the uplink's", func(t *testing.T) {
		if _, err := a.nl.LinkByName(vxlanName); err == nil {
			t.Error("l2bridge mode created a vxlan device")
		}
		if local.MTU != 1500 || local.VtepMAC != nil {
			t.Errorf("MTU %d, VTEP MAC %v; want 1500 and none", local.MTU, local.VtepMAC)
		}
	})
	t.Run("a remote node on the uplink subnet is a route via its IP; one off it is skipped", func(t *testing.T) {
		if diff := cmp.Diff(overlay.SyncResult{Added: 1, Writes: 1}, res); diff != "" {
			t.Errorf("SyncResult (-want +got):\n%s", diff)
		}
		want := []string{fmt.Sprintf("route 10.244.2.0/24 via %s dev eth0 onlink=false proto 78", b.IP)}
		if diff := cmp.Diff(sorted(want), meshEntries(t, a)); diff != "" {
			t.Errorf("mesh entries (-want +got):\n%s", diff)
		}
	})
	t.Run("a node whose IP changed has its route replaced in one write", func(t *testing.T) {
		moved := b.remote()
		moved.NodeIP = u.Addr(99)
		res, err := a.nw.SyncRemotes(context.Background(), []overlay.RemoteNode{moved})
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(overlay.SyncResult{Updated: 1, Writes: 1}, res); diff != "" {
			t.Errorf("SyncResult (-want +got):\n%s", diff)
		}
		want := []string{fmt.Sprintf("route 10.244.2.0/24 via %s dev eth0 onlink=false proto 78", moved.NodeIP)}
		if diff := cmp.Diff(sorted(want), meshEntries(t, a)); diff != "" {
			t.Errorf("mesh entries (-want +got):\n%s", diff)
		}
	})
}

func sorted(s []string) []string {
	slices.Sort(s)
	return s
}
