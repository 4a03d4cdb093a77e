package hns

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// Version is the HNS service version (hcn Globals.Version).
type Version struct {
	Major int
	Minor int
}

func (v Version) String() string { return fmt.Sprintf("%d.%d", v.Major, v.Minor) }

// Less reports whether v is older than o.
func (v Version) Less(o Version) bool {
	return v.Major < o.Major || (v.Major == o.Major && v.Minor < o.Minor)
}

// ParseVersion parses "major.minor", each a decimal number of digits only.
func ParseVersion(s string) (Version, error) {
	maj, min, ok := strings.Cut(s, ".")
	a, okA := parseDecimal(maj)
	b, okB := parseDecimal(min)
	if !ok || !okA || !okB {
		return Version{}, fmt.Errorf("hns version %q: want major.minor, e.g. 15.5", s)
	}
	return Version{Major: a, Minor: b}, nil
}

func parseDecimal(s string) (int, bool) {
	if s == "" || len(s) > 9 || strings.Trim(s, "0123456789") != "" {
		return 0, false
	}
	n, err := strconv.Atoi(s)
	return n, err == nil
}

// The HNS versions Windows Server releases report, each from a public
// report of a real host (HNS reports only major.minor; which one a host
// has depends on its cumulative updates, so a release can span several).
// docs/hns-versions.md tabulates what nodenet does on each.
var (
	// VersionWS2019 is Windows Server 2019 (1809, build 17763) as
	// Kubernetes nodes first ran it: HNS 9.3 ("Windows Server, version
	// 1809 with HNS version 9.3", kubernetes issue 93304, which extended
	// DSR to 9.3–9.x in PR 93080). DSR; no session affinity, dual-stack
	// or VxlanPort.
	VersionWS2019 = Version{Major: 9, Minor: 3}
	// VersionWS2019Patched is Windows Server 2019 on recent cumulative
	// updates: HNS 9.5 (kube-proxy logging version={9 5} on build
	// 17763.8146, kubernetes PR 137530's thread). Same features as 9.3.
	VersionWS2019Patched = Version{Major: 9, Minor: 5}
	// VersionWS2022 is Windows Server 2022 (build 20348). No public
	// report of its exact HNS version was found (searched: kube-proxy
	// "hns version" logs, hcsshim/hnslib issues, AKS, containerd), so it
	// is modelled as a range, WS2022Range: above Windows Server 2004's
	// 11.10 (hcsshim PR 1003) and with session affinity (≥ 12.0), which
	// Kubernetes documents for Windows Server 2022, and below Windows
	// Server 2025's 15.4. Every version in that range has the same
	// features for nodenet (FeaturesFor; TestWS2022RangeIsOneFeatureSet),
	// so the simulator uses its lower end.
	VersionWS2022 = WS2022Range.Min
	// VersionWS2025 is Windows Server 2025 (build 26100) before the
	// ModifyLoadBalancer fix: HNS 15.4 (kubernetes issue 131466, "I'm
	// using HNS version 15.4" on an AKS Windows Server 2025 node). HNS
	// 15.4 accepts an in-place update and keeps the old endpoints, so
	// nodenet never updates in place there.
	VersionWS2025 = Version{Major: 15, Minor: 4}
	// VersionWS2025Patched is Windows Server 2025 with the fix: HNS 15.5,
	// where hnslib's ModifyLoadbalancer range starts (kubernetes PR
	// 131506 moved kube-proxy to that range to fix issue 131466).
	VersionWS2025Patched = Version{Major: 15, Minor: 5}
	// VersionDefault is the simulator's host when none is configured:
	// the current Windows Server release with its fix (Windows Server
	// 2025, HNS 15.5), the host a new Windows node most likely runs, with
	// every feature nodenet uses.
	VersionDefault = VersionWS2025Patched
)

// WS2022Range is the span of HNS versions modelled for Windows Server 2022
// (see VersionWS2022 for why it is a range).
var WS2022Range = VersionRange{Min: Version{Major: 12, Minor: 0}, Max: Version{Major: 15, Minor: 3}}

// String reads r as "12.0–15.3".
func (r VersionRange) String() string { return VersionRanges{r}.String() }

// Feature names an HNS capability nodenet decides on; each is a field of
// Features and of hnslib's hcn.SupportedFeatures.
type Feature string

// The features nodenet decides on.
const (
	FeatureRemoteSubnet       Feature = "RemoteSubnet"
	FeatureHostRoute          Feature = "HostRoute"
	FeatureDSR                Feature = "DSR"
	FeatureSessionAffinity    Feature = "SessionAffinity"
	FeatureIPv6DualStack      Feature = "IPv6DualStack"
	FeatureVxlanPort          Feature = "VxlanPort"
	FeatureModifyLoadbalancer Feature = "ModifyLoadbalancer"
)

// AllFeatures lists every Feature in the order Features declares them.
var AllFeatures = []Feature{
	FeatureRemoteSubnet, FeatureHostRoute, FeatureDSR, FeatureSessionAffinity,
	FeatureIPv6DualStack, FeatureVxlanPort, FeatureModifyLoadbalancer,
}

// Features are the HNS capabilities nodenet decides on.
type Features struct {
	RemoteSubnet       bool // RemoteSubnetRoute network policies
	HostRoute          bool // HostRoute network policy
	DSR                bool // LoadBalancerFlagsDSR
	SessionAffinity    bool // DistributionSourceIP
	IPv6DualStack      bool // IPv6 addresses and LoadBalancerFlagsIPv6
	VxlanPort          bool // VxlanPort network policy (port other than 4789)
	ModifyLoadbalancer bool // in-place UpdateLoadBalancer
}

