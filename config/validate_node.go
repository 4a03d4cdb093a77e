package config

import (
	"fmt"
	"net/netip"
	"slices"

	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// ValidateForNode checks what can only be checked once this node's pod
// CIDRs are known (Node.spec.podCIDRs, read at runtime): each lies inside
// the cluster CIDR of its family and outside every service CIDR, every
// effective IP family has one, and in
// overlay mode the source VIP resolves inside the IPv4 one. Errors about
// the argument itself use the path podCIDRs[i]. cfg must be valid
// (Validate) first.
func ValidateForNode(cfg *AgentConfiguration, podCIDRs []string) field.ErrorList {
	var errs field.ErrorList
	podPath := field.NewPath("podCIDRs")
	var valid []netip.Prefix
	for i, s := range podCIDRs {
		p := podPath.Index(i)
		if e := validation.IsValidCIDR(p, s); len(e) > 0 {
			errs = append(errs, e...)
			continue
		}
		prefix := netip.MustParsePrefix(s)
		valid = append(valid, prefix)
		// The service overlap is the more useful message of the two (such a
		// CIDR is always outside the cluster CIDR too).
		if svc, ok := overlappingServiceCIDR(cfg, prefix); ok {
			errs = append(errs, field.Invalid(p, s, fmt.Sprintf("overlaps the service CIDR %s: pods there would shadow service IPs (check kube-controller-manager's --cluster-cidr)", svc)))
		} else if err := inClusterCIDR(cfg, prefix); err != nil {
			errs = append(errs, field.Invalid(p, s, err.Error()))
		}
	}
	if len(errs) > 0 {
		return errs
	}
	errs = append(errs, requireFamilies(cfg, podPath, podCIDRs, valid)...)
	if cfg.Network.Mode == NetworkModeOverlay && len(errs) == 0 {
		if _, err := cfg.ResolveSourceVIP(podCIDRs); err != nil {
			errs = append(errs, field.Invalid(field.NewPath("network", "sourceVIP"), cfg.Network.SourceVIP, err.Error()))
		}
	}
	return errs
}

// inClusterCIDR reports an error unless p lies in the cluster CIDR of its
// family (families this node doesn't run are not checked).
func inClusterCIDR(cfg *AgentConfiguration, p netip.Prefix) error {
	if !slices.Contains(cfg.EffectiveIPFamilies(), familyOf(p)) {
		return nil
	}
	for _, c := range cfg.EffectiveClusterCIDRs() {
		if c.Bits() <= p.Bits() && c.Contains(p.Addr()) {
			return nil
		}
	}
	return fmt.Errorf("not inside the %s cluster CIDR %v", familyOf(p), cfg.EffectiveClusterCIDRs())
}

// requireFamilies reports each family the node must run but has no pod
// CIDR for. Under PreferDualStack only the primary family is required.
func requireFamilies(cfg *AgentConfiguration, path *field.Path, podCIDRs []string, valid []netip.Prefix) field.ErrorList {
	required := cfg.EffectiveIPFamilies()
	if cfg.IPFamilyPolicy == IPFamilyPolicyPreferDualStack && len(required) > 1 {
		required = required[:1]
	}
	var errs field.ErrorList
	for _, family := range required {
		found := slices.ContainsFunc(valid, func(p netip.Prefix) bool { return familyOf(p) == family })
		if !found {
			errs = append(errs, field.Invalid(path, podCIDRs, fmt.Sprintf("this node runs %s but has no %s pod CIDR", family, family)))
		}
	}
	return errs
}

func overlappingServiceCIDR(cfg *AgentConfiguration, p netip.Prefix) (netip.Prefix, bool) {
	for _, svc := range cfg.ServiceCIDRs {
		if s, err := netip.ParsePrefix(svc); err == nil && s.Overlaps(p) {
			return s, true
		}
	}
	return netip.Prefix{}, false
}
