package main

// Address plan: as in examples/services (nodes 192.168.1.10–12, pod CIDRs
// 10.244.1–3.0/24, services in 10.96.0.0/12) and testdata/render/*/ (the
// same ranges, said at the top of each file).

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

var update = flag.Bool("update", false, "rewrite testdata/render/*.golden from what the renders print now")

const (
	renderData = "testdata/render/"
	examples   = "../../examples/services"
)

// TestRenderHNSGolden renders what a Windows node would hold for several
// configs and HNS versions and compares the output (stdout, stderr and the
// exit status) with testdata/render/NAME.golden; go test -update rewrites
// them. The HNS IDs in them are the simulator's sequence numbers.
func TestRenderHNSGolden(t *testing.T) {
	tests := []struct {
		name string
		args []string
	}{{
		// HNS 15.4 takes in-place load-balancer updates but keeps the old
		// backends (kubernetes issue 131466): the render says updates are
		// delete and create there, and in place on 15.5.
		name: "overlay-15.4",
		args: []string{"--config", renderData + "overlay.yaml", "--manifests", examples, "--hns-version", "15.4"},
	}, {
		name: "overlay-15.5",
		args: []string{"--config", renderData + "overlay.yaml", "--manifests", examples, "--hns-version", "15.5"},
	}, {
		// DSR: the DSR flag on every cluster-IP load balancer, loopback
		// DSR on each pod endpoint.
		name: "dsr-ws2022",
		args: []string{"--config", renderData + "overlay-dsr.yaml", "--manifests", examples, "--windows-server", "2022"},
	}, {
		name: "l2bridge-ws2022",
		args: []string{"--config", renderData + "l2bridge.yaml", "--manifests", renderData + "l2bridge", "--windows-server", "2022"},
	}, {
		// HNS 9.3 has no session affinity: shop/web is programmed without
		// it and the Service gets a SessionAffinityUnsupported event; 64
		// backends per load balancer.
		name: "overlay-ws2019",
		args: []string{"--config", renderData + "overlay.yaml", "--manifests", examples, "--windows-server", "2019"},
	}, {
		name: "dsr-ws2025-json",
		args: []string{"--config", renderData + "overlay-dsr.yaml", "--manifests", examples, "--windows-server", "2025", "-o", "json"},
	}, {
		// Malformed objects, objects on an undeclared Node, a Node whose
		// pod CIDR overlaps another's and pods that do not fit: each an
		// error naming its file and object, none of them programmed, the
		// rest rendered, exit status 1.
		name: "badinput",
		args: []string{"--config", renderData + "overlay.yaml", "--manifests", renderData + "badinput"},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			args := append([]string{"proxy", "render", "--node", "node-a"}, tt.args...)
			if !strings.Contains(strings.Join(args, " "), "-o ") {
				args = append(args, "-o", "hns")
			}
			got := runArgs(args...)
			text := "$ nodenetctl " + strings.Join(args, " ") + "\n" +
				"exit status " + string(rune('0'+got.code)) + "\n" +
				"--- stdout\n" + got.stdout +
				"--- stderr\n" + got.stderr
			golden := filepath.Join(renderData, tt.name+".golden")
			if *update {
				if err := os.WriteFile(golden, []byte(text), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (go test -run TestRenderHNSGolden -update writes it)", err)
			}
			if diff := cmp.Diff(string(want), text); diff != "" {
				t.Errorf("render differs from %s (-want +got; go test -run TestRenderHNSGolden -update rewrites it):\n%s", golden, diff)
			}
		})
	}
}

// TestRenderHNSIsRepeatable renders the same folder several times: the
// simulator's IDs and every list come out in the same order, or the
// golden files could not be compared.
func TestRenderHNSIsRepeatable(t *testing.T) {
	args := []string{"proxy", "render", "--node", "node-a", "--config", renderData + "overlay-dsr.yaml", "--manifests", examples, "-o", "hns"}
	first := runArgs(args...)
	if first.code != exitOK {
		t.Fatalf("exit %d: %s", first.code, first.stderr)
	}
	for range 5 {
		if again := runArgs(args...); again.stdout != first.stdout {
			t.Fatalf("a second render differs (-first +again):\n%s", cmp.Diff(first.stdout, again.stdout))
		}
	}
}

