package main

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"sigs.k8s.io/yaml"

	"github.com/nodenet/nodenet/agent/status"
)

// readyStatus is a Linux overlay node whose parts are all ready.
func readyStatus() *status.Status {
	return &status.Status{
		NodeName:  "node-1",
		Dataplane: "linux",
		Version:   "v0.3.0",
		StartedAt: testNow.Add(-2 * time.Hour),
		Network: status.NetworkStatus{
			Mode: "overlay", Name: "nodenet", ID: "nodenet0", VNI: 4096, Port: 4789,
			PodCIDRs: []string{"10.244.1.0/24"}, NodeIP: "192.168.1.10",
			Ready: true, RemoteNodes: 2,
		},
		CNI: status.CNIStatus{
			SocketPath: "/var/run/nodenet/cni.sock", ConflistPath: "/etc/cni/net.d/10-nodenet.conflist", Ready: true,
		},
		Proxy: status.ProxyStatus{
			Backend: "nftables", Source: "kubernetes", Running: true, Syncs: 42,
			LastSync: testNow.Add(-3 * time.Second), ServicePorts: 12, Healthy: true,
		},
	}
}

func TestStatusPrintsATable(t *testing.T) {
	sock := fakeAgent{status: readyStatus()}.start(t)
	r := runCtl(nil, "status", "--socket", sock)
	if r.code != exitOK {
		t.Fatalf("exit code %d; stderr:\n%s", r.code, r.stderr)
	}
	want := `Node:          node-1
Dataplane:     linux (agent v0.3.0, started 120m ago)
Network:       overlay "nodenet" (nodenet0)
VXLAN:         VNI 4096, port 4789
Pod CIDRs:     10.244.1.0/24
Node IP:       192.168.1.10
Source VIP:    none
DSR:           off
Remote nodes:  2

PART     READY  DETAIL
network  yes    overlay network "nodenet" exists
cni      yes    socket /var/run/nodenet/cni.sock, conflist /etc/cni/net.d/10-nodenet.conflist
proxy    yes    nftables, source kubernetes, 42 syncs, last sync 3s ago, 12 service ports
`
	if diff := cmp.Diff(want, r.stdout); diff != "" {
		t.Errorf("status (-want +got):\n%s", diff)
	}
}

