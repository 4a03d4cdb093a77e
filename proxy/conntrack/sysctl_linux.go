package conntrack

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"

	"k8s.io/klog/v2"
)

// ProcSysNetfilter is where the kernel keeps the conntrack sysctls.
const ProcSysNetfilter = "/proc/sys/net/netfilter"

// Sysctls are the conntrack table settings the proxy asks of the kernel,
// as kube-proxy sets them. A zero field leaves the kernel's value alone.
type Sysctls struct {
	// MaxPerCore sizes the table at this many entries per CPU; 0 leaves
	// the size as is (and ignores Min).
	MaxPerCore int64
	// Min is the least table size, whatever MaxPerCore gives.
	Min int64
	// Idle timeouts of established and CLOSE_WAIT TCP entries, and of
	// unreplied and assured UDP entries; whole seconds are written.
	TCPEstablishedTimeout time.Duration
	TCPCloseWaitTimeout   time.Duration
	UDPTimeout            time.Duration
	UDPStreamTimeout      time.Duration
	// CPUs multiplies MaxPerCore. Default: runtime.NumCPU().
	CPUs int
}

// sysctlValue is one sysctl file's wanted value. raise marks those only
// ever raised (the table size: a bigger one set by the operator stays).
type sysctlValue struct {
	name  string
	value int64
	raise bool
}

func (s Sysctls) values() []sysctlValue {
	var out []sysctlValue
	if s.MaxPerCore > 0 {
		cpus := s.CPUs
		if cpus <= 0 {
			cpus = runtime.NumCPU()
		}
		out = append(out, sysctlValue{name: "nf_conntrack_max", value: max(s.MaxPerCore*int64(cpus), s.Min), raise: true})
	}
	for _, t := range []struct {
		name string
		d    time.Duration
	}{
		{"nf_conntrack_tcp_timeout_established", s.TCPEstablishedTimeout},
		{"nf_conntrack_tcp_timeout_close_wait", s.TCPCloseWaitTimeout},
		{"nf_conntrack_udp_timeout", s.UDPTimeout},
		{"nf_conntrack_udp_timeout_stream", s.UDPStreamTimeout},
	} {
		if t.d > 0 {
			out = append(out, sysctlValue{name: t.name, value: int64(t.d / time.Second)})
		}
	}
	return out
}

// ApplySysctls sets s under dir (ProcSysNetfilter, or a copy in tests),
// writing only the files that differ, so a restart writes nothing.
// Failures are returned joined; the proxy works without them (a network
// namespace may not own the table size).
func ApplySysctls(s Sysctls, dir string, log klog.Logger) error {
	var errs []error
	for _, v := range s.values() {
		path := filepath.Join(dir, v.name)
		data, err := os.ReadFile(path)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		have, err := strconv.ParseInt(strings.TrimSpace(string(data)), 10, 64)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s holds %q", path, data))
			continue
		}
		if have == v.value || (v.raise && have > v.value) {
			continue
		}
		if err := os.WriteFile(path, []byte(strconv.FormatInt(v.value, 10)), 0o644); err != nil {
			errs = append(errs, fmt.Errorf("set %s to %d: %w", v.name, v.value, err))
			continue
		}
		log.Info("Set a conntrack sysctl", "sysctl", v.name, "was", have, "now", v.value)
	}
	return errors.Join(errs...)
}
