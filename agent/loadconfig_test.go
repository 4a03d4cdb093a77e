package agent

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const baseConfig = `apiVersion: nodenet.io/v1alpha1
kind: AgentConfiguration
clusterCIDRs: [10.244.0.0/16]
serviceCIDRs: [10.96.0.0/12]
nodeName: node-a
`

func TestNewHonorsConfigHardFail(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		name    string
		extra   string
		wantErr string
	}{
		{
			name:    "an invalid config stops the agent, naming the field",
			extra:   "proxy: {enableDSR: true}\n",
			wantErr: "proxy.enableDSR",
		},
		{
			name:  "with configHardFail false the agent goes on with what loaded",
			extra: "configHardFail: false\nproxy: {enableDSR: true}\n",
		},
		{
			name:    "an undecodable config stops the agent even with configHardFail false",
			extra:   "configHardFail: false\nproxy: [\n",
			wantErr: "config.yaml",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(dir, "config.yaml")
			if err := os.WriteFile(path, []byte(baseConfig+tc.extra), 0o644); err != nil {
				t.Fatal(err)
			}
			a, err := New(Options{ConfigFile: path, Dataplane: DataplaneLinux})
			if tc.wantErr == "" {
				if err != nil {
					t.Fatalf("New: %v", err)
				}
				if !a.Config().Proxy.EnableDSR {
					t.Error("the config the agent runs lost enableDSR")
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("New error %v, want one naming %s", err, tc.wantErr)
			}
		})
	}
}
