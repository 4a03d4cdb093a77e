package agent

import (
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodenet/nodenet/config"
	"github.com/nodenet/nodenet/proxy/conntrack"
)

// conntrackSysctls is linux.conntrack as the kernel settings
// proxy/conntrack applies; unset fields stay zero, which leaves the
// kernel's value alone.
func conntrackSysctls(c config.ConntrackConfiguration) conntrack.Sysctls {
	deref := func(v *int32) int64 {
		if v == nil {
			return 0
		}
		return int64(*v)
	}
	duration := func(d *metav1.Duration) time.Duration {
		if d == nil {
			return 0
		}
		return d.Duration
	}
	return conntrack.Sysctls{
		MaxPerCore:            deref(c.MaxPerCore),
		Min:                   deref(c.Min),
		TCPEstablishedTimeout: duration(c.TCPEstablishedTimeout),
		TCPCloseWaitTimeout:   duration(c.TCPCloseWaitTimeout),
		UDPTimeout:            duration(c.UDPTimeout),
		UDPStreamTimeout:      duration(c.UDPStreamTimeout),
	}
}
