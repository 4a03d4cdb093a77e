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
	cidr   netip.Prefix     // masked
	nodeIP netip.Addr       // the VTEP (overlay) or next hop (l2bridge), of cidr's family
	mac    net.HardwareAddr // overlay only
}

// gateway is the next hop of an overlay route: the peer's pod CIDR network
// address, which the peer's vxlan device holds as /32 (flannel's shape).
func (p peer) gateway() netip.Addr { return p.cidr.Addr() }

// planPeers turns remotes into the peers this node can reach, sorted by
// CIDR, and logs each remote it has to skip and why. Overlay mode reaches
// IPv4 pod CIDRs through the peer's VTEP; l2bridge mode reaches each pod
// CIDR via the peer's node IP of the same family, which must be on the
// uplink's subnet.
func planPeers(log klog.Logger, st *localState, remotes []overlay.RemoteNode) []peer {
	overlayMode := isOverlay(st.spec.Mode)
	seen := make(map[netip.Prefix]string, len(remotes))
	out := make([]peer, 0, len(remotes))
	for _, r := range remotes {
		skip := func(reason string, kv ...any) {
			log.Info("Skipping remote node: "+reason, append([]any{"node", r.Name}, kv...)...)
		}
		if overlayMode && len(r.VtepMAC) != 6 {
			// It appears once its agent publishes flannel's backend-data.
			log.V(2).Info("Skipping remote node until it publishes its VTEP MAC", "node", r.Name)
			continue
		}
		for _, c := range r.PodCIDRs {
			c = c.Masked()
			via := r.NodeIP
			if c.Addr().Is6() {
				if overlayMode {
					// The overlay (flannel's vxlan, HNS Overlay) is IPv4 only.
					log.V(2).Info("Skipping an IPv6 pod CIDR of a remote node in overlay mode", "node", r.Name, "podCIDR", c)
					continue
				}
				via = r.NodeIPv6
			}
			switch {
			case !via.IsValid() || via.Is6() != c.Addr().Is6():
				skip("it has no node IP of its pod CIDR's family", "podCIDR", c, "nodeIP", r.NodeIP, "nodeIPv6", r.NodeIPv6)
				continue
			case via == st.spec.NodeIP || via == st.spec.NodeIPv6:
				skip("it has this node's IP", "nodeIP", via)
				continue
			case !overlayMode && !onLink(st.subnets, via):
				skip("host-gw (l2bridge) needs the node on the uplink's subnet", "nodeIP", via, "uplink", st.uplink, "subnets", st.subnets)
				continue
			case slices.ContainsFunc(st.spec.PodCIDRs, c.Overlaps):
				skip("its pod CIDR overlaps this node's", "podCIDR", c)
				continue
			}
			if other, dup := seen[c]; dup {
				skip("another node has the same pod CIDR", "podCIDR", c, "other", other)
				continue
			}
			seen[c] = r.Name
			out = append(out, peer{node: r.Name, cidr: c, nodeIP: via, mac: slices.Clone(r.VtepMAC)})
		}
	}
	slices.SortFunc(out, func(a, b peer) int { return a.cidr.Addr().Compare(b.cidr.Addr()) })
	return out
}
