package linuxnet

import (
	"net"
	"net/netip"
	"slices"

	"k8s.io/klog/v2"

	"github.com/nodenet/nodenet/overlay"
)

// peer is one remote pod subnet as the data plane needs it.
type peer struct {
	node   string
	cidr   netip.Prefix // masked
	nodeIP netip.Addr
	mac    net.HardwareAddr // overlay only
}

// gateway is the next hop of an overlay route: the peer's pod CIDR network
// address, which the peer's vxlan device holds as /32 (flannel's shape).
func (p peer) gateway() netip.Addr { return p.cidr.Addr() }

// planPeers turns remotes into the peers this node can reach, sorted by
// CIDR, and logs each remote it has to skip and why.
func planPeers(log klog.Logger, st *localState, remotes []overlay.RemoteNode) []peer {
	overlayMode := isOverlay(st.spec.Mode)
	seen := make(map[netip.Prefix]string, len(remotes))
	out := make([]peer, 0, len(remotes))
	for _, r := range remotes {
		skip := func(reason string, kv ...any) {
			log.Info("Skipping remote node: "+reason, append([]any{"node", r.Name}, kv...)...)
		}
		switch {
		case !r.NodeIP.Is4():
			skip("it has no IPv4 node IP", "nodeIP", r.NodeIP)
			continue
		case r.NodeIP == st.spec.NodeIP:
			skip("it has this node's IP", "nodeIP", r.NodeIP)
			continue
		case overlayMode && len(r.VtepMAC) != 6:
			// It appears once its agent publishes flannel's backend-data.
			log.V(2).Info("Skipping remote node until it publishes its VTEP MAC", "node", r.Name)
			continue
		case !overlayMode && !onLink(st.subnets, r.NodeIP):
			skip("host-gw (l2bridge) needs the node on the uplink's subnet", "nodeIP", r.NodeIP, "uplink", st.uplink, "subnets", st.subnets)
			continue
		}
		for _, c := range r.PodCIDRs {
			c = c.Masked()
			if !c.Addr().Is4() {
				// The only next hop we know (NodeIP, a VTEP) is IPv4.
				log.V(2).Info("Skipping a non-IPv4 pod CIDR of a remote node", "node", r.Name, "podCIDR", c)
				continue
			}
			if slices.ContainsFunc(st.spec.PodCIDRs, c.Overlaps) {
				skip("its pod CIDR overlaps this node's", "podCIDR", c)
				continue
			}
			if other, dup := seen[c]; dup {
				skip("another node has the same pod CIDR", "podCIDR", c, "other", other)
				continue
			}
			seen[c] = r.Name
			out = append(out, peer{node: r.Name, cidr: c, nodeIP: r.NodeIP, mac: slices.Clone(r.VtepMAC)})
		}
	}
	slices.SortFunc(out, func(a, b peer) int { return a.cidr.Addr().Compare(b.cidr.Addr()) })
	return out
}
