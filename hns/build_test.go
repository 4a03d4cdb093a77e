package hns

import (
	"fmt"
	"testing"
)

// The backend limit's boundary on both sides (kubernetes issue 98680:
// 64 before Windows Server 2019 build 17763.2746, 1024 from it on and on
// later releases).
func TestMaxBackendsFollowTheBuild(t *testing.T) {
	for _, tc := range []struct {
		name  string
		build OSBuild
		want  int
	}{
		{"Windows Server 1803 keeps the old limit", OSBuild{17134, 2208}, 64},
		{"Windows Server 2019 as modelled (17763.1432) has 64", BuildWS2019, 64},
		{"Windows Server 2019 one update before the fix has 64", OSBuild{17763, 2745}, 64},
		{"Windows Server 2019 from 17763.2746 has 1024", BuildWS2019BackendFix, 1024},
		{"Windows Server 2019 patched (17763.8146) has 1024", BuildWS2019Patched, 1024},
		{"Windows Server 2022 has 1024", BuildWS2022, 1024},
		{"Windows Server 2025 has 1024", BuildWS2025, 1024},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := MaxBackendsPerLoadBalancer(tc.build); got != tc.want {
				t.Errorf("MaxBackendsPerLoadBalancer(%s) = %d, want %d", tc.build, got, tc.want)
			}
		})
	}
}

func TestBuildForAVersionIsItsRelease(t *testing.T) {
	for _, tc := range []struct {
		version Version
		want    OSBuild
	}{
		{Version{9, 2}, BuildWS2019},
		{VersionWS2019, BuildWS2019},
		{Version{9, 4}, BuildWS2019},
		{VersionWS2019Patched, BuildWS2019Patched},
		{Version{11, 10}, BuildWS2019Patched},
		{VersionWS2022, BuildWS2022},
		{WS2022Range.Max, BuildWS2022},
		{VersionWS2025, BuildWS2025},
		{VersionWS2025Patched, BuildWS2025},
		{Version{16, 0}, BuildWS2025},
	} {
		if got := BuildFor(tc.version); got != tc.want {
			t.Errorf("BuildFor(%s) = %s, want %s", tc.version, got, tc.want)
		}
	}
	for _, r := range Releases {
		if got := BuildFor(r.Version); got != r.Build {
			t.Errorf("%s: BuildFor(%s) = %s, want its own build %s", r.Name, r.Version, got, r.Build)
		}
	}
}

// A simulated host's limit follows its build: an unconfigured Windows
// Server 2019 (9.3) host refuses a 65th backend, the same host on
// 17763.2746 takes it, and so does every newer release.
func TestSimulatorBackendLimitFollowsItsBuild(t *testing.T) {
	for _, tc := range []struct {
		name     string
		opts     SimulatorOptions
		accepted int // the most backends taken
	}{
		{"Windows Server 2019 (9.3) takes 64", SimulatorOptions{Version: VersionWS2019}, 64},
		{"Windows Server 2019 (9.3) on 17763.2746 takes more", SimulatorOptions{Version: VersionWS2019, OSBuild: BuildWS2019BackendFix}, 66},
		{"Windows Server 2019 patched (9.5) takes more", SimulatorOptions{Version: VersionWS2019Patched}, 66},
		{"the default host takes more", SimulatorOptions{}, 66},
		{"an explicit limit wins over the build", SimulatorOptions{OSBuild: BuildWS2025, MaxBackendsPerLoadBalancer: 10}, 10},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newTestSimulator(t, tc.opts)
			n := mustNetwork(t, s, overlayNetwork("nodenet"))
			var ids []string
			for i := 0; i < 66; i++ {
				ids = append(ids, mustEndpoint(t, s, localEndpoint(n.ID, fmt.Sprintf("10.244.1.%d", 10+i))).ID)
			}
			got := 0
			for _, k := range []int{tc.accepted, tc.accepted + 1} {
				if k > len(ids) {
					continue
				}
				lb, err := s.CreateLoadBalancer(ctx, clusterIPLB(clusterIP, 80, 8080, ids[:k]...))
				if err != nil {
					if !IsInvalid(err) {
						t.Errorf("%d backends: %v, want an invalid-argument error", k, err)
					}
					continue
				}
				got = k
				if err := s.DeleteLoadBalancer(ctx, lb.ID); err != nil {
					t.Fatal(err)
				}
			}
			if got != tc.accepted {
				t.Errorf("took %d backends, want at most %d taken", got, tc.accepted)
			}
		})
	}
	if b, _ := NewSimulator(SimulatorOptions{Version: VersionWS2022}).OSBuild(ctx); b != BuildWS2022 {
		t.Errorf("a Windows Server 2022 simulator reports build %s", b)
	}
}
