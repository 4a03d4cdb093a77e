package proxier

import (
	"github.com/nodenet/nodenet/config"
	"github.com/nodenet/nodenet/proxy/nftables"
)

// NFTablesOptions returns the nftables backend's options for node from the
// config (NFT, Conntrack, Observe and Logger are the caller's).
func NFTablesOptions(cfg *config.AgentConfiguration, node Node) (nftables.Options, error) {
	nodePorts, err := NodePortPrefixes(cfg, node)
	if err != nil {
		return nftables.Options{}, err
	}
	return nftables.Options{
		Families:          Families(cfg),
		LocalTrafficCIDRs: LocalTrafficCIDRs(cfg, node),
		ServiceCIDRs:      cfg.EffectiveServiceCIDRs(),
		NodePortAddresses: nodePorts,
		NodeIPs:           node.IPs,
		MasqueradeAll:     cfg.Linux.MasqueradeAll,
	}, nil
}
