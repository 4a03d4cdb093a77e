package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestProxyRender(t *testing.T) {
	noAddress := t.TempDir()
	if err := os.WriteFile(filepath.Join(noAddress, "node.yaml"), []byte("apiVersion: v1\nkind: Node\nmetadata: {name: node-a}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	base := []string{"proxy", "render", "--config", testdata + "agent-minimal.yaml", "--manifests", "../../examples/services", "--node", "node-a"}
	tests := []struct {
		name       string
		args       []string
		wantCode   int
		wantStdout []string // each must appear in stdout
		wantStderr string
		wantAbsent string // must not appear in stdout
	}{{
		name:     "the state view shows each service port's frontends and the endpoints its traffic uses",
		args:     append(append([]string{}, base...), "--node-ip", "192.168.1.10", "-o", "state"),
		wantCode: exitOK,
		wantStdout: []string{
			"node node-a (zone \"zone-a\"): 5 service ports",
			"edge/empty:TCP/IPv4  ClusterIP 10.96.20.30:9000\n  internal traffic       Cluster: no endpoints: rejected",
			"external traffic       Local: 10.244.1.20:8443 (local)",
			"health-check port      32000 (1 local ready)",
			"internal traffic       Cluster: 10.244.1.5:8080 (local), 10.244.2.7:8080\n",
		},
	}, {
		name:     "the nft view is a loadable ruleset for the node's table holding every frontend",
		args:     append(append([]string{}, base...), "--node-ip", "192.168.1.10"),
		wantCode: exitOK,
		wantStdout: []string{
			"add table inet nodenet",
			"10.96.10.10 . tcp . 80 : goto svc-shop/web/tcp/80/http-v4",
			"tcp . 30080 : goto ext-shop/web/tcp/80/http-v4",
			"192.168.1.10/32",
		},
	}, {
		name:       "without --node-ip the Node's InternalIP is the node IP",
		args:       base,
		wantCode:   exitOK,
		wantStdout: []string{"192.168.1.10/32"},
	}, {
		name:       "primary node-port addresses with no node IP at all name the config field",
		args:       []string{"proxy", "render", "--config", testdata + "agent-minimal.yaml", "--manifests", noAddress, "--node", "node-a"},
		wantCode:   exitInvalid,
		wantStderr: "proxy.nodePortAddresses[0]",
	}, {
		name:       "bad manifests are errors naming file and object; the rest is rendered, exit 1",
		args:       []string{"proxy", "render", "--config", testdata + "agent-minimal.yaml", "--manifests", "testdata/render/badinput", "--node", "node-a"},
		wantCode:   exitInvalid,
		wantStdout: []string{"10.96.10.10 . tcp . 80 : goto svc-shop/web/tcp/80/http-v4"},
		wantStderr: "error: nodes.yaml:18: Node node-c: pod CIDR 10.244.2.128/25 overlaps Node node-b's 10.244.2.0/24 (nodes.yaml:8); it is not used",
		wantAbsent: "10.96.10.11",
	}, {
		name:       "a missing manifests flag is a usage error",
		args:       []string{"proxy", "render", "--config", testdata + "agent-minimal.yaml"},
		wantCode:   exitUsage,
		wantStderr: "--manifests is required",
	}, {
		name:       "a malformed node IP is a usage error naming the flag",
		args:       append(append([]string{}, base...), "--node-ip", "192.168.1"),
		wantCode:   exitUsage,
		wantStderr: "--node-ip",
	}, {
		name:       "a folder that does not exist fails instead of rendering an empty table",
		args:       []string{"proxy", "render", "--config", testdata + "agent-minimal.yaml", "--manifests", t.TempDir() + "/missing", "--node", "node-a", "--node-ip", "192.168.1.10"},
		wantCode:   exitInvalid,
		wantStderr: "missing",
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := runArgs(tt.args...)
			if got.code != tt.wantCode {
				t.Fatalf("exit %d, want %d\nstdout:\n%s\nstderr:\n%s", got.code, tt.wantCode, got.stdout, got.stderr)
			}
			for _, want := range tt.wantStdout {
				if !strings.Contains(got.stdout, want) {
					t.Errorf("stdout lacks %q:\n%s", want, got.stdout)
				}
			}
			if tt.wantAbsent != "" && strings.Contains(got.stdout, tt.wantAbsent) {
				t.Errorf("stdout has %q:\n%s", tt.wantAbsent, got.stdout)
			}
			if !strings.Contains(got.stderr, tt.wantStderr) {
				t.Errorf("stderr lacks %q:\n%s", tt.wantStderr, got.stderr)
			}
		})
	}
}
