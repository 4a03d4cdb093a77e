package cni_test

// The sandbox reconciler against a real gRPC CRI server on a unix socket
// (a stateful fake RuntimeService), a real IPAM store and the HNS
// simulator's wiring (no root needed).
//
// Address plan (simulator only): see server_test.go. 10.244.1.0/24 is
// this node's pod CIDR; the l2bridge host endpoint holds .2; pods get .3+.

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	current "github.com/containernetworking/cni/pkg/types/100"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	grpcstatus "google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodenet/nodenet/cni"
	"github.com/nodenet/nodenet/cni/cri"
	"github.com/nodenet/nodenet/cni/hnsendpoint"
)

// fakeRuntime is a CRI RuntimeService that lists the sandboxes it is
// given, or fails with err.
type fakeRuntime struct {
	runtimeapi.UnimplementedRuntimeServiceServer
	mu        sync.Mutex
	sandboxes []*runtimeapi.PodSandbox
	err       error
	lists     int
}

func (f *fakeRuntime) ListPodSandbox(_ context.Context, req *runtimeapi.ListPodSandboxRequest) (*runtimeapi.ListPodSandboxResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.lists++
	if f.err != nil {
		return nil, f.err
	}
	resp := &runtimeapi.ListPodSandboxResponse{}
	for _, sb := range f.sandboxes {
		if fl := req.GetFilter(); fl != nil && fl.GetState() != nil && fl.GetState().GetState() != sb.GetState() {
			continue
		}
		resp.Items = append(resp.Items, sb)
	}
	return resp, nil
}

func (f *fakeRuntime) set(sandboxes map[string]runtimeapi.PodSandboxState, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.sandboxes = nil
	for id, state := range sandboxes {
		f.sandboxes = append(f.sandboxes, &runtimeapi.PodSandbox{
			Id: id, State: state, Metadata: &runtimeapi.PodSandboxMetadata{Name: "pod-" + id, Namespace: "default", Uid: "uid-" + id},
		})
	}
	f.err = err
}

// serveRuntime serves rt's CRI on a unix socket until the test ends and
// returns the endpoint.
func serveRuntime(t *testing.T, rt *fakeRuntime) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "nn-cri-") // short: sun_path
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	path := filepath.Join(dir, "containerd.sock")
	l, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	runtimeapi.RegisterRuntimeServiceServer(srv, rt)
	done := make(chan struct{})
	go func() { defer close(done); _ = srv.Serve(l) }()
	t.Cleanup(func() { srv.Stop(); <-done })
	return "unix://" + path
}

// gatedWiring holds the ADD of one container in the wiring until
// released, so a test can act while that request is in flight.
type gatedWiring struct {
	cni.Wiring
	container string
	entered   chan struct{}
	release   chan struct{}
}

func (w *gatedWiring) Add(ctx context.Context, nw *cni.NodeNetwork, pod *cni.Pod) (*current.Result, error) {
	if pod.ContainerID == w.container {
		close(w.entered)
		<-w.release
	}
	return w.Wiring.Add(ctx, nw, pod)
}

// restartedServer is a new agent's CNI server on n's IPAM store and HNS:
// it knows nothing of the ADDs its predecessor served.
func restartedServer(t *testing.T, n *simNode, wiring cni.Wiring) *cni.Server {
	t.Helper()
	srv, err := cni.NewServer(cni.ServerOptions{SocketPath: n.socket, IPAMDir: n.ipamDir, Wiring: wiring})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	if err := srv.SetNetwork(n.nw); err != nil {
		t.Fatal(err)
	}
	return srv
}

// age backdates every allocation file of container id by d.
func age(t *testing.T, n *simNode, id string, d time.Duration) {
	t.Helper()
	dir := filepath.Join(n.ipamDir, n.nw.Name)
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	when := time.Now().Add(-d)
	found := false
	for _, e := range entries {
		data, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil || !strings.HasPrefix(string(data), id+"\r\n") {
			continue
		}
		found = true
		if err := os.Chtimes(filepath.Join(dir, e.Name()), when, when); err != nil {
			t.Fatal(err)
		}
	}
	if !found {
		t.Fatalf("no allocation of %s to age", id)
	}
}

