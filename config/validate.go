package config

import (
	"errors"
	"fmt"
	"net/netip"
	"slices"

	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Capabilities is what the host's dataplane can do, as probed at runtime
// (the HNS feature check on Windows). The zero value means "not probed":
// no capability rule applies, which is right for nodenetctl on a
// workstation.
type Capabilities struct {
	// Known is true when the fields below come from a real probe.
	Known bool
	// DSR is true when the host supports direct server return load
	// balancers.
	DSR bool
}

// ValidationOptions are the inputs of Validate.
type ValidationOptions struct {
	// OS is the target platform; empty means HostOS(). Values other than
	// OSWindows get Linux rules.
	OS OS
	// Shared marks a config many nodes read (see DefaultingOptions.Shared):
	// node-local fields may stay unset, and setting them is warned about.
	Shared bool
	// Capabilities of the host, when known.
	Capabilities Capabilities
}

// InvalidError is the error Load returns for a config it could decode but
// that has problems: every one of them, each with its field path.
type InvalidError struct {
	Errors field.ErrorList
}

func (e *InvalidError) Error() string {
	return fmt.Sprintf("invalid config: %v", e.Errors.ToAggregate())
}

// Unwrap returns the individual *field.Error values.
func (e *InvalidError) Unwrap() []error {
	out := make([]error, len(e.Errors))
	for i, fe := range e.Errors {
		out[i] = fe
	}
	return out
}

// FieldErrors returns the field errors inside err (an *InvalidError
// anywhere in its chain), or nil.
func FieldErrors(err error) field.ErrorList {
	var invalid *InvalidError
	if errors.As(err, &invalid) {
		return invalid.Errors
	}
	return nil
}

// Validate checks a defaulted config (see SetDefaults; Load does both) and
// returns every error, each with its field path, and the warnings. It never
// stops at the first problem.
func Validate(cfg *AgentConfiguration, opts ValidationOptions) (field.ErrorList, Warnings) {
	v := &validator{cfg: cfg, target: opts.OS.rules(), shared: opts.Shared, caps: opts.Capabilities}
	v.validateTypeMeta()
	v.validateRoot()
	v.validateNetwork()
	v.validateProxy()
	v.validateCNI()
	v.validateWindows()
	v.validateLinux()
	return v.errs, v.warnings
}

// validator collects the findings of one Validate call; each section of the
// config has its own methods.
type validator struct {
	cfg      *AgentConfiguration
	target   OS
	shared   bool
	caps     Capabilities
	errs     field.ErrorList
	warnings Warnings
}

func (v *validator) err(e *field.Error)         { v.errs = append(v.errs, e) }
func (v *validator) errList(es field.ErrorList) { v.errs = append(v.errs, es...) }
func (v *validator) warn(p *field.Path, format string, args ...any) {
	v.warnings.add(p, format, args...)
}

func (v *validator) validateTypeMeta() {
	if v.cfg.APIVersion != APIVersion {
		v.err(field.NotSupported(field.NewPath("apiVersion"), v.cfg.APIVersion, []string{APIVersion}))
	}
	if v.cfg.Kind != Kind {
		v.err(field.NotSupported(field.NewPath("kind"), v.cfg.Kind, []string{Kind}))
	}
}

func (v *validator) validateRoot() {
	clusterPath, servicePath := field.NewPath("clusterCIDRs"), field.NewPath("serviceCIDRs")
	cluster := v.cidrList(clusterPath, v.cfg.ClusterCIDRs,
		"the cluster's pod CIDRs (kube-controller-manager --cluster-cidr), e.g. [10.244.0.0/16]")
	service := v.cidrList(servicePath, v.cfg.ServiceCIDRs,
		"the cluster's service CIDRs (kube-apiserver --service-cluster-ip-range), e.g. [10.96.0.0/12]; kube-proxy and flannel configs don't carry them")
	v.noOverlap(servicePath, service, clusterPath, cluster)
	v.validateNodeIdentity()
	v.validateFamilies(cluster, service)
	v.validateSyncPeriods()
	v.validateFeatureGates()
}

// indexedPrefix is a parsed CIDR with its index in the config list.
type indexedPrefix struct {
	index  int
	prefix netip.Prefix
}

// cidrList validates a required list of CIDRs with at most one per family
// and returns the valid ones.
func (v *validator) cidrList(path *field.Path, cidrs []string, what string) []indexedPrefix {
	if len(cidrs) == 0 {
		v.err(field.Required(path, what))
		return nil
	}
	return v.optionalCIDRList(path, cidrs)
}

func (v *validator) optionalCIDRList(path *field.Path, cidrs []string) []indexedPrefix {
	var valid []indexedPrefix
	seen := map[IPFamily]int{}
	for i, s := range cidrs {
		p := path.Index(i)
		if errs := validation.IsValidCIDR(p, s); len(errs) > 0 {
			v.errList(errs)
			continue
		}
		prefix := netip.MustParsePrefix(s)
		family := familyOf(prefix)
		if first, dup := seen[family]; dup {
			v.err(field.Invalid(p, s, fmt.Sprintf("at most one CIDR per IP family: %s is already %s", path.Index(first), family)))
			continue
		}
		seen[family] = i
		valid = append(valid, indexedPrefix{i, prefix})
	}
	return valid
}

func (v *validator) noOverlap(path *field.Path, list []indexedPrefix, otherPath *field.Path, other []indexedPrefix) {
	for _, a := range list {
		for _, b := range other {
			if a.prefix.Overlaps(b.prefix) {
				v.err(field.Invalid(path.Index(a.index), a.prefix.String(),
					fmt.Sprintf("overlaps %s (%s)", otherPath.Index(b.index), b.prefix)))
			}
		}
	}
}

func (v *validator) validateNodeIdentity() {
	namePath := field.NewPath("nodeName")
	switch {
	case v.cfg.NodeName == "" && !v.shared:
		v.err(field.Required(namePath, fmt.Sprintf("the Node object's name; set it or the %s environment variable", NodeNameEnv)))
	case v.cfg.NodeName != "":
		for _, msg := range validation.IsDNS1123Subdomain(v.cfg.NodeName) {
			v.err(field.Invalid(namePath, v.cfg.NodeName, msg))
		}
		if v.shared {
			v.warn(namePath, "node-local setting in a shared config: every node reading it would claim Node %q", v.cfg.NodeName)
		}
	}

	ipPath := field.NewPath("nodeIPOverride")
	seen := map[IPFamily]int{}
	for i, s := range v.cfg.NodeIPOverride {
		p := ipPath.Index(i)
		if errs := validation.IsValidIP(p, s); len(errs) > 0 {
			v.errList(errs)
			continue
		}
		family := IPv6
		if netip.MustParseAddr(s).Is4() {
			family = IPv4
		}
		if first, dup := seen[family]; dup {
			v.err(field.Invalid(p, s, fmt.Sprintf("at most one IP per family: %s is already %s", ipPath.Index(first), family)))
			continue
		}
		seen[family] = i
	}
	if v.shared && len(v.cfg.NodeIPOverride) > 0 {
		v.warn(ipPath, "node-local setting in a shared config: every node reading it would use these IPs")
	}
}

// validateFamilies applies ipFamilyPolicy and the overlay IPv4-only rule
// (KEP-5100), warning for every CIDR the node will not use.
func (v *validator) validateFamilies(cluster, service []indexedPrefix) {
	policyPath := field.NewPath("ipFamilyPolicy")
	policy := v.cfg.IPFamilyPolicy
	overlay := v.cfg.Network.Mode == NetworkModeOverlay
	switch policy {
	case IPFamilyPolicySingleStack:
	case IPFamilyPolicyPreferDualStack:
		if overlay {
			v.warn(policyPath, "%s with network mode overlay: overlay is IPv4 only, this node runs IPv4 only", policy)
		}
	case IPFamilyPolicyRequireDualStack:
		if overlay {
			v.err(field.Forbidden(policyPath, "RequireDualStack is impossible with network mode overlay, which is IPv4 only; use l2bridge or PreferDualStack"))
		} else {
			v.requireBothFamilies(field.NewPath("clusterCIDRs"), cluster, len(v.cfg.ClusterCIDRs))
			v.requireBothFamilies(field.NewPath("serviceCIDRs"), service, len(v.cfg.ServiceCIDRs))
		}
	default:
		v.err(field.NotSupported(policyPath, policy, []IPFamilyPolicy{
			IPFamilyPolicySingleStack, IPFamilyPolicyPreferDualStack, IPFamilyPolicyRequireDualStack}))
		return
	}
	if overlay && len(cluster) > 0 && !slices.Contains(v.cfg.EffectiveIPFamilies(), IPv4) {
		v.err(field.Invalid(field.NewPath("clusterCIDRs"), v.cfg.ClusterCIDRs, "network mode overlay is IPv4 only and needs an IPv4 cluster CIDR"))
		return
	}
	v.warnUnusedFamilies(field.NewPath("clusterCIDRs"), cluster)
	v.warnUnusedFamilies(field.NewPath("serviceCIDRs"), service)
}

func (v *validator) requireBothFamilies(path *field.Path, valid []indexedPrefix, n int) {
	if len(valid) != n { // already reported
		return
	}
	var families []IPFamily
	for _, p := range valid {
		families = append(families, familyOf(p.prefix))
	}
	if !slices.Contains(families, IPv4) || !slices.Contains(families, IPv6) {
		v.err(field.Invalid(path, families, "ipFamilyPolicy RequireDualStack needs one IPv4 and one IPv6 CIDR"))
	}
}

func (v *validator) warnUnusedFamilies(path *field.Path, list []indexedPrefix) {
	effective := v.cfg.EffectiveIPFamilies()
	if len(effective) == 0 {
		return
	}
	for _, p := range list {
		family := familyOf(p.prefix)
		if slices.Contains(effective, family) {
			continue
		}
		reason := fmt.Sprintf("ipFamilyPolicy is %s and the first cluster CIDR is %s", v.cfg.IPFamilyPolicy, effective[0])
		if v.cfg.Network.Mode == NetworkModeOverlay {
			reason = "network mode overlay is IPv4 only (KEP-5100)"
		}
		v.warn(path.Index(p.index), "%s not used: %s; this node runs %s only", family, reason, effective[0])
	}
}

func (v *validator) validateSyncPeriods() {
	syncPath, minPath := field.NewPath("syncPeriod"), field.NewPath("minSyncPeriod")
	sync := v.cfg.SyncPeriod.Duration
	if sync <= 0 {
		v.err(field.Invalid(syncPath, sync.String(), "must be greater than 0"))
	}
	if v.cfg.MinSyncPeriod == nil {
		return
	}
	minSync := v.cfg.MinSyncPeriod.Duration
	switch {
	case minSync < 0:
		v.err(field.Invalid(minPath, minSync.String(), "must not be negative"))
	case sync > 0 && minSync > sync:
		v.err(field.Invalid(minPath, minSync.String(), fmt.Sprintf("must not exceed syncPeriod (%s)", sync)))
	}
}

func (v *validator) validateFeatureGates() {
	known := KnownFeatureGates()
	for _, name := range sortedKeys(v.cfg.FeatureGates) {
		if !slices.Contains(known, name) {
			v.err(field.NotSupported(field.NewPath("featureGates").Key(name), name, known))
		}
	}
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
