package hnsnet

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strings"

	"github.com/nodenet/nodenet/hns"
	"github.com/nodenet/nodenet/overlay"
)

// SyncRemotes implements overlay.Interface: RemoteSubnetRoute policies in
// overlay mode, host routes in l2bridge mode.
func (n *Network) SyncRemotes(ctx context.Context, remotes []overlay.RemoteNode) (overlay.SyncResult, error) {
	if n.cur == nil {
		return overlay.SyncResult{}, errors.New("hnsnet: SyncRemotes before a successful EnsureLocal")
	}
	if n.cur.plan.netType == hns.NetworkTypeL2Bridge {
		return n.syncRoutes(ctx, remotes)
	}
	return n.syncRemoteSubnets(ctx, remotes)
}

// remoteRoute is one remote node's pod subnet as the mesh needs it.
type remoteRoute struct {
	node    string
	cidr    netip.Prefix
	nodeIP  netip.Addr
	vtepMAC net.HardwareAddr
}

// wanted picks each remote's IPv4 pod CIDR (and in l2bridge mode its IPv6
// one, via its IPv6 node IP), skipping (and naming in one log line) nodes
// the mesh cannot reach yet and CIDRs that overlap ours or an earlier
// node's.
func (n *Network) wanted(remotes []overlay.RemoteNode, overlayMode bool) map[netip.Prefix]remoteRoute {
	own := n.cur.plan.cidrs
	out := make(map[netip.Prefix]remoteRoute, len(remotes))
	var skipped []string
	add := func(r overlay.RemoteNode, cidr netip.Prefix, via netip.Addr) {
		if overlapsAny(cidr, own) {
			skipped = append(skipped, fmt.Sprintf("%s (pod CIDR %s overlaps this node's)", r.Name, cidr))
			return
		}
		if prev, dup := out[cidr]; dup {
			skipped = append(skipped, fmt.Sprintf("%s (pod CIDR %s also claimed by %s)", r.Name, cidr, prev.node))
			return
		}
		out[cidr] = remoteRoute{node: r.Name, cidr: cidr, nodeIP: via, vtepMAC: r.VtepMAC}
	}
	for _, r := range remotes {
		cidr, ok := firstOfFamily(r.PodCIDRs, false)
		switch {
		case !ok:
			skipped = append(skipped, r.Name+" (no IPv4 pod CIDR)")
		case !r.NodeIP.Is4():
			skipped = append(skipped, r.Name+" (no IPv4 node IP)")
		case overlayMode && len(r.VtepMAC) != 6:
			skipped = append(skipped, r.Name+" (no VTEP MAC)")
		default:
			add(r, cidr, r.NodeIP)
		}
		if overlayMode {
			continue // HNS overlay networks are IPv4 only
		}
		if cidr6, ok := firstOfFamily(r.PodCIDRs, true); ok {
			if r.NodeIPv6.Is6() {
				add(r, cidr6, r.NodeIPv6)
			} else {
				skipped = append(skipped, fmt.Sprintf("%s (IPv6 pod CIDR %s but no IPv6 node IP)", r.Name, cidr6))
			}
		}
	}
	if len(skipped) > 0 {
		n.log.Info("remote nodes left out of the mesh", "count", len(skipped), "nodes", skipped)
	}
	return out
}

// syncRemoteSubnets diffs the network's RemoteSubnetRoute policies
// against remotes with one GetNetworkByID read, then removes the stale
// and changed ones in one RemoveNetworkPolicies call and adds the new and
// changed ones in one AddNetworkPolicies call. Every RemoteSubnetRoute on
// our network is ours.
func (n *Network) syncRemoteSubnets(ctx context.Context, remotes []overlay.RemoteNode) (overlay.SyncResult, error) {
	start := n.hns.writes
	want := n.wanted(remotes, true)
	nw, err := n.hns.GetNetworkByID(ctx, n.cur.networkID)
	if err != nil {
		return overlay.SyncResult{}, fmt.Errorf("read HNS network %q: %w", n.cur.plan.spec.Name, err)
	}
	vni := uint16(n.cur.plan.spec.VNI)
	var res overlay.SyncResult
	var remove, add []hns.NetworkPolicy
	kept := map[netip.Prefix]bool{}
	changed := map[netip.Prefix]bool{}
	for _, p := range nw.Policies {
		r := p.RemoteSubnetRoute
		if p.Type != hns.NetworkPolicyRemoteSubnetRoute || r == nil {
			continue
		}
		cidr, err := netip.ParsePrefix(r.DestinationPrefix)
		cidr = cidr.Masked()
		w, desired := want[cidr]
		desired = desired && err == nil && !kept[cidr]
		if desired && sameRoute(r, w, vni) {
			kept[cidr] = true
			continue
		}
		if desired {
			changed[cidr] = true
		}
		remove = append(remove, p) // exactly as read: HNS removes equal policies
	}
	for cidr, w := range want {
		if kept[cidr] {
			continue
		}
		add = append(add, remoteSubnetRoute(w, vni))
		if changed[cidr] {
			res.Updated++
		} else {
			res.Added++
		}
	}
	res.Removed = len(remove) - res.Updated
	// A stable order keeps HNS dumps and test failures readable.
	slices.SortFunc(add, func(a, b hns.NetworkPolicy) int {
		return strings.Compare(a.RemoteSubnetRoute.DestinationPrefix, b.RemoteSubnetRoute.DestinationPrefix)
	})
	if len(remove) > 0 {
		if err := n.hns.RemoveNetworkPolicies(ctx, nw.ID, remove); err != nil {
			return res, fmt.Errorf("remove %d remote subnet routes: %w", len(remove), err)
		}
	}
	if len(add) > 0 {
		if err := n.hns.AddNetworkPolicies(ctx, nw.ID, add); err != nil {
			res.Writes = n.hns.writes - start
			return res, fmt.Errorf("add %d remote subnet routes: %w", len(add), err)
		}
	}
	res.Writes = n.hns.writes - start
	if res.Writes > 0 {
		n.log.V(2).Info("remote subnet routes synced", "added", res.Added, "updated", res.Updated, "removed", res.Removed, "writes", res.Writes)
	}
	return res, nil
}

func remoteSubnetRoute(w remoteRoute, vni uint16) hns.NetworkPolicy {
	return hns.NetworkPolicy{Type: hns.NetworkPolicyRemoteSubnetRoute, RemoteSubnetRoute: &hns.RemoteSubnetRoutePolicy{
		DestinationPrefix:           w.cidr.String(),
		IsolationID:                 vni,
		ProviderAddress:             w.nodeIP.String(),
		DistributedRouterMacAddress: dashMAC(w.vtepMAC),
	}}
}

// sameRoute compares by meaning (HNS may echo MACs or addresses in
// another spelling).
func sameRoute(r *hns.RemoteSubnetRoutePolicy, w remoteRoute, vni uint16) bool {
	pa, err := netip.ParseAddr(r.ProviderAddress)
	if err != nil || pa != w.nodeIP || r.IsolationID != vni {
		return false
	}
	mac, err := net.ParseMAC(r.DistributedRouterMacAddress)
	return err == nil && mac.String() == w.vtepMAC.String()
}

func firstOfFamily(ps []netip.Prefix, ipv6 bool) (netip.Prefix, bool) {
	for _, p := range ps {
		if p.Addr().Is6() == ipv6 {
			return p.Masked(), true
		}
	}
	return netip.Prefix{}, false
}

func overlapsAny(p netip.Prefix, list []netip.Prefix) bool {
	for _, q := range list {
		if p.Overlaps(q) {
			return true
		}
	}
	return false
}
