package hnsnet

import (
	"context"
	"fmt"
	"net/netip"

	"github.com/nodenet/nodenet/overlay"
	"github.com/nodenet/nodenet/overlay/hostroute"
)

// RouteMetric marks the host routes this package owns in l2bridge mode: a
// route is ours when it leaves through the interface holding the node IP
// and has exactly this metric. Windows' own routes and
// flannel's use other metrics, so SyncRemotes never deletes them.
const RouteMetric uint32 = 3101

// syncRoutes makes one host route per remote pod CIDR via that node's IP
// of the CIDR's family (flannel host-gw's routes): one List read, one Add or Delete per change.
// A foreign route with the same destination, next hop and interface is
// accepted as is (Windows would refuse a second one) and never deleted.
func (n *Network) syncRoutes(ctx context.Context, remotes []overlay.RemoteNode) (overlay.SyncResult, error) {
	var res overlay.SyncResult
	ifIndex, err := n.routeInterface(ctx)
	if err != nil {
		return res, err
	}
	want := n.wanted(remotes, false)
	have, err := n.routes.List(ctx)
	if err != nil {
		return res, fmt.Errorf("list host routes: %w", err)
	}
	present := map[hostroute.Key]bool{}
	var stale []hostroute.Route
	for _, r := range have {
		present[r.Key()] = true
		if r.Metric != RouteMetric || r.InterfaceIndex != ifIndex {
			continue
		}
		w, ok := want[r.Destination.Masked()]
		if ok && w.nodeIP == r.NextHop {
			continue
		}
		stale = append(stale, r)
	}
	removedDst := map[netip.Prefix]bool{}
	for _, r := range stale {
		res.Writes++
		if err := n.routes.Delete(ctx, r); err != nil && !hostroute.IsNotFound(err) {
			return res, fmt.Errorf("delete host route %s: %w", r, err)
		}
		removedDst[r.Destination.Masked()] = true
		if _, ok := want[r.Destination.Masked()]; !ok {
			res.Removed++
		}
	}
	for cidr, w := range want {
		r := hostroute.Route{Destination: cidr, NextHop: w.nodeIP, InterfaceIndex: ifIndex, Metric: RouteMetric}
		if present[r.Key()] {
			continue
		}
		res.Writes++
		if err := n.routes.Add(ctx, r); err != nil && !hostroute.IsExists(err) {
			return res, fmt.Errorf("add host route %s for node %s: %w", r, w.node, err)
		}
		if removedDst[cidr] {
			res.Updated++
		} else {
			res.Added++
		}
	}
	if res.Writes > 0 {
		n.log.V(2).Info("host routes synced", "added", res.Added, "updated", res.Updated, "removed", res.Removed, "writes", res.Writes)
	}
	return res, nil
}

// routeInterface is the interface holding the node IP now: after the
// network attaches, the host vNIC "vEthernet (<uplink>)" with its own index.
func (n *Network) routeInterface(ctx context.Context) (int, error) {
	ads, err := n.adapters(ctx)
	if err != nil {
		return 0, fmt.Errorf("list host adapters: %w", err)
	}
	a, ok := adapterWithIP(ads, n.cur.plan.spec.NodeIP)
	if !ok {
		return 0, fmt.Errorf("no host adapter holds the node IP %s (adapters: %s)", n.cur.plan.spec.NodeIP, adapterNames(ads))
	}
	return a.Index, nil
}
