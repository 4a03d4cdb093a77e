package hns

import "fmt"

// OSBuild is the Windows build a host runs, as Microsoft writes it ("OS
// build 17763.2746"): the build number (RtlGetVersion's BuildNumber) and
// the update build revision (the registry's UBR, which each cumulative
// update raises).
type OSBuild struct {
	Number   int
	Revision int
}

func (b OSBuild) String() string { return fmt.Sprintf("%d.%d", b.Number, b.Revision) }

// Less reports whether b is older than o.
func (b OSBuild) Less(o OSBuild) bool {
	return b.Number < o.Number || (b.Number == o.Number && b.Revision < o.Revision)
}

// Builds of the Windows Server releases nodenet models, next to their HNS
// versions (features.go).
var (
	// BuildWS2019 is the Windows Server 2019 (1809) build modelled for
	// VersionWS2019: 17763.1432, the first with DSR ("OS build 17763.1432
	// or newer includes DSR support", projectcalico/node PR 1015; the
	// 2020 update of microsoft/Windows-Containers issue 19), before the
	// backend-limit fix.
	BuildWS2019 = OSBuild{Number: 17763, Revision: 1432}
	// BuildWS2019BackendFix is the first Windows Server 2019 build whose
	// load balancers take 1024 backends instead of 64 (kubernetes issue
	// 98680).
	BuildWS2019BackendFix = OSBuild{Number: 17763, Revision: 2746}
	// BuildWS2019Patched is the build of VersionWS2019Patched's report:
	// 17763.8146 with HNS 9.5 (kubernetes PR 137530's thread).
	BuildWS2019Patched = OSBuild{Number: 17763, Revision: 8146}
	// BuildWS2022 is Windows Server 2022 (build 20348); the revision is
	// not modelled.
	BuildWS2022 = OSBuild{Number: 20348}
	// BuildWS2025 is Windows Server 2025 (build 26100); the revision is
	// not modelled (the ModifyLoadBalancer fix shows in the HNS version,
	// 15.4 to 15.5, not here).
	BuildWS2025 = OSBuild{Number: 26100}
)

// Backends per HNS load balancer (kubernetes issue 98680: more fail with
// "invalid number of destinations", 0x80070057).
const (
	// MaxBackendsOld is the limit before Windows Server 2019 build
	// 17763.2746.
	MaxBackendsOld = 64
	// MaxBackendsCurrent is the limit from that build on, and on every
	// later release.
	MaxBackendsCurrent = 1024
)

// MaxBackendsPerLoadBalancer returns how many backends one load balancer
// may have on a host of build b: 64 before Windows Server 2019 build
// 17763.2746, 1024 from that build on and on every later release
// (kubernetes issue 98680). Builds older than Windows Server 2019 are
// given the old limit.
func MaxBackendsPerLoadBalancer(b OSBuild) int {
	if b.Less(BuildWS2019BackendFix) {
		return MaxBackendsOld
	}
	return MaxBackendsCurrent
}

// Release is a Windows Server release as nodenet models it: the HNS
// version it reports and its build (each cited at its constant).
type Release struct {
	Name    string
	Version Version
	Build   OSBuild
}

// Releases are the Windows Server releases nodenet models, oldest first;
// the version matrix tests and docs/hns-versions.md (with each row's
// source) use the same list.
var Releases = []Release{
	{"Windows Server 2019", VersionWS2019, BuildWS2019},
	{"Windows Server 2019, patched", VersionWS2019Patched, BuildWS2019Patched},
	{"Windows Server 2022", VersionWS2022, BuildWS2022},
	{"Windows Server 2025", VersionWS2025, BuildWS2025},
	{"Windows Server 2025, patched", VersionWS2025Patched, BuildWS2025},
}

// BuildFor returns the build a simulated host reporting HNS v is given
// when none is configured: that of the newest modelled release whose HNS
// version is not newer than v (the oldest release's for older versions).
// Only the build's side of 17763.2746 matters to nodenet (the backend
// limit), and every HNS version from 9.5 on runs on a build past it.
func BuildFor(v Version) OSBuild {
	b := Releases[0].Build
	for _, r := range Releases {
		if !v.Less(r.Version) {
			b = r.Build
		}
	}
	return b
}