// allocatedContainers lists the container IDs holding addresses.
func allocatedContainers(t *testing.T, n *simNode) []string {
	t.Helper()
	dir := filepath.Join(n.ipamDir, n.nw.Name)
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range entries {
		data, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil || e.Name() == "lock" || strings.HasPrefix(e.Name(), "last_reserved_ip.") {
			continue
		}
		id, _, _ := strings.Cut(string(data), "\r\n")
		if id = strings.TrimSpace(id); id == "" {
			id = "unowned " + e.Name()
		}
		out = append(out, id)
	}
	slices.Sort(out)
	return out
}

func counterValue(t *testing.T, reg *prometheus.Registry, name string, labels map[string]string) float64 {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
	metrics:
		for _, m := range f.GetMetric() {
			for _, lp := range m.GetLabel() {
				if labels[lp.GetName()] != lp.GetValue() {
					continue metrics
				}
			}
			return m.GetCounter().GetValue()
		}
	}
	return 0
}

func TestSandboxReconcilerReleasesWhatNoSandboxHolds(t *testing.T) {
	const grace = 5 * time.Minute
	ready, notReady := runtimeapi.PodSandboxState_SANDBOX_READY, runtimeapi.PodSandboxState_SANDBOX_NOTREADY
	type pod struct {
		id  string
		age time.Duration
	}
	tests := []struct {
		name string
		// pods got their addresses and endpoints from the agent before it
		// died; each allocation is backdated by age.
		pods []pod
		// sandboxes are what the runtime lists.
		sandboxes map[string]runtimeapi.PodSandboxState
		// runtime is "up" (default), "down" (nothing listens) or "failing".
		runtime string
		// inFlight is a container whose retried ADD is in the wiring
		// during the pass.
		inFlight string
		// reservedFile writes an old allocation of the host endpoint's
		// address (.2) under a dummy ID, as old startup scripts did.
		reservedFile bool
		// unowned are allocation files that name no owner (their writer
		// died between creating and filling them), by address, each
		// backdated by its age.
		unowned      map[string]time.Duration
		wantReleased []string
		wantKept     []string
		wantErr      string
	}{
		{
			name:      "an allocation a ready sandbox holds stays, however old",
			pods:      []pod{{"c1", time.Hour}},
			sandboxes: map[string]runtimeapi.PodSandboxState{"c1": ready},
			wantKept:  []string{"c1"},
		},
		{
			name:      "an allocation a NOTREADY sandbox holds stays: the runtime will send its DEL",
			pods:      []pod{{"c1", time.Hour}},
			sandboxes: map[string]runtimeapi.PodSandboxState{"c1": notReady},
			wantKept:  []string{"c1"},
		},
		{
			name:     "an orphan younger than the grace period stays: its sandbox may not be listed yet",
			pods:     []pod{{"c1", grace - time.Minute}},
			wantKept: []string{"c1"},
		},
		{
			name:         "an orphan older than the grace period is released with its endpoint, and only it",
			pods:         []pod{{"c1", grace + time.Minute}, {"c2", time.Hour}, {"c3", time.Hour}},
			sandboxes:    map[string]runtimeapi.PodSandboxState{"c2": ready, "c3": notReady, "unrelated": ready},
			wantReleased: []string{"c1"},
			wantKept:     []string{"c2", "c3"},
		},
		{
			name:         "a runtime without sandboxes releases every old orphan",
			pods:         []pod{{"c1", time.Hour}, {"c2", time.Hour}, {"c3", time.Minute}},
			wantReleased: []string{"c1", "c2"},
			wantKept:     []string{"c3"},
		},
		{
			name:     "nothing is released while the runtime is unreachable",
			pods:     []pod{{"c1", time.Hour}},
			runtime:  "down",
			wantKept: []string{"c1"},
			wantErr:  "list pod sandboxes",
		},
		{
			name:     "nothing is released when the runtime fails the list",
			pods:     []pod{{"c1", time.Hour}},
			runtime:  "failing",
			wantKept: []string{"c1"},
			wantErr:  "containerd is shutting down",
		},
		{
			name:     "an old orphan whose retried ADD is in flight stays, during the ADD and after it",
			pods:     []pod{{"c1", time.Hour}},
			inFlight: "c1",
			wantKept: []string{"c1"},
		},
		{
			name:         "an allocation that names no owner is removed once older than the grace period",
			pods:         []pod{{"c1", time.Hour}},
			sandboxes:    map[string]runtimeapi.PodSandboxState{"c1": ready},
			unowned:      map[string]time.Duration{"10.244.1.20": time.Hour, "10.244.1.21": time.Minute},
			wantReleased: []string{"unowned 10.244.1.20"},
			wantKept:     []string{"c1", "unowned 10.244.1.21"},
		},
		{
			name:         "an address reserved for the node network under a dummy ID stays",
			reservedFile: true,
			wantKept:     []string{"host-endpoint-reservation"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			n := newSimNode(t, simNodeOptions{})
			for _, p := range tt.pods {
				if resp := n.server.Handle(ctx, n.addRequest(p.id)); resp.Error != nil {
					t.Fatalf("ADD %s: %v", p.id, resp.Error)
				}
				age(t, n, p.id, p.age)
			}
			if tt.reservedFile {
				path := filepath.Join(n.ipamDir, n.nw.Name, "10.244.1.2")
				if err := os.WriteFile(path, []byte("host-endpoint-reservation\r\neth0"), 0o600); err != nil {
					t.Fatal(err)
				}
				old := time.Now().Add(-24 * time.Hour)
				if err := os.Chtimes(path, old, old); err != nil {
					t.Fatal(err)
				}
			}
			for ip, d := range tt.unowned {
				path := filepath.Join(n.ipamDir, n.nw.Name, ip)
				if err := os.WriteFile(path, nil, 0o600); err != nil {
					t.Fatal(err)
				}
				when := time.Now().Add(-d)
				if err := os.Chtimes(path, when, when); err != nil {
					t.Fatal(err)
				}
			}
			endpointsBefore := n.podEndpoints(t)
			// The agent dies; a new one starts on the same store.
			n.server.Close()
			inner, err := hnsendpoint.New(hnsendpoint.Options{HNS: n.sim})
			if err != nil {
				t.Fatal(err)
			}
			wiring := &gatedWiring{Wiring: inner, container: tt.inFlight, entered: make(chan struct{}), release: make(chan struct{})}
			srv := restartedServer(t, n, wiring)

			rt := &fakeRuntime{}
			var endpoint string
			switch tt.runtime {
			case "down":
				endpoint = "unix://" + filepath.Join(n.dir, "no-runtime.sock")
			case "failing":
				rt.set(nil, grpcstatus.Error(codes.Unavailable, "containerd is shutting down"))
				endpoint = serveRuntime(t, rt)
			default:
				rt.set(tt.sandboxes, nil)
				endpoint = serveRuntime(t, rt)
			}
			client, err := cri.New(cri.Options{Endpoint: endpoint, Timeout: 5 * time.Second})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { client.Close() })
			reg := prometheus.NewRegistry()
			rec, err := cni.NewReconciler(cni.ReconcilerOptions{Server: srv, Sandboxes: client, GracePeriod: grace, Registerer: reg})
			if err != nil {
				t.Fatal(err)
			}

			var addDone chan *current.Result
			if tt.inFlight != "" {
				addDone = make(chan *current.Result)
				go func() {
					resp := srv.Handle(ctx, n.addRequest(tt.inFlight))
					if resp.Error != nil {
						t.Errorf("retried ADD: %v", resp.Error)
					}
					addDone <- nil
				}()
				<-wiring.entered
			}
			released, err := rec.Reconcile(ctx)
			if tt.inFlight != "" {
				close(wiring.release)
				<-addDone
				// The ADD just succeeded: its sandbox is about to be
				// listed, so the next pass leaves it too.
				more, err := rec.Reconcile(ctx)
				if err != nil || len(more) != 0 {
					t.Errorf("the pass after the ADD released %v, %v; want nothing", more, err)
				}
			}
			switch {
			case tt.wantErr == "" && err != nil:
				t.Errorf("Reconcile: %v", err)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Errorf("Reconcile error %v, want one containing %q", err, tt.wantErr)
			}

			var gotReleased []string
			unwired := 0
			for _, r := range released {
				switch {
				case r.ContainerID == "" && len(r.IPs) == 1:
					gotReleased = append(gotReleased, "unowned "+r.IPs[0].String())
				case r.IfName != "eth0" || len(r.IPs) != 1:
					t.Errorf("released %+v, want eth0 with one address", r)
				default:
					gotReleased = append(gotReleased, r.ContainerID)
					unwired++
				}
			}
			slices.Sort(gotReleased)
			if !slices.Equal(gotReleased, tt.wantReleased) {
				t.Errorf("released %v, want %v", gotReleased, tt.wantReleased)
			}
			if got := allocatedContainers(t, n); !slices.Equal(got, tt.wantKept) {
				t.Errorf("allocations held by %v, want %v", got, tt.wantKept)
			}
			// The released pods' wiring (their HNS endpoints) is gone too.
			if got, want := n.podEndpoints(t), endpointsBefore-unwired; got != want {
				t.Errorf("%d pod endpoints left, want %d", got, want)
			}

			st := rec.Status()
			if st.Released != len(tt.wantReleased) {
				t.Errorf("status counts %d released, want %d", st.Released, len(tt.wantReleased))
			}
			if (st.LastError != "") != (tt.wantErr != "") || st.LastRun.IsZero() {
				t.Errorf("status last run %v, error %q; want an error: %v", st.LastRun, st.LastError, tt.wantErr != "")
			}
			if got := counterValue(t, reg, cni.MetricOrphansReleased, nil); got != float64(len(tt.wantReleased)) {
				t.Errorf("%s = %v, want %d", cni.MetricOrphansReleased, got, len(tt.wantReleased))
			}
			if tt.wantErr != "" {
				if got := counterValue(t, reg, cni.MetricReconciles, map[string]string{"result": "error"}); got != 1 {
					t.Errorf("%s{result=error} = %v, want 1", cni.MetricReconciles, got)
				}
			}
		})
	}
}

