package hns

import (
	"reflect"
	"testing"
)

// The version table's boundaries, each on both sides: the ranges come from
// hnslib's hcn/hcnglobals.go (TestMirrorMatchesHnslib keeps the copy
// equal), the releases from the reports cited at the Version constants.
func TestFeatureRangeBoundaries(t *testing.T) {
	cases := []struct {
		feature Feature
		version Version
		want    bool
	}{
		{FeatureRemoteSubnet, Version{9, 1}, false},
		{FeatureRemoteSubnet, Version{9, 2}, true},
		{FeatureHostRoute, Version{9, 1}, false},
		{FeatureHostRoute, Version{9, 2}, true},
		{FeatureDSR, Version{9, 2}, false},
		{FeatureDSR, Version{9, 3}, true},
		{FeatureDSR, Version{9, 99}, true},
		{FeatureDSR, Version{10, 0}, false},
		{FeatureDSR, Version{10, 1}, false},
		{FeatureDSR, Version{10, 2}, true},
		{FeatureVxlanPort, Version{10, 2}, false},
		{FeatureVxlanPort, Version{10, 3}, true},
		{FeatureIPv6DualStack, Version{11, 9}, false},
		{FeatureIPv6DualStack, Version{11, 10}, true},
		{FeatureSessionAffinity, Version{11, 99}, false},
		{FeatureSessionAffinity, Version{12, 0}, true},
		{FeatureModifyLoadbalancer, Version{15, 3}, false},
		{FeatureModifyLoadbalancer, Version{15, 4}, false},
		{FeatureModifyLoadbalancer, Version{15, 5}, true},
		{FeatureModifyLoadbalancer, Version{15, 99}, true},
		{FeatureModifyLoadbalancer, Version{16, 0}, true},
	}
	for _, tc := range cases {
		verb := map[bool]string{true: "has", false: "lacks"}[tc.want]
		t.Run("HNS "+tc.version.String()+" "+verb+" "+string(tc.feature), func(t *testing.T) {
			if got := FeaturesFor(tc.version).Has(tc.feature); got != tc.want {
				t.Errorf("FeaturesFor(%s).Has(%s) = %v, want %v", tc.version, tc.feature, got, tc.want)
			}
		})
	}
}

func TestWindowsReleases(t *testing.T) {
	all := Features{RemoteSubnet: true, HostRoute: true, DSR: true, SessionAffinity: true, IPv6DualStack: true, VxlanPort: true, ModifyLoadbalancer: true}
	noModify := all
	noModify.ModifyLoadbalancer = false
	ws2019 := Features{RemoteSubnet: true, HostRoute: true, DSR: true}
	cases := []struct {
		name    string
		version Version
		want    Features
	}{
		{"Windows Server 2019 as shipped (9.3) has DSR and nothing newer", VersionWS2019, ws2019},
		{"Windows Server 2019 patched (9.5) has DSR and nothing newer", VersionWS2019Patched, ws2019},
		{"Windows Server 2022 has all but in-place update", VersionWS2022, noModify},
		{"Windows Server 2025 on 15.4 has all but in-place update (its update keeps old endpoints)", VersionWS2025, noModify},
		{"Windows Server 2025 patched (15.5) has everything", VersionWS2025Patched, all},
		{"the simulator's default host has everything", VersionDefault, all},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := FeaturesFor(tc.version); got != tc.want {
				t.Errorf("FeaturesFor(%s) = %+v, want %+v", tc.version, got, tc.want)
			}
		})
	}
}

// Windows Server 2022 is modelled as a range (see VersionWS2022): that is
// only sound while every version in it means the same to nodenet.
func TestWS2022RangeIsOneFeatureSet(t *testing.T) {
	want := FeaturesFor(WS2022Range.Min)
	for major := WS2022Range.Min.Major; major <= WS2022Range.Max.Major; major++ {
		for minor := 0; minor <= 20; minor++ {
			v := Version{major, minor}
			if !WS2022Range.Contains(v) {
				continue
			}
			if got := FeaturesFor(v); got != want {
				t.Errorf("HNS %s in the Windows Server 2022 range: %+v, want %+v as at %s", v, got, want, WS2022Range.Min)
			}
		}
	}
	if !VersionWS2025.Less(WS2022Range.Max) && WS2022Range.Contains(VersionWS2025) {
		t.Errorf("the Windows Server 2022 range %v reaches Windows Server 2025's %s", WS2022Range, VersionWS2025)
	}
}

func TestSupportedVersionsReadsAsTheRanges(t *testing.T) {
	cases := map[Feature]string{
		FeatureDSR:                "9.3–9.x or ≥ 10.2",
		FeatureSessionAffinity:    "≥ 12.0",
		FeatureIPv6DualStack:      "≥ 11.10",
		FeatureVxlanPort:          "≥ 10.3",
		FeatureModifyLoadbalancer: "15.5–15.x or ≥ 16.0",
	}
	for f, want := range cases {
		if got := SupportedVersions(f).String(); got != want {
			t.Errorf("SupportedVersions(%s) = %q, want %q", f, got, want)
		}
	}
	if got := (VersionRanges{WS2022Range}).String(); got != "12.0–15.3" {
		t.Errorf("a closed range reads %q", got)
	}
	for f, want := range map[Feature]Version{
		FeatureModifyLoadbalancer: {15, 5}, // 15.5–15.x and ≥ 16.0 join up
		FeatureDSR:                {10, 2}, // 10.0 and 10.1 lack it
		FeatureSessionAffinity:    {12, 0},
	} {
		if v, _ := MinimumVersion(string(f)); v != want {
			t.Errorf("MinimumVersion(%s) = %s, want %s", f, v, want)
		}
	}
}

// Features.Has and AllFeatures cover every field of Features.
func TestAllFeaturesNameEveryField(t *testing.T) {
	typ := reflect.TypeOf(Features{})
	if typ.NumField() != len(AllFeatures) {
		t.Fatalf("Features has %d fields, AllFeatures %d", typ.NumField(), len(AllFeatures))
	}
	for i, f := range AllFeatures {
		if typ.Field(i).Name != string(f) {
			t.Errorf("AllFeatures[%d] = %s, Features field %d is %s", i, f, i, typ.Field(i).Name)
		}
		var fs Features
		reflect.ValueOf(&fs).Elem().Field(i).SetBool(true)
		if !fs.Has(f) {
			t.Errorf("Features{%s: true}.Has(%s) = false", f, f)
		}
	}
}
