//go:build windows

package hns

import (
	"math"
	"testing"

	"github.com/Microsoft/hnslib/hcn"
)

// hnslibRanges names hnslib's VersionRanges for each Feature, straight
// from hcn/hcnglobals.go.
var hnslibRanges = map[Feature]hcn.VersionRanges{
	FeatureRemoteSubnet:       hcn.RemoteSubnetVersion,
	FeatureHostRoute:          hcn.HostRouteVersion,
	FeatureDSR:                hcn.DSRVersion,
	FeatureSessionAffinity:    hcn.SessionAffinityVersion,
	FeatureIPv6DualStack:      hcn.IPv6DualStackVersion,
	FeatureVxlanPort:          hcn.VxlanPortVersion,
	FeatureModifyLoadbalancer: hcn.ModifyLoadbalancerVersion,
}

// hnslibSupports is hnslib's own check (isFeatureSupported and
// isFeatureInRange in hcn/hcnsupport.go, unexported there), so the test
// does not lean on our VersionRanges.Contains to judge itself.
func hnslibSupports(v hcn.Version, rs hcn.VersionRanges) bool {
	for _, r := range rs {
		in := true
		switch {
		case v.Major < r.MinVersion.Major, v.Major > r.MaxVersion.Major:
			in = false
		case v.Major == r.MinVersion.Major && v.Minor < r.MinVersion.Minor:
			in = false
		case v.Major == r.MaxVersion.Major && v.Minor > r.MaxVersion.Minor:
			in = false
		}
		if in {
			return true
		}
	}
	return false
}

// versionGrid is every major 0–20 with minors 0–20 and the largest minor,
// plus the largest version: every boundary hnslib's table has today, and
// room for the next ones.
func versionGrid() []Version {
	var out []Version
	for major := 0; major <= 20; major++ {
		for minor := 0; minor <= 20; minor++ {
			out = append(out, Version{major, minor})
		}
		out = append(out, Version{major, math.MaxInt32})
	}
	return append(out, Version{math.MaxInt32, math.MaxInt32})
}

// TestMirrorMatchesHnslib keeps features.go's copy of hnslib's table (what
// the simulator uses off Windows) equal to hnslib's: for every feature, at
// every version of the grid, both say the same.
func TestMirrorMatchesHnslib(t *testing.T) {
	for _, f := range AllFeatures {
		lib, ok := hnslibRanges[f]
		if !ok {
			t.Fatalf("feature %s has no hnslib range in this test", f)
		}
		t.Run(string(f)+" is supported where hnslib says so", func(t *testing.T) {
			for _, v := range versionGrid() {
				want := hnslibSupports(hcn.Version{Major: v.Major, Minor: v.Minor}, lib)
				if got := mirrorRanges[f].Contains(v); got != want {
					t.Errorf("HNS %s: mirror says %v, hnslib says %v", v, got, want)
				}
				if got := FeaturesFor(v).Has(f); got != want {
					t.Errorf("HNS %s: FeaturesFor says %v, hnslib says %v", v, got, want)
				}
			}
		})
	}
	if len(mirrorRanges) != len(AllFeatures) {
		t.Errorf("the mirror has %d features, AllFeatures %d", len(mirrorRanges), len(AllFeatures))
	}
}

// TestMinV2APIIsHnslibs keeps NewClient's v2 API check equal to hnslib's
// V2ApiSupport range.
func TestMinV2APIIsHnslibs(t *testing.T) {
	for _, v := range versionGrid() {
		want := hnslibSupports(hcn.Version{Major: v.Major, Minor: v.Minor}, hcn.V2ApiSupport)
		if got := !v.Less(minV2API); got != want {
			t.Errorf("HNS %s: NewClient says v2 %v, hnslib says %v", v, got, want)
		}
	}
}
