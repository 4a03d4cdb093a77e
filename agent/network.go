package agent

import (
	"net/netip"
	"path/filepath"
	"slices"

	"github.com/nodenet/nodenet/cni"
	"github.com/nodenet/nodenet/config"
	"github.com/nodenet/nodenet/overlay"
	"github.com/nodenet/nodenet/proxy/proxier"
)

// NodeNetwork is what the agent hands its CNI server once the network is
// ready: the dataplane's facts (local) plus the cluster-wide ones and the
// proxy's DSR setting from the one config, so pods and the proxy cannot
// disagree.
func NodeNetwork(cfg *config.AgentConfiguration, local *overlay.LocalNetwork) *cni.NodeNetwork {
	return &cni.NodeNetwork{
		Mode:         local.Mode,
		Name:         local.Name,
		ID:           local.ID,
		PodCIDRs:     slices.Clone(local.PodCIDRs),
		Gateways:     slices.Clone(local.Gateways),
		SourceVIP:    local.SourceVIP,
		Reserved:     slices.Clone(local.Reserved),
		MTU:          local.MTU,
		ClusterCIDRs: cfg.EffectiveClusterCIDRs(),
		ServiceCIDRs: cfg.EffectiveServiceCIDRs(),
		NodeIPs:      localNodeIPs(local),
		NodeSubnets:  slices.Clone(local.NodeSubnets),
		EnableDSR:    cfg.Proxy.EnableDSR,
	}
}

// ProxyNode is what the proxy takes from the network part: this node's
// name, underlay IPs (nodeIPOverride already applied) and pod CIDRs.
func ProxyNode(name string, local *overlay.LocalNetwork) proxier.Node {
	return proxier.Node{Name: name, IPs: localNodeIPs(local), PodCIDRs: slices.Clone(local.PodCIDRs)}
}

// localNodeIPs are the network's node IPs, IPv4 first.
func localNodeIPs(local *overlay.LocalNetwork) []netip.Addr {
	var ips []netip.Addr
	for _, ip := range []netip.Addr{local.NodeIP, local.NodeIPv6} {
		if ip.IsValid() {
			ips = append(ips, ip)
		}
	}
	return ips
}

// conflistPath is where the conflist is written.
func conflistPath(dir, name string) string { return filepath.Join(dir, name) }