// Has reports whether f is set in fs.
func (fs Features) Has(f Feature) bool {
	switch f {
	case FeatureRemoteSubnet:
		return fs.RemoteSubnet
	case FeatureHostRoute:
		return fs.HostRoute
	case FeatureDSR:
		return fs.DSR
	case FeatureSessionAffinity:
		return fs.SessionAffinity
	case FeatureIPv6DualStack:
		return fs.IPv6DualStack
	case FeatureVxlanPort:
		return fs.VxlanPort
	case FeatureModifyLoadbalancer:
		return fs.ModifyLoadbalancer
	}
	return false
}

// VersionRange is an inclusive span of HNS versions.
type VersionRange struct{ Min, Max Version }

// Contains reports whether v lies in r.
func (r VersionRange) Contains(v Version) bool { return !v.Less(r.Min) && !r.Max.Less(v) }

// VersionRanges are the spans in which a feature is supported.
type VersionRanges []VersionRange

// Contains reports whether v lies in any of rs.
func (rs VersionRanges) Contains(v Version) bool {
	for _, r := range rs {
		if r.Contains(v) {
			return true
		}
	}
	return false
}

// String says rs the way an operator reads it: "9.3–9.x or ≥ 10.2".
func (rs VersionRanges) String() string {
	parts := make([]string, 0, len(rs))
	for _, r := range rs {
		switch {
		case r.Max == anyAfter:
			parts = append(parts, "≥ "+r.Min.String())
		case r.Max.Minor == math.MaxInt32 && r.Max.Major == r.Min.Major:
			parts = append(parts, fmt.Sprintf("%s–%d.x", r.Min, r.Max.Major))
		default:
			parts = append(parts, fmt.Sprintf("%s–%s", r.Min, r.Max))
		}
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, " or ")
}

// anyAfter is the open upper end hnslib writes as {MaxInt32, MaxInt32}.
var anyAfter = Version{Major: math.MaxInt32, Minor: math.MaxInt32}

// upTo returns the range from min to the last minor of major max.
func upTo(min Version, max int) VersionRange {
	return VersionRange{min, Version{Major: max, Minor: math.MaxInt32}}
}

func from(min Version) VersionRange { return VersionRange{min, anyAfter} }

// mirrorRanges are the HNS versions that support each feature: a copy of
// the VersionRanges in hnslib v0.1.3's hcn/hcnglobals.go
// (github.com/Microsoft/hnslib; RemoteSubnetVersion, HostRouteVersion,
// DSRVersion, SessionAffinityVersion, IPv6DualStackVersion,
// VxlanPortVersion, ModifyLoadbalancerVersion). hnslib's hcn builds only
// on Windows, so this copy is what the simulator uses on every other OS;
// on Windows featureRanges is hnslib's own table, and a Windows test
// (features_windows_test.go, run under Wine) fails when this copy and
// hnslib disagree on any feature at any version of a grid.
var mirrorRanges = map[Feature]VersionRanges{
	FeatureRemoteSubnet: {from(Version{9, 2})},
	FeatureHostRoute:    {from(Version{9, 2})},
	// DSR: 9.3–9.x (Windows Server 2019 once patched; kubernetes PR
	// 93080) and 10.2 on; 10.0 and 10.1 lack it.
	FeatureDSR:             {upTo(Version{9, 3}, 9), from(Version{10, 2})},
	FeatureSessionAffinity: {from(Version{12, 0})},
	FeatureIPv6DualStack:   {from(Version{11, 10})},
	FeatureVxlanPort:       {from(Version{10, 3})},
	// ModifyLoadbalancer: 15.5–15.x and 16.0 on. 15.4 is left out on
	// purpose: its in-place update succeeds but keeps the old endpoints
	// (kubernetes issue 131466, PR 131506).
	FeatureModifyLoadbalancer: {upTo(Version{15, 5}, 15), from(Version{16, 0})},
}

// SupportedVersions returns the HNS versions that support f.
func SupportedVersions(f Feature) VersionRanges { return featureRanges[f] }

// FeaturesFor returns what an HNS of version v supports.
func FeaturesFor(v Version) Features {
	has := func(f Feature) bool { return featureRanges[f].Contains(v) }
	return Features{
		RemoteSubnet:       has(FeatureRemoteSubnet),
		HostRoute:          has(FeatureHostRoute),
		DSR:                has(FeatureDSR),
		SessionAffinity:    has(FeatureSessionAffinity),
		IPv6DualStack:      has(FeatureIPv6DualStack),
		VxlanPort:          has(FeatureVxlanPort),
		ModifyLoadbalancer: has(FeatureModifyLoadbalancer),
	}
}

// MinimumVersion returns the oldest version from which on every later
// version supports feature (a Feature name), for "needs HNS X or newer"
// messages: 15.5 for ModifyLoadbalancer (15.5–15.x and ≥ 16.0 leave no
// gap). For a feature with a gap that is not the oldest version with it:
// DSR gives 10.2, though 9.3–9.x has DSR too; messages that must name
// every supporting version use SupportedVersions(feature).String()
// ("9.3–9.x or ≥ 10.2").
func MinimumVersion(feature string) (Version, bool) {
	rs := featureRanges[Feature(feature)]
	if len(rs) == 0 {
		return Version{}, false
	}
	min := rs[len(rs)-1].Min
	for i := len(rs) - 2; i >= 0 && adjacent(rs[i].Max, min); i-- {
		min = rs[i].Min
	}
	return min, true
}

// adjacent reports whether no version lies between a and b (a < b): a is
// the last minor of its major and b the first of the next.
func adjacent(a, b Version) bool {
	return a.Minor == math.MaxInt32 && b.Major == a.Major+1 && b.Minor == 0
}
