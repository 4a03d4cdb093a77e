package config

import (
	"fmt"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/nodenet/nodenet/hns"
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
	v.validateOrphanRelease(path, c)
}

// MinSafeOrphanGracePeriod is the shortest cni.orphanGracePeriod that is
// not warned about: a sandbox that takes longer than the period to start
// after its CNI ADD returned would lose its address.
const MinSafeOrphanGracePeriod = time.Minute

func (v *validator) validateOrphanRelease(path *field.Path, c *CNIConfiguration) {
	grace := path.Child("orphanGracePeriod")
	on := true
	if g := c.OrphanGracePeriod; g != nil {
		switch {
		case g.Duration < 0:
			v.err(field.Invalid(grace, g.Duration.String(), "must not be negative (0 turns the release of orphaned addresses off)"))
		case g.Duration == 0:
			on = false
		case g.Duration < MinSafeOrphanGracePeriod:
			v.warn(grace, "%s is shorter than %s: a pod sandbox that takes longer to start after its CNI ADD would lose its address", g.Duration, MinSafeOrphanGracePeriod)
		}
	}
	endpoint := path.Child("runtimeEndpoint")
	switch {
	case c.RuntimeEndpoint == "" && (v.shared || !on):
	case c.RuntimeEndpoint == "":
		v.err(field.Required(endpoint, "the container runtime's CRI endpoint (kubelet's containerRuntimeEndpoint), or set cni.orphanGracePeriod to 0"))
	default:
		if _, err := ParseRuntimeEndpoint(v.target, c.RuntimeEndpoint); err != nil {
			v.err(field.Invalid(endpoint, c.RuntimeEndpoint, err.Error()))
		}
	}
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
