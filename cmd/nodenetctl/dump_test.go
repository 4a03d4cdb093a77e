package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"sigs.k8s.io/yaml"

	"github.com/nodenet/nodenet/agent/status"
)

var (
	nftDump = &status.Dump{Dataplane: "linux", Sections: []status.Section{
		{Title: "nftables table inet nodenet", Text: "table inet nodenet {\n\tchain services {\n\t}\n}\n"},
		{Title: "conntrack", Text: "0 entries"},
	}}
	hnsDump = &status.Dump{Dataplane: "sim", Sections: []status.Section{
		{Title: "HNS load balancers", Text: "ID  VIP  PORTS\nlb1 10.96.0.10 80->8080\n"},
	}}
)

func TestDump(t *testing.T) {
	tests := []struct {
		name       string
		dump       *status.Dump
		args       []string
		wantCode   int
		wantStdout string
		wantStderr string
	}{
		{
			name:       "no argument prints whatever the agent's dataplane holds",
			dump:       nftDump,
			wantCode:   exitOK,
			wantStdout: "# nftables table inet nodenet\ntable inet nodenet {\n\tchain services {\n\t}\n}\n\n# conntrack\n0 entries\n",
		},
		{
			name:       "nft on a Linux agent prints its sections",
			dump:       nftDump,
			args:       []string{"nft"},
			wantCode:   exitOK,
			wantStdout: "# nftables table inet nodenet\n",
		},
		{
			name:       "hns on the HNS simulator prints its load balancers",
			dump:       hnsDump,
			args:       []string{"hns"},
			wantCode:   exitOK,
			wantStdout: "# HNS load balancers\nID  VIP  PORTS\nlb1 10.96.0.10 80->8080\n",
		},
		{
			name:       "nft on an HNS agent is a clear error",
			dump:       hnsDump,
			args:       []string{"nft"},
			wantCode:   exitFailed,
			wantStderr: `nodenetctl dump nft: this node's agent runs the sim dataplane, which has no nftables state: run "nodenetctl dump hns"`,
		},
		{
			name:       "hns on a Linux agent is a clear error",
			dump:       nftDump,
			args:       []string{"hns"},
			wantCode:   exitFailed,
			wantStderr: `nodenetctl dump hns: this node's agent runs the linux dataplane, which has no HNS state: run "nodenetctl dump nft"`,
		},
		{
			name:       "an empty dataplane says so",
			dump:       &status.Dump{Dataplane: "hns"},
			wantCode:   exitOK,
			wantStdout: "# the hns dataplane holds nothing\n",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sock := fakeAgent{dump: tt.dump}.start(t)
			r := runCtl(nil, append([]string{"dump", "--socket", sock}, tt.args...)...)
			if r.code != tt.wantCode {
				t.Errorf("exit code %d, want %d; stderr:\n%s", r.code, tt.wantCode, r.stderr)
			}
			if !strings.HasPrefix(r.stdout, tt.wantStdout) {
				t.Errorf("stdout does not start with %q:\n%s", tt.wantStdout, r.stdout)
			}
			if !strings.Contains(r.stderr, tt.wantStderr) {
				t.Errorf("stderr does not contain %q:\n%s", tt.wantStderr, r.stderr)
			}
		})
	}
}

func TestDumpJSONAndYAMLRoundTrip(t *testing.T) {
	sock := fakeAgent{dump: hnsDump}.start(t)
	for _, tt := range []struct {
		name      string
		format    string
		unmarshal func([]byte, any) error
	}{
		{"json decodes back to the agent's dump", "json", json.Unmarshal},
		{"yaml decodes back to the agent's dump", "yaml", func(b []byte, v any) error { return yaml.UnmarshalStrict(b, v) }},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := runCtl(nil, "dump", "hns", "--socket", sock, "-o", tt.format)
			if r.code != exitOK {
				t.Fatalf("exit code %d; stderr:\n%s", r.code, r.stderr)
			}
			var got status.Dump
			if err := tt.unmarshal([]byte(r.stdout), &got); err != nil {
				t.Fatalf("%v in:\n%s", err, r.stdout)
			}
			if diff := cmp.Diff(hnsDump, &got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}