func TestRenderHNSRefusals(t *testing.T) {
	tests := []struct {
		name       string
		args       []string
		wantCode   int
		wantStderr string
	}{{
		name:       "DSR on an HNS without it is refused as the agent refuses to start",
		args:       []string{"--config", renderData + "overlay-dsr.yaml", "--manifests", examples, "--hns-version", "10.0"},
		wantCode:   exitInvalid,
		wantStderr: "proxy.enableDSR: Forbidden: HNS 10.0 (build 17763.8146) does not support DSR",
	}, {
		name:       "an unknown Windows Server release lists the known ones",
		args:       []string{"--config", renderData + "overlay.yaml", "--manifests", examples, "--windows-server", "2016"},
		wantCode:   exitUsage,
		wantStderr: "want one of 2019 (HNS 9.3), 2019-patched (HNS 9.5), 2022 (HNS 12.0), 2025 (HNS 15.4), 2025-patched (HNS 15.5)",
	}, {
		name:       "a version and a release at once is a usage error",
		args:       []string{"--config", renderData + "overlay.yaml", "--manifests", examples, "--windows-server", "2022", "--hns-version", "15.4"},
		wantCode:   exitUsage,
		wantStderr: "not both",
	}, {
		name:       "an HNS version for the nftables output is a usage error",
		args:       []string{"--config", renderData + "overlay.yaml", "--manifests", examples, "--hns-version", "15.4", "-o", "nft"},
		wantCode:   exitUsage,
		wantStderr: "need -o hns or -o json",
	}, {
		name:       "a node the folder does not declare cannot be rendered",
		args:       []string{"--config", renderData + "overlay.yaml", "--manifests", examples, "--node", "node-z"},
		wantCode:   exitInvalid,
		wantStderr: "Node node-z: not in ../../examples/services",
	}, {
		name:       "a pod CIDR given on the command line replaces the Node's, and the pods outside it are errors",
		args:       []string{"--config", renderData + "overlay.yaml", "--manifests", examples, "--pod-cidr", "10.244.1.0/28"},
		wantCode:   exitInvalid,
		wantStderr: "Pod edge/ingress-a: pod IP 10.244.1.20 is outside this node's pod network [10.244.1.0/28]",
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			args := append([]string{"proxy", "render", "-o", "hns"}, tt.args...)
			if !strings.Contains(strings.Join(args, " "), "--node ") {
				args = append(args, "--node", "node-a")
			}
			got := runArgs(args...)
			if got.code != tt.wantCode || !strings.Contains(got.stderr, tt.wantStderr) {
				t.Errorf("exit %d, want %d; stderr:\n%s\nwant it to contain %q", got.code, tt.wantCode, got.stderr, tt.wantStderr)
			}
		})
	}
}

// TestREADMERenderCommand runs the render command README shows near its
// top, from the repository root as README says to, so the README cannot
// drift from what works.
func TestREADMERenderCommand(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	const prefix = "go run ./cmd/nodenetctl "
	var line string
	for _, l := range strings.Split(string(readme), "\n") {
		if strings.HasPrefix(l, prefix+"proxy render") {
			line = l
			break
		}
	}
	if line == "" {
		t.Fatal("README has no one-line `go run ./cmd/nodenetctl proxy render` command")
	}
	t.Chdir("../..")
	got := runArgs(strings.Fields(strings.TrimPrefix(line, prefix))...)
	if got.code != exitOK || !strings.Contains(got.stdout, "LoadBalancers:") || got.stderr != "" {
		t.Errorf("%s: exit %d, stderr:\n%s\nstdout:\n%s", line, got.code, got.stderr, got.stdout)
	}
}