func TestStatusTableLines(t *testing.T) {
	tests := []struct {
		name      string
		edit      func(*status.Status)
		wantLines []string
		wantNot   []string
	}{
		{
			name: "a network that is not ready shows its reason and message",
			edit: func(s *status.Status) {
				s.Network.Ready, s.Network.Reason, s.Network.Message = false, "NoPodCIDR", "Node node-1 has no pod CIDR yet"
				s.CNI.Ready = false
				s.Proxy = status.ProxyStatus{Backend: "nftables", Source: "kubernetes"}
			},
			wantLines: []string{
				"network no NoPodCIDR: Node node-1 has no pod CIDR yet",
				`cni no pods get "try again later" until the network is ready; socket /var/run/nodenet/cni.sock, conflist /etc/cni/net.d/10-nodenet.conflist`,
				"proxy no nftables, source kubernetes: not started (it starts once the network is ready)",
			},
		},
		{
			name: "an unhealthy proxy says so and how old its last sync is",
			edit: func(s *status.Status) {
				s.Proxy.Healthy, s.Proxy.LastSync = false, testNow.Add(-5*time.Minute)
			},
			wantLines: []string{"proxy no unhealthy (its /healthz fails); nftables, source kubernetes, 42 syncs, last sync 5m ago, 12 service ports"},
		},
		{
			name: "a Windows l2bridge node shows its source VIP and DSR and no VXLAN line",
			edit: func(s *status.Status) {
				s.Dataplane = "hns"
				s.Network = status.NetworkStatus{Mode: "l2bridge", Name: "cbr0", ID: "6F1C2D3E", PodCIDRs: []string{"10.244.2.0/24"},
					NodeIP: "10.0.0.5", SourceVIP: "10.244.2.2", Ready: true, RemoteNodes: 1}
				s.Proxy.Backend, s.Proxy.DSR = "hns", true
			},
			wantLines: []string{`Network: l2bridge "cbr0" (6F1C2D3E)`, "Source VIP: 10.244.2.2", "DSR: on", "Remote nodes: 1"},
			wantNot:   []string{"VXLAN: VNI 0, port 0"},
		},
		{
			name: "released orphans are counted, with the runtime they were checked against",
			edit: func(s *status.Status) {
				s.CNI.OrphanRelease = &status.OrphanReleaseStatus{
					RuntimeEndpoint: "unix:///run/containerd/containerd.sock", GracePeriod: "5m0s", Interval: "1m0s",
					LastRun: testNow.Add(-20 * time.Second), Sandboxes: 12, Released: 3,
				}
			},
			wantLines: []string{"Orphan release: 3 attachments released (grace 5m0s), sandboxes from unix:///run/containerd/containerd.sock; last check 20s ago (12 sandboxes)"},
		},
		{
			name: "an unreachable runtime says nothing was released and why",
			edit: func(s *status.Status) {
				s.CNI.OrphanRelease = &status.OrphanReleaseStatus{
					RuntimeEndpoint: "unix:///run/containerd/containerd.sock", GracePeriod: "5m0s", Interval: "1m0s",
					LastRun: testNow.Add(-5 * time.Second), LastError: "connection refused",
				}
			},
			wantLines: []string{"Orphan release: 0 attachments released (grace 5m0s), sandboxes from unix:///run/containerd/containerd.sock; last check 5s ago failed, nothing released: connection refused"},
		},
		{
			name: "a proxy that never synced says never",
			edit: func(s *status.Status) {
				s.Proxy.Syncs, s.Proxy.LastSync = 0, time.Time{}
			},
			wantLines: []string{"proxy yes nftables, source kubernetes, 0 syncs, last sync never, 12 service ports"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st := readyStatus()
			tt.edit(st)
			r := runCtl(nil, "status", "--socket", fakeAgent{status: st}.start(t))
			if r.code != exitOK {
				t.Fatalf("exit code %d; stderr:\n%s", r.code, r.stderr)
			}
			got := lines(r.stdout)
			for _, want := range tt.wantLines {
				if !slices.Contains(got, want) {
					t.Errorf("no line %q in:\n%s", want, r.stdout)
				}
			}
			for _, not := range tt.wantNot {
				if slices.Contains(got, not) {
					t.Errorf("unexpected line %q in:\n%s", not, r.stdout)
				}
			}
		})
	}
}

func TestStatusJSONAndYAMLRoundTrip(t *testing.T) {
	want := readyStatus()
	sock := fakeAgent{status: want}.start(t)
	tests := []struct {
		name      string
		format    string
		unmarshal func([]byte, any) error
	}{
		{"json decodes back to the agent's status", "json", json.Unmarshal},
		{"yaml decodes back to the agent's status", "yaml", func(b []byte, v any) error { return yaml.UnmarshalStrict(b, v) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := runCtl(nil, "status", "--socket", sock, "-o", tt.format)
			if r.code != exitOK {
				t.Fatalf("exit code %d; stderr:\n%s", r.code, r.stderr)
			}
			var got status.Status
			if err := tt.unmarshal([]byte(r.stdout), &got); err != nil {
				t.Fatalf("%v in:\n%s", err, r.stdout)
			}
			if diff := cmp.Diff(want, &got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestStatusFailsWhenTheAgentAnswersWithAnError(t *testing.T) {
	r := runCtl(nil, "status", "--socket", fakeAgent{}.start(t))
	if r.code != exitFailed {
		t.Errorf("exit code %d, want %d", r.code, exitFailed)
	}
	if want := "answered GET /v1/status with 500 Internal Server Error: not ready\n"; !strings.HasSuffix(r.stderr, want) {
		t.Errorf("stderr does not end with %q:\n%s", want, r.stderr)
	}
}
