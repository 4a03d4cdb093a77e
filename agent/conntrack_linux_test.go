package agent

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/nodenet/nodenet/config"
	"github.com/nodenet/nodenet/proxy/conntrack"
)

func TestConntrackSysctls(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  config.ConntrackConfiguration
		want conntrack.Sysctls
	}{
		{
			name: "every field is carried over",
			cfg: config.ConntrackConfiguration{
				MaxPerCore: ptr.To[int32](32768), Min: ptr.To[int32](131072),
				TCPEstablishedTimeout: &metav1.Duration{Duration: 24 * time.Hour},
				TCPCloseWaitTimeout:   &metav1.Duration{Duration: time.Hour},
				UDPTimeout:            &metav1.Duration{Duration: 30 * time.Second},
				UDPStreamTimeout:      &metav1.Duration{Duration: 2 * time.Minute},
			},
			want: conntrack.Sysctls{
				MaxPerCore: 32768, Min: 131072,
				TCPEstablishedTimeout: 24 * time.Hour, TCPCloseWaitTimeout: time.Hour,
				UDPTimeout: 30 * time.Second, UDPStreamTimeout: 2 * time.Minute,
			},
		},
		{
			name: "unset fields leave the kernel alone",
			cfg:  config.ConntrackConfiguration{UDPTimeout: &metav1.Duration{Duration: 30 * time.Second}},
			want: conntrack.Sysctls{UDPTimeout: 30 * time.Second},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, conntrackSysctls(tc.cfg)); diff != "" {
				t.Errorf("conntrackSysctls (-want +got):\n%s", diff)
			}
		})
	}
}
