package proxier

import (
	"fmt"
	"net/netip"
	"slices"

	"github.com/nodenet/nodenet/config"
	"github.com/nodenet/nodenet/proxy"
	"github.com/nodenet/nodenet/proxy/brain"
	"github.com/nodenet/nodenet/proxy/hnslb"
)

// The one config, translated: every proxy setting the agent and nodenetctl
// pass to the brain and the backends comes from these functions, so no
// caller re-derives a family list or a CIDR on its own.

// Node holds what the config leaves to the node itself: its primary IP per
// family (the Node's InternalIPs or nodeIPOverride) and its pod CIDRs
// (spec.podCIDRs).
type Node struct {
	Name     string
	IPs      []netip.Addr
	PodCIDRs []netip.Prefix
}

// Families returns the IP families the proxy programs: the config's
// effective families (overlay mode is IPv4 only; validation warns).
func Families(cfg *config.AgentConfiguration) []proxy.IPFamily {
	var out []proxy.IPFamily
	for _, f := range cfg.EffectiveIPFamilies() {
		out = append(out, proxy.IPFamily(f))
	}
	return out
}

// BrainOptions returns the brain's options for node (Logger, Recorder and
// OnChange are the caller's).
func BrainOptions(cfg *config.AgentConfiguration, node Node) brain.Options {
	return brain.Options{
		NodeName: node.Name,
		Families: Families(cfg),
		DSR:      cfg.Proxy.EnableDSR,
	}
}

// LocalTrafficCIDRs returns the sources detect-local treats as pods: the
// detect-local cluster CIDRs, or with mode NodeCIDR this node's pod CIDRs
// of the proxied families.
func LocalTrafficCIDRs(cfg *config.AgentConfiguration, node Node) []netip.Prefix {
	if cfg.Proxy.DetectLocal.Mode == config.DetectLocalNodeCIDR {
		return ofFamilies(node.PodCIDRs, Families(cfg))
	}
	return cfg.EffectiveDetectLocalCIDRs()
}

// NodePortPrefixes resolves proxy.nodePortAddresses for node: "primary"
// becomes each proxied family's node IP as a host prefix, CIDRs stay. An
// empty result means every local address (kube-proxy's old default).
func NodePortPrefixes(cfg *config.AgentConfiguration, node Node) ([]netip.Prefix, error) {
	families := Families(cfg)
	var out []netip.Prefix
	for i, entry := range cfg.Proxy.NodePortAddresses {
		if entry == config.NodePortAddressPrimary {
			found := false
			for _, ip := range node.IPs {
				if containsFamily(families, proxy.FamilyOf(ip)) {
					out = append(out, netip.PrefixFrom(ip.Unmap(), ip.Unmap().BitLen()))
					found = true
				}
			}
			if !found {
				return nil, fmt.Errorf("proxy.nodePortAddresses[%d]: %q needs a node IP of a proxied family %v, and the node has %v", i, entry, families, node.IPs)
			}
			continue
		}
		p, err := netip.ParsePrefix(entry)
		if err != nil {
			return nil, fmt.Errorf("proxy.nodePortAddresses[%d]: %w", i, err)
		}
		if containsFamily(families, proxy.FamilyOf(p.Addr())) {
			out = append(out, p.Masked())
		}
	}
	return out, nil
}

func ofFamilies(prefixes []netip.Prefix, families []proxy.IPFamily) []netip.Prefix {
	var out []netip.Prefix
	for _, p := range prefixes {
		if containsFamily(families, proxy.FamilyOf(p.Addr())) {
			out = append(out, p)
		}
	}
	return out
}

func containsFamily(families []proxy.IPFamily, f proxy.IPFamily) bool {
	return slices.Contains(families, f)
}

// HNSOptions returns the HNS backend's options from the config, for the
// node network part network (HNS, Recorder, Observe and Logger are the
// caller's).
func HNSOptions(cfg *config.AgentConfiguration, network hnslb.Network) hnslb.Options {
	opts := hnslb.Options{
		Network:                    network,
		ClusterCIDRs:               cfg.EffectiveClusterCIDRs(),
		ServiceCIDRs:               cfg.EffectiveServiceCIDRs(),
		EnableDSR:                  cfg.Proxy.EnableDSR,
		MaxBackendsPerLoadBalancer: int(cfg.Windows.MaxBackendsPerLoadBalancer),
	}
	if ap, err := netip.ParseAddrPort(cfg.Proxy.HealthzBindAddress); err == nil {
		opts.HealthzPort = ap.Port()
	}
	return opts
}
