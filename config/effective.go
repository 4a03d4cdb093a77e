package config

import (
	"errors"
	"fmt"
	"net/netip"
	"slices"

	"github.com/nodenet/nodenet/internal/netaddr"
)

// The effective view: what a node actually runs once the cross-field rules
// have been applied. The stored fields keep what the operator wrote (so a
// written config round-trips); consumers read these methods instead.

// FeatureEnabled reports whether the named gate is on: known gates are on
// unless FeatureGates sets them to false.
func (c *AgentConfiguration) FeatureEnabled(name string) bool {
	enabled, set := c.FeatureGates[name]
	return !set || enabled
}

// HardFail reports whether the agent must exit on config errors
// (ConfigHardFail, true when unset).
func (c *AgentConfiguration) HardFail() bool {
	return c.ConfigHardFail == nil || *c.ConfigHardFail
}

// EffectiveIPFamilies returns the IP families this node runs, primary
// first:
//   - overlay mode runs IPv4 only (KEP-5100: Windows overlay has no
//     dual-stack), whatever IPFamilyPolicy and ClusterCIDRs say;
//   - SingleStack runs the family of the first cluster CIDR;
//   - PreferDualStack and RequireDualStack run every family in ClusterCIDRs.
//
// Validation warns whenever this drops a family the config mentions.
func (c *AgentConfiguration) EffectiveIPFamilies() []IPFamily {
	families := cidrFamilies(c.ClusterCIDRs)
	switch {
	case c.Network.Mode == NetworkModeOverlay || c.Network.Mode == "":
		if slices.Contains(families, IPv4) {
			return []IPFamily{IPv4}
		}
		return nil
	case c.IPFamilyPolicy == IPFamilyPolicySingleStack || c.IPFamilyPolicy == "":
		return families[:min(1, len(families))]
	default:
		return families
	}
}

// EffectiveClusterCIDRs returns the parsed ClusterCIDRs of the effective
// IP families.
func (c *AgentConfiguration) EffectiveClusterCIDRs() []netip.Prefix {
	return filterFamilies(c.ClusterCIDRs, c.EffectiveIPFamilies())
}

// EffectiveServiceCIDRs returns the parsed ServiceCIDRs of the effective
// IP families.
func (c *AgentConfiguration) EffectiveServiceCIDRs() []netip.Prefix {
	return filterFamilies(c.ServiceCIDRs, c.EffectiveIPFamilies())
}

// EffectiveDetectLocalCIDRs returns the parsed Proxy.DetectLocal.ClusterCIDRs
// of the effective IP families.
func (c *AgentConfiguration) EffectiveDetectLocalCIDRs() []netip.Prefix {
	return filterFamilies(c.Proxy.DetectLocal.ClusterCIDRs, c.EffectiveIPFamilies())
}

// ResolveSourceVIP returns this node's source VIP given its pod CIDRs
// (Node.spec.podCIDRs): with SourceVIP "auto" the address at
// SourceVIPOffset in the IPv4 pod CIDR, otherwise the explicit address,
// which must lie inside that CIDR and be neither its network, gateway nor
// broadcast address.
func (c *AgentConfiguration) ResolveSourceVIP(podCIDRs []string) (netip.Addr, error) {
	podCIDR, ok := firstIPv4Prefix(podCIDRs)
	if !ok {
		return netip.Addr{}, errors.New("no IPv4 pod CIDR: the source VIP needs one")
	}
	if c.Network.SourceVIP == SourceVIPAuto || c.Network.SourceVIP == "" {
		vip, ok := addrAtOffset(podCIDR, SourceVIPOffset)
		if !ok {
			return netip.Addr{}, fmt.Errorf("pod CIDR %s is too small for a source VIP at offset %d", podCIDR, SourceVIPOffset)
		}
		return vip, nil
	}
	vip, err := netip.ParseAddr(c.Network.SourceVIP)
	if err != nil {
		return netip.Addr{}, fmt.Errorf("source VIP %q: %w", c.Network.SourceVIP, err)
	}
	if err := checkUsableAddr(podCIDR, vip); err != nil {
		return netip.Addr{}, fmt.Errorf("source VIP %s: %w", vip, err)
	}
	return vip, nil
}

// checkUsableAddr reports why ip can't be a host address in p.
func checkUsableAddr(p netip.Prefix, ip netip.Addr) error {
	if !p.Contains(ip) {
		return fmt.Errorf("not in this node's pod CIDR %s", p)
	}
	if ip == p.Addr() {
		return fmt.Errorf("is the network address of %s", p)
	}
	if gw, ok := addrAtOffset(p, GatewayOffset); ok && ip == gw {
		return fmt.Errorf("is the pods' gateway of %s", p)
	}
	if netaddr.IsBroadcast(p, ip) {
		return fmt.Errorf("is the broadcast address of %s", p)
	}
	return nil
}

func familyOf(p netip.Prefix) IPFamily {
	if p.Addr().Is4() {
		return IPv4
	}
	return IPv6
}

// cidrFamilies returns the families of the parsable CIDRs, in order,
// without repeats.
func cidrFamilies(cidrs []string) []IPFamily {
	var families []IPFamily
	for _, s := range cidrs {
		p, err := netip.ParsePrefix(s)
		if err != nil {
			continue
		}
		if f := familyOf(p); !slices.Contains(families, f) {
			families = append(families, f)
		}
	}
	return families
}

func filterFamilies(cidrs []string, families []IPFamily) []netip.Prefix {
	var out []netip.Prefix
	for _, s := range cidrs {
		p, err := netip.ParsePrefix(s)
		if err == nil && slices.Contains(families, familyOf(p)) {
			out = append(out, p.Masked())
		}
	}
	return out
}

func firstIPv4Prefix(cidrs []string) (netip.Prefix, bool) {
	for _, s := range cidrs {
		p, err := netip.ParsePrefix(s)
		if err == nil && p.Addr().Is4() {
			return p.Masked(), true
		}
	}
	return netip.Prefix{}, false
}

// addrAtOffset returns the address offset places after p's network
// address, if p holds it as a host address.
func addrAtOffset(p netip.Prefix, offset int) (netip.Addr, bool) {
	a, ok := netaddr.AtOffset(p, offset)
	if !ok || netaddr.IsBroadcast(p, a) {
		return netip.Addr{}, false
	}
	return a, true
}
