// Package version is the build's version string, the one the agent
// reports (nodenetctl status) and the image is labelled with.
package version

import "runtime/debug"

// linked is set at link time by `make image` and `make build`:
//
//	-ldflags "-X github.com/nodenet/nodenet/internal/version.linked=v0.3.0-12-gabcdef0"
//
// so two builds of different commits report different versions even
// when Go records no module version (a build from a work tree).
var linked string

// Get returns the linked version, else the main module's version, else
// the VCS revision Go recorded ("+dirty" when the tree was modified),
// else "devel".
func Get() string {
	if linked != "" {
		return linked
	}
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "unknown"
	}
	if v := bi.Main.Version; v != "" && v != "(devel)" {
		return v
	}
	var rev string
	var dirty bool
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			dirty = s.Value == "true"
		}
	}
	if rev == "" {
		return "devel"
	}
	if dirty {
		rev += "+dirty"
	}
	return rev
}

// LinkerFlag is the -X flag that sets the version to v.
func LinkerFlag(v string) string {
	return "-X github.com/nodenet/nodenet/internal/version.linked=" + v
}
