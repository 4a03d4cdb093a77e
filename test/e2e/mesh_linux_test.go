package e2e

// Address plan: see network_linux_test.go.

import (
	"fmt"
	"net/netip"
	"strings"
	"testing"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/nodenet/nodenet/test/netnode"
)

// mesh is what a node has programmed toward other nodes' pods, read
// straight from the kernel: the flannel vxlan shape (FDB, neighbour,
// route via the peer's VTEP address) or host-gw routes.
type mesh struct {
	// routes maps a pod CIDR of another node to "via <gw> dev <link>".
	routes map[netip.Prefix]string
	// fdb maps a VTEP MAC to the node IP it tunnels to (vxlan device).
	fdb map[string]netip.Addr
	// neigh maps a permanent neighbour on the vxlan device to its MAC.
	neigh map[netip.Addr]string
}

// readMesh reads n's routes into the cluster CIDR (except ownCIDR, its
// own bridge route) and, when vxlanDev exists, its FDB and neighbours.
func readMesh(t *testing.T, n *netnode.Node, ownCIDR netip.Prefix, vxlanDev string) mesh {
	t.Helper()
	h, err := netlink.NewHandleAt(n.Handle)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	m := mesh{routes: map[netip.Prefix]string{}, fdb: map[string]netip.Addr{}, neigh: map[netip.Addr]string{}}
	cluster := netip.MustParsePrefix(clusterCIDR)
	routes, err := h.RouteList(nil, netlink.FAMILY_V4)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range routes {
		if r.Dst == nil {
			continue
		}
		dst, _ := netip.AddrFromSlice(r.Dst.IP)
		ones, _ := r.Dst.Mask.Size()
		p := netip.PrefixFrom(dst.Unmap(), ones)
		if !cluster.Contains(p.Addr()) || p == ownCIDR || p.Bits() == 32 {
			continue
		}
		dev := ""
		if l, err := h.LinkByIndex(r.LinkIndex); err == nil {
			dev = l.Attrs().Name
		}
		m.routes[p] = fmt.Sprintf("via %v dev %s", r.Gw, dev)
	}
	vx, err := h.LinkByName(vxlanDev)
	if err != nil {
		return m
	}
	fdb, err := h.NeighList(vx.Attrs().Index, unix.AF_BRIDGE)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range fdb {
		ip, ok := netip.AddrFromSlice(e.IP)
		if ok && e.HardwareAddr.String() != "00:00:00:00:00:00" {
			m.fdb[e.HardwareAddr.String()] = ip.Unmap()
		}
	}
	neighs, err := h.NeighList(vx.Attrs().Index, netlink.FAMILY_V4)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range neighs {
		if e.State&netlink.NUD_PERMANENT != 0 {
			ip, _ := netip.AddrFromSlice(e.IP)
			m.neigh[ip.Unmap()] = e.HardwareAddr.String()
		}
	}
	return m
}

func (m mesh) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "routes %v; fdb %v; neigh %v", m.routes, m.fdb, m.neigh)
	return b.String()
}

// hasPeer reports whether m reaches a peer with pod CIDR cidr: a route,
// and in overlay mode (mac set) the FDB entry to nodeIP and the neighbour
// for the peer's VTEP address with that MAC.
func (m mesh) hasPeer(cidr netip.Prefix, nodeIP netip.Addr, mac string) error {
	if _, ok := m.routes[cidr]; !ok {
		return fmt.Errorf("no route to %s (%s)", cidr, m)
	}
	if mac == "" {
		return nil
	}
	if got, ok := m.fdb[mac]; !ok || got != nodeIP {
		return fmt.Errorf("no FDB entry %s -> %s (%s)", mac, nodeIP, m)
	}
	if got := m.neigh[cidr.Addr()]; got != mac {
		return fmt.Errorf("neighbour %s has MAC %q, want %s (%s)", cidr.Addr(), got, mac, m)
	}
	return nil
}

// lacksPeer reports whether nothing in m still points at the peer.
func (m mesh) lacksPeer(cidr netip.Prefix, nodeIP netip.Addr, mac string) error {
	if r, ok := m.routes[cidr]; ok {
		return fmt.Errorf("route to %s still there: %s", cidr, r)
	}
	if mac != "" {
		if _, ok := m.fdb[mac]; ok {
			return fmt.Errorf("FDB entry for %s still there (%s)", mac, m)
		}
		if _, ok := m.neigh[cidr.Addr()]; ok {
			return fmt.Errorf("neighbour %s still there (%s)", cidr.Addr(), m)
		}
	}
	for ip := range m.fdb {
		if m.fdb[ip] == nodeIP {
			return fmt.Errorf("an FDB entry still tunnels to %s (%s)", nodeIP, m)
		}
	}
	return nil
}
