package conntrack

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/klog/v2/ktesting"
)

func TestApplySysctls(t *testing.T) {
	for _, tc := range []struct {
		name string
		s    Sysctls
		have map[string]string
		want map[string]string
	}{
		{
			name: "the table grows to maxPerCore × CPUs or min, and timeouts are set",
			s:    Sysctls{MaxPerCore: 1, Min: 131072, TCPEstablishedTimeout: 24 * time.Hour, UDPTimeout: 30 * time.Second},
			have: map[string]string{"nf_conntrack_max": "65536\n", "nf_conntrack_tcp_timeout_established": "432000\n", "nf_conntrack_udp_timeout": "30\n"},
			want: map[string]string{"nf_conntrack_max": "131072", "nf_conntrack_tcp_timeout_established": "86400", "nf_conntrack_udp_timeout": "30\n"},
		},
		{
			name: "maxPerCore × CPUs wins over a smaller min",
			s:    Sysctls{MaxPerCore: 32768, Min: 131072, CPUs: 8},
			have: map[string]string{"nf_conntrack_max": "65536\n"},
			want: map[string]string{"nf_conntrack_max": "262144"},
		},
		{
			name: "a bigger table the operator set stays",
			s:    Sysctls{MaxPerCore: 1, Min: 131072},
			have: map[string]string{"nf_conntrack_max": "1048576\n"},
			want: map[string]string{"nf_conntrack_max": "1048576\n"},
		},
		{
			name: "maxPerCore 0 leaves the table size alone",
			s:    Sysctls{MaxPerCore: 0, Min: 131072},
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
			if err := ApplySysctls(tc.s, dir, ktesting.NewLogger(t, ktesting.NewConfig())); err != nil {
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

func TestApplySysctlsReportsWhatItCannotRead(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "nf_conntrack_udp_timeout"), []byte("soon\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	err := ApplySysctls(Sysctls{MaxPerCore: 1, UDPTimeout: time.Minute}, dir, ktesting.NewLogger(t, ktesting.NewConfig()))
	if err == nil {
		t.Fatal("ApplySysctls with a missing and a garbled sysctl returned nil")
	}
	for _, want := range []string{"nf_conntrack_max", `holds "soon\n"`} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %q", err, want)
		}
	}
}
