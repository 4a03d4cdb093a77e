package main

// Address plan: node-a has InternalIP 192.168.1.11 and pod CIDR
// 10.244.1.0/24 (gateway .1, source VIP .2) in cluster CIDR 10.244.0.0/16;
// services come from 10.96.0.0/12 (web: 10.96.0.10:80 → 10.244.1.10:8080
// on node-a and 10.244.2.10:8080 on node-b).

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nodenet/nodenet/config"
)

// TestMain lets the process test run this test binary as nodenet-agent.
func TestMain(m *testing.M) {
	if os.Getenv(runAsAgentEnv) == "1" {
		code := run(os.Args[1:], os.Stdout, os.Stderr)
		os.Exit(code)
	}
	os.Exit(m.Run())
}

// runAsAgentEnv makes the test binary run main's run instead of tests.
const runAsAgentEnv = "NODENET_AGENT_TEST_RUN_AS_AGENT"

func writeFile(t *testing.T, dir, name, content string) string {
	t.Helper()
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestCommandLine(t *testing.T) {
	dir := t.TempDir()
	flannel := writeFile(t, dir, "net-conf.json", `{"Network": "10.244.0.0/16", "Backend": {"Type": "vxlan", "VNI": 4096}}`)
	badField := writeFile(t, dir, "bad.yaml", `apiVersion: nodenet.io/v1alpha1
kind: AgentConfiguration
clusterCIDRs: [10.244.0.0/16]
serviceCIDRs: [10.96.0.0/12]
nodeName: node-a
network:
  vxlan: {vni: 100}
`)
	unknownField := writeFile(t, dir, "unknown.yaml", `apiVersion: nodenet.io/v1alpha1
kind: AgentConfiguration
clusterCIDRs: [10.244.0.0/16]
nodeName: node-a
proxy: {enableDSRR: true}
`)
	dsrOnLinux := writeFile(t, dir, "dsr.yaml", `apiVersion: nodenet.io/v1alpha1
kind: AgentConfiguration
clusterCIDRs: [10.244.0.0/16]
nodeName: node-a
proxy: {enableDSR: true}
`)
	oldHNS := writeFile(t, dir, "old-hns.yaml", `apiVersion: nodenet.io/v1alpha1
kind: AgentConfiguration
clusterCIDRs: [10.244.0.0/16]
nodeName: node-a
proxy: {enableDSR: true}
windows: {hnsVersion: "9.0"}
`)
	for _, tc := range []struct {
		name     string
		args     []string
		wantCode int
		// wantStderr are substrings the error output must hold.
		wantStderr []string
	}{
		{
			name:       "no --config is a usage error",
			args:       nil,
			wantCode:   exitUsage,
			wantStderr: []string{"--config is required"},
		},
		{
			name:       "an unknown flag is a usage error",
			args:       []string{"--config", flannel, "--no-such-flag"},
			wantCode:   exitUsage,
			wantStderr: []string{"no-such-flag"},
		},
		{
			name:       "an unknown dataplane is a usage error",
			args:       []string{"--config", flannel, "--dataplane", "ipvs"},
			wantCode:   exitUsage,
			wantStderr: []string{`unknown dataplane "ipvs"`},
		},
		{
			name:       "an --apiserver that is not https://host[:port] is a usage error",
			args:       []string{"--config", flannel, "--apiserver", "http://cp.example:8080"},
			wantCode:   exitUsage,
			wantStderr: []string{"--apiserver", "want https://host[:port]"},
		},
		{
			name:       "an invalid --source fails",
			args:       []string{"--config", flannel, "--source", "etcd"},
			wantCode:   exitFailed,
			wantStderr: []string{"--source"},
		},
		{
			name:       "a missing config file fails",
			args:       []string{"--config", filepath.Join(dir, "absent.yaml")},
			wantCode:   exitFailed,
			wantStderr: []string{"absent.yaml"},
		},
		{
			name:       "a VNI HNS reserves fails naming network.vxlan.vni on the simulator",
			args:       []string{"--config", badField, "--dataplane", "sim"},
			wantCode:   exitFailed,
			wantStderr: []string{"network.vxlan.vni", "bad.yaml"},
		},
		{
			name:       "an unknown field fails naming it",
			args:       []string{"--config", unknownField, "--dataplane", "sim"},
			wantCode:   exitFailed,
			wantStderr: []string{"proxy.enableDSRR"},
		},
		{
			name:       "DSR on the linux dataplane fails naming proxy.enableDSR",
			args:       []string{"--config", dsrOnLinux, "--dataplane", "linux"},
			wantCode:   exitFailed,
			wantStderr: []string{"proxy.enableDSR", "Linux dataplane has no DSR"},
		},
		{
			name:       "DSR on a simulated HNS too old for it fails naming proxy.enableDSR",
			args:       []string{"--config", oldHNS, "--dataplane", "sim"},
			wantCode:   exitFailed,
			wantStderr: []string{"proxy.enableDSR", "does not support DSR"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := run(tc.args, &stdout, &stderr)
			if code != tc.wantCode {
				t.Errorf("exit status %d, want %d; stderr:\n%s", code, tc.wantCode, stderr.String())
			}
			for _, want := range tc.wantStderr {
				if !strings.Contains(stderr.String(), want) {
					t.Errorf("stderr does not mention %q:\n%s", want, stderr.String())
				}
			}
		})
	}
}

func TestWriteConfigTo(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("NODE_NAME", "node-a")
	for _, tc := range []struct {
		name      string
		input     string
		dataplane string
		// wantStderr is a problem the output must list.
		wantStderr string
		check      func(t *testing.T, cfg *config.AgentConfiguration)
	}{
		{
			name:       "a flannel net-conf.json becomes an AgentConfiguration with its VNI",
			input:      `{"Network": "10.244.0.0/16", "Backend": {"Type": "vxlan", "VNI": 4097}}`,
			dataplane:  "linux",
			wantStderr: "serviceCIDRs",
			check: func(t *testing.T, cfg *config.AgentConfiguration) {
				if cfg.Network.Mode != config.NetworkModeOverlay || cfg.Network.VXLAN == nil || cfg.Network.VXLAN.VNI != 4097 {
					t.Errorf("network = %+v, want overlay with VNI 4097", cfg.Network)
				}
				if len(cfg.ClusterCIDRs) != 1 || cfg.ClusterCIDRs[0] != "10.244.0.0/16" {
					t.Errorf("clusterCIDRs = %v", cfg.ClusterCIDRs)
				}
			},
		},
		{
			name: "a kube-proxy config without service CIDRs is written anyway, its problems listed",
			input: `apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
clusterCIDR: 10.244.0.0/16
healthzBindAddress: 0.0.0.0:10266
mode: nftables
nftables: {syncPeriod: 45s}
`,
			dataplane:  "linux",
			wantStderr: "serviceCIDRs: Required value",
			check: func(t *testing.T, cfg *config.AgentConfiguration) {
				if cfg.SyncPeriod.Duration.String() != "45s" {
					t.Errorf("syncPeriod = %v, want 45s", cfg.SyncPeriod.Duration)
				}
				if cfg.Proxy.HealthzBindAddress != "0.0.0.0:10266" {
					t.Errorf("healthzBindAddress = %q", cfg.Proxy.HealthzBindAddress)
				}
			},
		},
		{
			name: "a Windows config for the simulator gets this host's CNI paths",
			input: `apiVersion: nodenet.io/v1alpha1
kind: AgentConfiguration
clusterCIDRs: [10.244.0.0/16]
serviceCIDRs: [10.96.0.0/12]
proxy: {enableDSR: true}
`,
			dataplane: "sim",
			check: func(t *testing.T, cfg *config.AgentConfiguration) {
				if !filepath.IsAbs(cfg.CNI.SocketPath) || !filepath.IsAbs(cfg.CNI.DataDir) {
					t.Errorf("cni = %+v, want absolute paths on this host", cfg.CNI)
				}
				if !cfg.Proxy.EnableDSR {
					t.Error("enableDSR was dropped")
				}
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := writeFile(t, dir, "in", tc.input)
			out := filepath.Join(dir, "out.yaml")
			var stdout, stderr bytes.Buffer
			if code := run([]string{"--config", in, "--dataplane", tc.dataplane, "--write-config-to", out}, &stdout, &stderr); code != exitOK {
				t.Fatalf("exit status %d; stderr:\n%s", code, stderr.String())
			}
			data, err := os.ReadFile(out)
			if err != nil {
				t.Fatal(err)
			}
			if !strings.HasPrefix(string(data), "apiVersion: nodenet.io/v1alpha1") {
				t.Errorf("written config does not start with the current apiVersion:\n%s", data)
			}
			if !strings.Contains(stderr.String(), tc.wantStderr) {
				t.Errorf("stderr does not list %q:\n%s", tc.wantStderr, stderr.String())
			}
			// What was written loads again (problems and all).
			cfg, _, err := config.LoadFile(out, config.LoadOptions{OS: config.OSWindows})
			if cfg == nil {
				t.Fatalf("load the written config: %v", err)
			}
			if cfg.NodeName != "node-a" {
				t.Errorf("nodeName = %q, want NODE_NAME's node-a", cfg.NodeName)
			}
			tc.check(t, cfg)
		})
	}
}
