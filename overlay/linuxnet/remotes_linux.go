package linuxnet

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strings"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/nodenet/nodenet/internal/netaddr"
	"github.com/nodenet/nodenet/overlay"
)

// SyncRemotes implements overlay.Interface: one bulk read of routes,
// neighbours and FDB, then only the writes that differ. Stale entries go
// first, so a node whose IP or MAC changed is moved, not duplicated.
func (n *Network) SyncRemotes(ctx context.Context, remotes []overlay.RemoteNode) (overlay.SyncResult, error) {
	n.writing.take()
	if n.local == nil {
		return overlay.SyncResult{}, errors.New("sync remotes: EnsureLocal has not succeeded yet")
	}
	if err := ctx.Err(); err != nil {
		return overlay.SyncResult{}, err
	}
	st := n.local
	vxIndex := 0
	if isOverlay(st.spec.Mode) {
		l, err := n.nl.LinkByName(st.vxlan)
		if err != nil {
			return overlay.SyncResult{}, fmt.Errorf("read vxlan device %s (EnsureLocal again): %w", st.vxlan, err)
		}
		vxIndex = l.Attrs().Index
	}
	peers := planPeers(n.log, st, remotes)
	have, err := n.readMesh(vxIndex)
	if err != nil {
		return overlay.SyncResult{}, err
	}
	want := make([]wantedPeer, len(peers))
	for i, p := range peers {
		want[i] = n.wanted(p, vxIndex)
	}

	var res overlay.SyncResult
	err = n.removeStale(ctx, want, have, &res)
	if err == nil {
		err = n.addMissing(ctx, want, have, &res)
	}
	res.Writes = n.writing.take()
	if err != nil {
		return res, err
	}
	if res.Writes > 0 {
		n.log.V(2).Info("Synced remote nodes", "peers", len(peers), "added", res.Added, "updated", res.Updated, "removed", res.Removed, "writes", res.Writes)
	}
	return res, nil
}

// wantedPeer is one peer's entries: the route always, the neighbour and
// FDB entry in overlay mode only.
type wantedPeer struct {
	peer
	route netlink.Route
	neigh *netlink.Neigh
	fdb   *netlink.Neigh
	key   fdbKey
}

func (n *Network) wanted(p peer, vxIndex int) wantedPeer {
	w := wantedPeer{peer: p, route: netlink.Route{
		Dst:      netaddr.IPNet(p.cidr),
		Protocol: RouteProtocol,
		Table:    unix.RT_TABLE_MAIN,
		Scope:    netlink.SCOPE_UNIVERSE,
	}}
	if vxIndex == 0 { // host-gw: straight to the node over the uplink
		w.route.LinkIndex = n.local.upIndex
		w.route.Gw = ipOf(p.nodeIP)
		return w
	}
	w.route.LinkIndex = vxIndex
	w.route.Gw = ipOf(p.gateway())
	w.route.Flags = int(netlink.FLAG_ONLINK) // the gateway is on no subnet of ours
	w.neigh = &netlink.Neigh{
		LinkIndex: vxIndex, Family: netlink.FAMILY_V4, State: netlink.NUD_PERMANENT, Type: unix.RTN_UNICAST,
		IP: ipOf(p.gateway()), HardwareAddr: p.mac,
	}
	w.fdb = &netlink.Neigh{
		LinkIndex: vxIndex, Family: unix.AF_BRIDGE, State: netlink.NUD_PERMANENT, Flags: netlink.NTF_SELF,
		IP: ipOf(p.nodeIP), HardwareAddr: p.mac,
	}
	w.key = fdbKey{mac: p.mac.String(), ip: p.nodeIP}
	return w
}

