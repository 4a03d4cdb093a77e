package config

import (
	"fmt"
	"github.com/nodenet/nodenet/hns"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// MaxSocketPathLength is the longest unix socket path: sun_path holds 108
// bytes including the terminating NUL, on Linux and on Windows.
const MaxSocketPathLength = 107

func (v *validator) validateCNI() {
	c := &v.cfg.CNI
	path := field.NewPath("cni")
	v.validateAbsPath(path.Child("socketPath"), c.SocketPath)
	if len(c.SocketPath) > MaxSocketPathLength {
		v.err(field.TooLong(path.Child("socketPath"), c.SocketPath, MaxSocketPathLength))
	}
	v.validateAbsPath(path.Child("confDir"), c.ConfDir)
	v.validateAbsPath(path.Child("binDir"), c.BinDir)
	v.validateAbsPath(path.Child("dataDir"), c.DataDir)
	v.validateConflistName(path.Child("conflistName"), c.ConflistName)
}

// validateAbsPath checks an absolute path on the target OS; in a shared config
// it may be unset (each node defaults it for its own OS).
func (v *validator) validateAbsPath(path *field.Path, p string) {
	switch {
	case p == "" && v.shared:
	case p == "":
		v.err(field.Required(path, fmt.Sprintf("an absolute path on %s", v.target)))
	case !isAbsPath(v.target, p):
		v.err(field.Invalid(path, p, fmt.Sprintf("must be an absolute path on %s", v.target)))
	}
}

func (v *validator) validateConflistName(path *field.Path, name string) {
	switch {
	case name == "":
		v.err(field.Required(path, "the conflist's file name, e.g. "+DefaultConflistName))
	case strings.ContainsAny(name, `/\:`) || name == ".conflist":
		v.err(field.Invalid(path, name, "must be a plain file name"))
	case !strings.HasSuffix(name, ".conflist"):
		v.err(field.Invalid(path, name, `must end in ".conflist"`))
	}
}

func (v *validator) validateWindows() {
	w := &v.cfg.Windows
	path := field.NewPath("windows")
	if _, err := hns.ParseVersion(w.HNSVersion); w.HNSVersion != "" && err != nil {
		v.err(field.Invalid(path.Child("hnsVersion"), w.HNSVersion, `must be "major.minor", e.g. "15.4"`))
	}
	if n := w.MaxBackendsPerLoadBalancer; n < 0 || n > hns.MaxBackendsCurrent {
		v.err(field.Invalid(path.Child("maxBackendsPerLoadBalancer"), n,
			fmt.Sprintf("must be 0 (the host's limit) to %d (the most any Windows release takes)", hns.MaxBackendsCurrent)))
	}
}

func (v *validator) validateLinux() {
	c := &v.cfg.Linux.Conntrack
	path := field.NewPath("linux", "conntrack")
	nonNegativeInt := func(name string, n *int32) {
		if n != nil && *n < 0 {
			v.err(field.Invalid(path.Child(name), *n, "must not be negative"))
		}
	}
	nonNegativeDuration := func(name string, d *metav1.Duration) {
		if d != nil && d.Duration < 0 {
			v.err(field.Invalid(path.Child(name), d.Duration.String(), "must not be negative"))
		}
	}
	nonNegativeInt("maxPerCore", c.MaxPerCore)
	nonNegativeInt("min", c.Min)
	nonNegativeDuration("tcpEstablishedTimeout", c.TCPEstablishedTimeout)
	nonNegativeDuration("tcpCloseWaitTimeout", c.TCPCloseWaitTimeout)
	nonNegativeDuration("udpTimeout", c.UDPTimeout)
	nonNegativeDuration("udpStreamTimeout", c.UDPStreamTimeout)
}
