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
		return Version{}, fmt.Errorf("hns version %q: want major.minor, e.g. 15.4", s)
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

// Well-known HNS versions.
var (
	// VersionWS2019 is Windows Server 2019 (1809) as shipped: DSR, no
	// session affinity.
	VersionWS2019 = Version{Major: 10, Minor: 4}
	// VersionWS2022 is Windows Server 2022 with current updates: everything
	// nodenet uses, including in-place load-balancer updates.
	VersionWS2022 = Version{Major: 15, Minor: 4}
)

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

type versionRange struct{ min, max Version }

var anyAfter = Version{Major: math.MaxInt32, Minor: math.MaxInt32}

// featureRanges are the HNS versions that support each feature, as the
// Windows HNS team publishes them (the same table hcn's feature check uses).
var featureRanges = map[string][]versionRange{
	"RemoteSubnet":       {{Version{9, 2}, anyAfter}},
	"HostRoute":          {{Version{9, 2}, anyAfter}},
	"DSR":                {{Version{9, 3}, Version{9, math.MaxInt32}}, {Version{10, 2}, anyAfter}},
	"SessionAffinity":    {{Version{12, 0}, anyAfter}},
	"IPv6DualStack":      {{Version{11, 10}, anyAfter}},
	"VxlanPort":          {{Version{10, 3}, anyAfter}},
	"ModifyLoadbalancer": {{Version{15, 4}, anyAfter}},
}

func supported(v Version, feature string) bool {
	for _, r := range featureRanges[feature] {
		if !v.Less(r.min) && !r.max.Less(v) {
			return true
		}
	}
	return false
}

// FeaturesFor returns what an HNS of version v supports.
func FeaturesFor(v Version) Features {
	return Features{
		RemoteSubnet:       supported(v, "RemoteSubnet"),
		HostRoute:          supported(v, "HostRoute"),
		DSR:                supported(v, "DSR"),
		SessionAffinity:    supported(v, "SessionAffinity"),
		IPv6DualStack:      supported(v, "IPv6DualStack"),
		VxlanPort:          supported(v, "VxlanPort"),
		ModifyLoadbalancer: supported(v, "ModifyLoadbalancer"),
	}
}

// MinimumVersion returns the oldest version that supports feature (one of
// the Features field names), for error messages.
func MinimumVersion(feature string) (Version, bool) {
	rs := featureRanges[feature]
	if len(rs) == 0 {
		return Version{}, false
	}
	return rs[len(rs)-1].min, true
}