func TestSandboxReconcilerRunKeepsGoingAcrossARuntimeOutage(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	n := newSimNode(t, simNodeOptions{})
	if resp := n.server.Handle(ctx, n.addRequest("c1")); resp.Error != nil {
		t.Fatal(resp.Error)
	}
	age(t, n, "c1", time.Hour)
	n.server.Close()
	inner, err := hnsendpoint.New(hnsendpoint.Options{HNS: n.sim})
	if err != nil {
		t.Fatal(err)
	}
	srv := restartedServer(t, n, inner)
	rt := &fakeRuntime{}
	rt.set(nil, grpcstatus.Error(codes.Unavailable, "restarting"))
	client, err := cri.New(cri.Options{Endpoint: serveRuntime(t, rt)})
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	rec, err := cni.NewReconciler(cni.ReconcilerOptions{Server: srv, Sandboxes: client, GracePeriod: time.Minute, Interval: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- rec.Run(ctx) }()
	waitFor := func(what string, cond func(cni.ReconcileStatus) bool) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for !cond(rec.Status()) {
			if time.Now().After(deadline) {
				t.Fatalf("%s: not within 10s; status %+v", what, rec.Status())
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	waitFor("a failed pass", func(s cni.ReconcileStatus) bool { return s.LastError != "" })
	if got := allocatedContainers(t, n); !slices.Equal(got, []string{"c1"}) {
		t.Fatalf("allocations %v during the outage, want c1's", got)
	}
	rt.set(nil, nil) // the runtime is back, with no sandbox
	waitFor("the orphan released", func(s cni.ReconcileStatus) bool { return s.Released == 1 && s.LastError == "" })
	if got := allocatedContainers(t, n); len(got) != 0 {
		t.Errorf("allocations %v after the outage, want none", got)
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Run: %v", err)
	}
}