// removeStale deletes our routes, permanent neighbours and FDB entries no
// peer asks for (route first, so no packet is sent to a half-removed peer).
func (n *Network) removeStale(ctx context.Context, want []wantedPeer, have *meshState, res *overlay.SyncResult) error {
	routes := make(map[netip.Prefix]bool, len(want))
	neighs := make(map[netip.Addr]bool, len(want))
	fdb := make(map[fdbKey]bool, len(want))
	for _, w := range want {
		routes[w.cidr] = true
		if w.neigh != nil {
			neighs[w.gateway()] = true
			fdb[w.key] = true
		}
	}
	for _, p := range slices.SortedFunc(maps.Keys(have.routes), netip.Prefix.Compare) {
		if routes[p] {
			continue
		}
		r := have.routes[p]
		if err := n.writing.routeDel(&r); err != nil && !errors.Is(err, unix.ESRCH) {
			return fmt.Errorf("delete stale route to %v: %w", p, err)
		}
		res.Removed++
		n.log.Info("Removed the route to a node that left", "podCIDR", p)
		if err := tick(ctx, n.writing.writes); err != nil {
			return err
		}
	}
	for _, a := range slices.SortedFunc(maps.Keys(have.neighs), netip.Addr.Compare) {
		e := have.neighs[a]
		if neighs[a] || e.State&(netlink.NUD_PERMANENT|netlink.NUD_NOARP) == 0 {
			continue // wanted, or the kernel's own transient entry
		}
		if err := n.writing.neighDel(&e); err != nil && !errors.Is(err, unix.ENOENT) {
			return fmt.Errorf("delete stale neighbour %v: %w", a, err)
		}
	}
	for _, k := range slices.SortedFunc(maps.Keys(have.fdb), compareFDB) {
		if fdb[k] {
			continue
		}
		e := have.fdb[k]
		if err := n.writing.neighDel(&e); err != nil && !errors.Is(err, unix.ENOENT) {
			return fmt.Errorf("delete stale FDB entry %s → %v: %w", k.mac, k.ip, err)
		}
		if err := tick(ctx, n.writing.writes); err != nil {
			return err
		}
	}
	return nil
}

// addMissing writes each peer's entries that are missing or differ, in
// flannel's order: neighbour, FDB, then the route that uses them.
func (n *Network) addMissing(ctx context.Context, want []wantedPeer, have *meshState, res *overlay.SyncResult) error {
	for _, w := range want {
		before := n.writing.writes
		if w.neigh != nil {
			if e, ok := have.neighs[w.gateway()]; !ok || e.State != netlink.NUD_PERMANENT || e.HardwareAddr.String() != w.key.mac {
				if err := n.writing.neighSet(w.neigh); err != nil {
					return fmt.Errorf("set neighbour %v → %v for node %s: %w", w.gateway(), w.mac, w.node, err)
				}
			}
			if _, ok := have.fdb[w.key]; !ok {
				if err := n.writing.neighSet(w.fdb); err != nil {
					return fmt.Errorf("set FDB entry %v → %v for node %s: %w", w.mac, w.nodeIP, w.node, err)
				}
			}
		}
		r, had := have.routes[w.cidr]
		if !had || !sameRoute(r, w.route) {
			if err := n.writing.routeReplace(&w.route); err != nil {
				return fmt.Errorf("set route to %v for node %s: %w", w.cidr, w.node, err)
			}
		}
		switch {
		case n.writing.writes == before:
		case had:
			res.Updated++
			n.log.Info("Updated the route to a node", "node", w.node, "podCIDR", w.cidr, "nodeIP", w.nodeIP)
		default:
			res.Added++
			n.log.V(2).Info("Added the route to a node", "node", w.node, "podCIDR", w.cidr, "nodeIP", w.nodeIP)
		}
		if err := tick(ctx, n.writing.writes); err != nil {
			return err
		}
	}
	return nil
}

func sameRoute(have, want netlink.Route) bool {
	onlink := int(netlink.FLAG_ONLINK)
	return have.LinkIndex == want.LinkIndex && have.Gw.Equal(want.Gw) &&
		have.Flags&onlink == want.Flags&onlink && have.Scope == want.Scope
}

// tick checks ctx every so many writes, so a cancelled huge sync stops
// soon without paying for a check per entry.
func tick(ctx context.Context, writes int) error {
	if writes%256 != 0 {
		return nil
	}
	return ctx.Err()
}

func compareFDB(a, b fdbKey) int {
	return cmp.Or(a.ip.Compare(b.ip), strings.Compare(a.mac, b.mac))
}
