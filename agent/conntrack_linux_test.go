package agent

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2/ktesting"
	"k8s.io/utils/ptr"

	"github.com/nodenet/nodenet/config"
)

func TestApplyConntrack(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  config.ConntrackConfiguration
		have map[string]string
		want map[string]string
	}{
		{
			name: "the table grows to maxPerCore × CPUs or min, and timeouts are set",
			cfg: config.ConntrackConfiguration{
				MaxPerCore: ptr.To[int32](1), Min: ptr.To[int32](131072),
				TCPEstablishedTimeout: &metav1.Duration{Duration: 24 * time.Hour},
				UDPTimeout:            &metav1.Duration{Duration: 30 * time.Second},
			},
			have: map[string]string{"nf_conntrack_max": "65536\n", "nf_conntrack_tcp_timeout_established": "432000\n", "nf_conntrack_udp_timeout": "30\n"},
			want: map[string]string{"nf_conntrack_max": "131072", "nf_conntrack_tcp_timeout_established": "86400", "nf_conntrack_udp_timeout": "30\n"},
		},
		{
			name: "a bigger table the operator set stays",
			cfg:  config.ConntrackConfiguration{MaxPerCore: ptr.To[int32](1), Min: ptr.To[int32](131072)},
			have: map[string]string{"nf_conntrack_max": "1048576\n"},
			want: map[string]string{"nf_conntrack_max": "1048576\n"},
		},
		{
			name: "maxPerCore 0 leaves the table size alone",
			cfg:  config.ConntrackConfiguration{MaxPerCore: ptr.To[int32](0), Min: ptr.To[int32](131072)},
			have: map[string]string{"nf_conntrack_max": "65536\n"},
			want: map[string]string{"nf_conntrack_max": "65536\n"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			for name, v := range tc.have {
				if err := os.WriteFile(filepath.Join(dir, name), []byte(v), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			cfg := &config.AgentConfiguration{}
			cfg.Linux.Conntrack = tc.cfg
			if err := applyConntrack(cfg, dir, ktesting.NewLogger(t, ktesting.NewConfig())); err != nil {
				t.Fatal(err)
			}
			for name, want := range tc.want {
				got, _ := os.ReadFile(filepath.Join(dir, name))
				if string(got) != want {
					t.Errorf("%s = %q, want %q", name, got, want)
				}
			}
		})
	}
}
