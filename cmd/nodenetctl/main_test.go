package main

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/nodenet/nodenet/config"
)

const testdata = "../../config/testdata/"

// result is what one run printed and returned.
type result struct {
	code           int
	stdout, stderr string
}

func runArgs(args ...string) result {
	var stdout, stderr bytes.Buffer
	code := run(args, &stdout, &stderr)
	return result{code, stdout.String(), stderr.String()}
}

func TestConfigValidate(t *testing.T) {
	tests := []struct {
		name       string
		args       []string
		wantCode   int
		wantLines  []string // each must appear as a whole line of stdout
		wantErrors int      // number of "error: " lines
	}{
		{
			name:      "a valid Windows overlay config passes",
			args:      []string{"--config", testdata + "agent-windows-overlay.yaml", "--os", "windows", "--node-local"},
			wantCode:  0,
			wantLines: []string{testdata + "agent-windows-overlay.yaml: valid AgentConfiguration for windows nodes (0 warnings)"},
		},
		{
			name:     "the same config fails on Linux because Linux has no DSR",
			args:     []string{"--config", testdata + "agent-windows-overlay.yaml", "--os", "linux", "--node-local"},
			wantCode: 1,
			wantLines: []string{
				"error: proxy.enableDSR: Forbidden: the Linux dataplane has no DSR; set enableDSR only in Windows nodes' config",
			},
			wantErrors: 6,
		},
		{
			name:     "every invalid field is printed with its path",
			args:     []string{"--config", testdata + "invalid-fields.yaml", "--os", "linux"},
			wantCode: 1,
			wantLines: []string{
				`error: featureGates[WinDRS]: Unsupported value: "WinDRS": supported values: "WinDSR", "WinOverlay"`,
				testdata + "invalid-fields.yaml: 21 errors",
			},
			wantErrors: 21,
		},
		{
			name:     "a node's own settings in a shared config are warned about",
			args:     []string{"--config", testdata + "agent-windows-overlay.yaml", "--os", "windows"},
			wantCode: 0,
			wantLines: []string{
				`warning: nodeName: node-local setting in a shared config: every node reading it would claim Node "win-node-1"`,
				testdata + "agent-windows-overlay.yaml: valid AgentConfiguration for windows nodes (3 warnings)",
			},
		},
		{
			name:     "a misspelled field is named",
			args:     []string{"--config", testdata + "invalid-unknown-field.yaml"},
			wantCode: 1,
			wantLines: []string{
				"error: network.vxlan.vin: Forbidden: unknown field (names are case-sensitive)",
				"error: proxy.enableDsr: Forbidden: unknown field (names are case-sensitive)",
				testdata + "invalid-unknown-field.yaml: 2 errors",
			},
			wantErrors: 2,
		},
		{
			name:     "a kube-proxy config prints what was not carried over and the one missing field",
			args:     []string{"--config", testdata + "kube-proxy-windows.yaml", "--os", "windows"},
			wantCode: 1,
			wantLines: []string{
				"warning: winkernel.rootHnsEndpointName: not carried over: nodenet creates and names its own host endpoint",
				"error: serviceCIDRs: Required value: the cluster's service CIDRs (kube-apiserver --service-cluster-ip-range), e.g. [10.96.0.0/12]; kube-proxy and flannel configs don't carry them",
			},
			wantErrors: 1,
		},
		{
			name:       "a wrong apiVersion is one error listing the supported ones",
			args:       []string{"--config", testdata + "invalid-apiversion.yaml"},
			wantCode:   1,
			wantErrors: 1,
		},
		{
			name:       "a missing file is an error",
			args:       []string{"--config", testdata + "no-such-file.yaml"},
			wantCode:   1,
			wantErrors: 1,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := runArgs(append([]string{"config", "validate"}, tt.args...)...)
			if r.code != tt.wantCode {
				t.Errorf("exit status %d, want %d\nstdout:\n%s\nstderr:\n%s", r.code, tt.wantCode, r.stdout, r.stderr)
			}
			lines := strings.Split(r.stdout, "\n")
			for _, want := range tt.wantLines {
				if !slices.Contains(lines, want) {
					t.Errorf("stdout lacks the line %q:\n%s", want, r.stdout)
				}
			}
			errors := 0
			for _, line := range lines {
				if strings.HasPrefix(line, "error: ") {
					errors++
				}
			}
			if errors != tt.wantErrors {
				t.Errorf("%d error lines, want %d:\n%s", errors, tt.wantErrors, r.stdout)
			}
		})
	}
}

