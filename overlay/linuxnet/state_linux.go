package linuxnet

import (
	"errors"
	"fmt"
	"net/netip"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/nodenet/nodenet/internal/netaddr"
)

// RouteProtocol is the rtm_protocol of every route linuxnet adds (0x4e,
// 'N' for nodenet; `ip route show proto 78`). It marks ownership: a sync
// deletes stale routes with this protocol, including an earlier run's,
// and never touches routes of any other protocol. 78 is unassigned in
// iproute2's rt_protos and above the kernel's reserved 0-4.
const RouteProtocol netlink.RouteProtocol = 0x4e

// dumpRetries bounds retries of a dump the kernel interrupted because the
// table changed under it.
const dumpRetries = 5

// fdbKey is one remote of one MAC in the vxlan FDB.
type fdbKey struct {
	mac string
	ip  netip.Addr
}

// meshState is what the kernel has, read in bulk once per sync: the cost
// of a sync must not grow with a per-node read.
type meshState struct {
	routes map[netip.Prefix]netlink.Route // ours only (RouteProtocol, main table)
	neighs map[netip.Addr]netlink.Neigh   // on the vxlan device
	fdb    map[fdbKey]netlink.Neigh       // on the vxlan device
}

func (n *Network) readMesh(vxIndex int) (*meshState, error) {
	st := &meshState{routes: map[netip.Prefix]netlink.Route{}, neighs: map[netip.Addr]netlink.Neigh{}, fdb: map[fdbKey]netlink.Neigh{}}
	routes, err := dump(func() ([]netlink.Route, error) {
		return n.nl.RouteListFiltered(netlink.FAMILY_ALL,
			&netlink.Route{Protocol: RouteProtocol, Table: unix.RT_TABLE_MAIN},
			netlink.RT_FILTER_PROTOCOL|netlink.RT_FILTER_TABLE)
	})
	if err != nil {
		return nil, fmt.Errorf("list routes: %w", err)
	}
	for _, r := range routes {
		if p, ok := netaddr.FromIPNet(r.Dst); ok {
			st.routes[p] = r
		}
	}
	if vxIndex == 0 {
		return st, nil
	}
	neighs, err := dump(func() ([]netlink.Neigh, error) { return n.nl.NeighList(vxIndex, netlink.FAMILY_V4) })
	if err != nil {
		return nil, fmt.Errorf("list neighbours: %w", err)
	}
	for _, e := range neighs {
		st.neighs[addrOf(e.IP)] = e
	}
	fdb, err := dump(func() ([]netlink.Neigh, error) { return n.nl.NeighList(vxIndex, unix.AF_BRIDGE) })
	if err != nil {
		return nil, fmt.Errorf("list the vxlan FDB: %w", err)
	}
	for _, e := range fdb {
		st.fdb[fdbKey{mac: e.HardwareAddr.String(), ip: addrOf(e.IP)}] = e
	}
	return st, nil
}

// dump retries f while the kernel reports the dump as interrupted.
func dump[T any](f func() ([]T, error)) ([]T, error) {
	var err error
	for range dumpRetries {
		var out []T
		if out, err = f(); !errors.Is(err, netlink.ErrDumpInterrupted) {
			return out, err
		}
	}
	return nil, err
}
