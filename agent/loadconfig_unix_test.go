//go:build !windows

package agent

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nodenet/nodenet/config"
)

// The simulator's path cases are written for a non-Windows host.

func TestLoadConfig(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		name      string
		dataplane Dataplane
		extra     string
		// wantFields are the fields the errors name, in order.
		wantFields []string
		check      func(t *testing.T, cfg *config.AgentConfiguration)
	}{
		{
			name:      "the simulator takes Windows rules for the network but this host's default paths",
			dataplane: DataplaneSim,
			extra:     "proxy: {enableDSR: true}\n",
			check: func(t *testing.T, cfg *config.AgentConfiguration) {
				if cfg.CNI.SocketPath != "/var/run/nodenet/cni.sock" || cfg.CNI.ConfDir != "/etc/cni/net.d" {
					t.Errorf("cni = %+v, want the Linux defaults", cfg.CNI)
				}
			},
		},
		{
			name:      "the simulator keeps paths set for this host",
			dataplane: DataplaneSim,
			extra:     "cni: {socketPath: /run/sim/cni.sock, dataDir: /var/lib/sim}\n",
			check: func(t *testing.T, cfg *config.AgentConfiguration) {
				if cfg.CNI.SocketPath != "/run/sim/cni.sock" || cfg.CNI.DataDir != "/var/lib/sim" {
					t.Errorf("cni = %+v", cfg.CNI)
				}
			},
		},
		{
			name:       "the simulator applies Windows' VNI floor",
			dataplane:  DataplaneSim,
			extra:      "network: {vxlan: {vni: 1}}\n",
			wantFields: []string{"network.vxlan.vni"},
		},
		{
			name:       "the simulator refuses DSR on an HNS version without it",
			dataplane:  DataplaneSim,
			extra:      "proxy: {enableDSR: true}\nwindows: {hnsVersion: \"9.0\"}\n",
			wantFields: []string{"proxy.enableDSR"},
		},
		{
			name:       "the Linux dataplane refuses DSR",
			dataplane:  DataplaneLinux,
			extra:      "proxy: {enableDSR: true}\n",
			wantFields: []string{"proxy.enableDSR"},
		},
		{
			name:       "relative paths are errors on the Linux dataplane",
			dataplane:  DataplaneLinux,
			extra:      "cni: {socketPath: run/cni.sock}\n",
			wantFields: []string{"cni.socketPath"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(dir, "config.yaml")
			if err := os.WriteFile(path, []byte(baseConfig+tc.extra), 0o644); err != nil {
				t.Fatal(err)
			}
			loaded, err := LoadConfig(path, tc.dataplane, nil, nil)
			if err != nil {
				t.Fatal(err)
			}
			var fields []string
			for _, e := range loaded.Errors {
				fields = append(fields, e.Field)
			}
			if strings.Join(fields, ",") != strings.Join(tc.wantFields, ",") {
				t.Errorf("errors %v, want errors on %v", loaded.Errors, tc.wantFields)
			}
			if tc.check != nil {
				tc.check(t, loaded.Config)
			}
		})
	}
}