func TestConfigConvertToStdoutLoadsBackEqual(t *testing.T) {
	r := runArgs("config", "convert", "--config", testdata+"agent-minimal.yaml", "--os", "windows")
	if r.code != 0 || r.stderr != "" {
		t.Fatalf("exit status %d, stderr:\n%s", r.code, r.stderr)
	}
	opts := config.LoadOptions{OS: config.OSWindows, Shared: true}
	want, _, err := config.LoadFile(testdata+"agent-minimal.yaml", opts)
	if err != nil {
		t.Fatal(err)
	}
	got, _, err := config.Load([]byte(r.stdout), opts)
	if err != nil {
		t.Fatalf("loading the converted config: %v\n%s", err, r.stdout)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("converted config (-want +got):\n%s", diff)
	}
}

func TestConfigConvertFlannelToAFileNeedsOnlyServiceCIDRs(t *testing.T) {
	out := filepath.Join(t.TempDir(), "nodenet.yaml")
	r := runArgs("config", "convert", "--config", testdata+"flannel-windows.json", "--os", "windows", "-o", out)
	if r.code != 1 || r.stdout != "" {
		t.Fatalf("exit status %d (want 1: serviceCIDRs is missing), stdout %q", r.code, r.stdout)
	}
	if !strings.Contains(r.stderr, "converted from flannel net-conf.json with 1 error to fix") {
		t.Errorf("stderr does not summarize the conversion:\n%s", r.stderr)
	}
	data, err := os.ReadFile(out)
	if err != nil {
		t.Fatalf("the converted config was not written: %v", err)
	}
	if err := os.WriteFile(out, append(data, "serviceCIDRs: [10.96.0.0/12]\n"...), 0o644); err != nil {
		t.Fatal(err)
	}
	r = runArgs("config", "validate", "--config", out, "--os", "windows")
	if r.code != 0 {
		t.Errorf("the fixed config does not validate:\n%s", r.stdout)
	}
}

func TestConfigConvertNodeLocalFillsThisNodesDefaults(t *testing.T) {
	t.Setenv("NODE_NAME", "node-a")
	r := runArgs("config", "convert", "--config", testdata+"agent-minimal.yaml", "--os", "linux", "--node-local")
	if r.code != 0 {
		t.Fatalf("exit status %d, stderr:\n%s", r.code, r.stderr)
	}
	for _, want := range []string{"nodeName: node-a", "  socketPath: /var/run/nodenet/cni.sock"} {
		if !slices.Contains(strings.Split(r.stdout, "\n"), want) {
			t.Errorf("output lacks %q:\n%s", want, r.stdout)
		}
	}
}

func TestUsageErrors(t *testing.T) {
	tests := []struct {
		name     string
		args     []string
		wantCode int
		wantErr  string
	}{
		{"no command prints usage", nil, 2, "Usage: nodenetctl"},
		{"help is not an error", []string{"--help"}, 0, "Usage: nodenetctl"},
		{"an unknown command is named", []string{"stauts"}, 2, `unknown command "stauts"`},
		{"an unknown config command is named", []string{"config", "lint"}, 2, `unknown command "lint"`},
		{"config without a command prints its usage", []string{"config"}, 2, "Usage: nodenetctl config"},
		{"--config is required", []string{"config", "validate"}, 2, "--config is required"},
		{"--os must be linux or windows", []string{"config", "validate", "--config", "x", "--os", "darwin"}, 2, `--os must be linux or windows, not "darwin"`},
		{"an unknown flag is an error", []string{"config", "validate", "--conifg", "x"}, 2, "unknown flag: --conifg"},
		{"validate has no -o", []string{"config", "validate", "--config", "x", "-o", "y"}, 2, "unknown shorthand flag: 'o'"},
		{"stray arguments are an error", []string{"config", "convert", "--config", "x", "y"}, 2, "unexpected arguments"},
		{"subcommand help is not an error", []string{"config", "convert", "--help"}, 0, "-o, --output"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := runArgs(tt.args...)
			if r.code != tt.wantCode || !strings.Contains(r.stderr, tt.wantErr) {
				t.Errorf("exit status %d, stderr:\n%s\nwant status %d and %q", r.code, r.stderr, tt.wantCode, tt.wantErr)
			}
		})
	}
}
