//go:build windows

package hns

import "github.com/Microsoft/hnslib/hcn"

// featureRanges is the version table FeaturesFor uses: on Windows,
// hnslib's own VersionRanges (hcn/hcnglobals.go), so feature support
// follows the library that talks to HNS. mirrorRanges must agree with it
// (TestMirrorMatchesHnslib).
var featureRanges = map[Feature]VersionRanges{
	FeatureRemoteSubnet:       fromHCN(hcn.RemoteSubnetVersion),
	FeatureHostRoute:          fromHCN(hcn.HostRouteVersion),
	FeatureDSR:                fromHCN(hcn.DSRVersion),
	FeatureSessionAffinity:    fromHCN(hcn.SessionAffinityVersion),
	FeatureIPv6DualStack:      fromHCN(hcn.IPv6DualStackVersion),
	FeatureVxlanPort:          fromHCN(hcn.VxlanPortVersion),
	FeatureModifyLoadbalancer: fromHCN(hcn.ModifyLoadbalancerVersion),
}

func fromHCN(rs hcn.VersionRanges) VersionRanges {
	out := make(VersionRanges, 0, len(rs))
	for _, r := range rs {
		out = append(out, VersionRange{
			Min: Version{Major: r.MinVersion.Major, Minor: r.MinVersion.Minor},
			Max: Version{Major: r.MaxVersion.Major, Minor: r.MaxVersion.Minor},
		})
	}
	return out
}
