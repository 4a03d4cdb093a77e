package agent

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"

	"github.com/nodenet/nodenet/config"
)

// procSysNetfilter is where the conntrack sysctls live.
const procSysNetfilter = "/proc/sys/net/netfilter"

// conntrackSysctls are the values linux.conntrack asks for, by sysctl
// file name, as kube-proxy sets them. raise marks those only ever raised
// (the table size: a bigger one set by the operator stays).
type conntrackSysctl struct {
	name  string
	value int64
	raise bool
}

func conntrackSysctls(c config.ConntrackConfiguration, cpus int) []conntrackSysctl {
	var out []conntrackSysctl
	if c.MaxPerCore != nil && *c.MaxPerCore > 0 {
		limit := int64(*c.MaxPerCore) * int64(cpus)
		if c.Min != nil && int64(*c.Min) > limit {
			limit = int64(*c.Min)
		}
		out = append(out, conntrackSysctl{name: "nf_conntrack_max", value: limit, raise: true})
	}
	for _, t := range []struct {
		name string
		d    *metav1.Duration
	}{
		{"nf_conntrack_tcp_timeout_established", c.TCPEstablishedTimeout},
		{"nf_conntrack_tcp_timeout_close_wait", c.TCPCloseWaitTimeout},
		{"nf_conntrack_udp_timeout", c.UDPTimeout},
		{"nf_conntrack_udp_timeout_stream", c.UDPStreamTimeout},
	} {
		if t.d != nil && t.d.Duration > 0 {
			out = append(out, conntrackSysctl{name: t.name, value: int64(t.d.Duration / time.Second)})
		}
	}
	return out
}

// applyConntrack sets the conntrack sysctls of cfg under dir (the
// netfilter sysctl directory), writing only those that differ, so a
// restart writes nothing. Failures are returned joined; the proxy works
// without them (a network namespace may not own the table size).
func applyConntrack(cfg *config.AgentConfiguration, dir string, log klog.Logger) error {
	var errs []error
	for _, s := range conntrackSysctls(cfg.Linux.Conntrack, runtime.NumCPU()) {
		path := filepath.Join(dir, s.name)
		data, err := os.ReadFile(path)
		if err != nil {
			errs = append(errs, fmt.Errorf("linux.conntrack: %w", err))
			continue
		}
		have, err := strconv.ParseInt(strings.TrimSpace(string(data)), 10, 64)
		if err != nil {
			errs = append(errs, fmt.Errorf("linux.conntrack: %s holds %q", path, data))
			continue
		}
		if have == s.value || (s.raise && have > s.value) {
			continue
		}
		if err := os.WriteFile(path, []byte(strconv.FormatInt(s.value, 10)), 0o644); err != nil {
			errs = append(errs, fmt.Errorf("linux.conntrack: set %s to %d: %w", s.name, s.value, err))
			continue
		}
		log.Info("Set a conntrack sysctl", "sysctl", s.name, "was", have, "now", s.value)
	}
	return errors.Join(errs...)
}
