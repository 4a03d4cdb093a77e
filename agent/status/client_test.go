package status

import (
	"context"
	"encoding/json"
	"errors"
	"io/fs"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// clientTestDir returns a temporary directory with a short path: a unix
// socket path must fit in 107 bytes, and t.TempDir() includes the test's
// (long, sentence-like) name.
func clientTestDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "st")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

// serveForClient serves handler with the agent's own Listen and Serve on
// a socket in a fresh directory and returns the socket's path.
func serveForClient(t *testing.T, handler http.Handler) string {
	t.Helper()
	path := filepath.Join(clientTestDir(t), SocketName)
	l, err := Listen(path)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Serve(ctx, l, handler) }()
	t.Cleanup(func() { cancel(); <-done })
	return path
}

func cannedJSON(v any) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(v)
	}
}

var (
	cannedStatus = Status{
		NodeName:  "node-1",
		Dataplane: "linux",
		Version:   "v0.1.0",
		StartedAt: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC),
		Network: NetworkStatus{
			Mode: "overlay", Name: "nodenet", ID: "nodenet0", VNI: 4096, Port: 4789,
			PodCIDRs: []string{"10.244.1.0/24"}, NodeIP: "192.168.1.10", Ready: true, RemoteNodes: 2,
		},
		CNI:   CNIStatus{SocketPath: "/var/run/nodenet/cni.sock", ConflistPath: "/etc/cni/net.d/10-nodenet.conflist", Ready: true},
		Proxy: ProxyStatus{Backend: "nftables", Source: "kubernetes", Running: true, Syncs: 7, LastSync: time.Date(2026, 1, 2, 3, 5, 0, 0, time.UTC), ServicePorts: 3, Healthy: true},
	}
	cannedServices = Services{Ports: []ServicePort{{
		Name: "default/web:http/TCP", Family: "IPv4", Type: "ClusterIP", ClusterIP: "10.96.0.10", Port: 80,
		InternalEndpoints: []Endpoint{{Address: "10.244.1.5:8080", Node: "node-1", Local: true, Ready: true}},
		HasEndpoints:      true,
	}}}
	cannedDump = Dump{Dataplane: "linux", Sections: []Section{{Title: "nftables table inet nodenet", Text: "table inet nodenet {\n}\n"}}}
)

func cannedAgent() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET "+PathStatus, cannedJSON(cannedStatus))
	mux.Handle("GET "+PathServices, cannedJSON(cannedServices))
	mux.Handle("GET "+PathDump, cannedJSON(cannedDump))
	return mux
}

func TestClientReadsEachPathTheAgentServes(t *testing.T) {
	c := NewClient(serveForClient(t, cannedAgent()))
	ctx := context.Background()
	tests := []struct {
		name string
		get  func() (any, error)
		want any
	}{
		{"status returns the node's Status", func() (any, error) { return c.Status(ctx) }, &cannedStatus},
		{"services returns the programmed service ports", func() (any, error) { return c.Services(ctx) }, &cannedServices},
		{"dump returns the dataplane's sections", func() (any, error) { return c.Dump(ctx) }, &cannedDump},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := tt.get()
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestClientErrorsSayWhatToDo(t *testing.T) {
	tests := []struct {
		name    string
		socket  func(t *testing.T) string
		timeout time.Duration
		wantIs  error
		wantMsg string
		// unreachable: no agent answered at all.
		unreachable bool
	}{
		{
			name:        "a missing socket asks whether the agent runs",
			socket:      func(t *testing.T) string { return filepath.Join(clientTestDir(t), SocketName) },
			wantIs:      fs.ErrNotExist,
			wantMsg:     "is the agent running on this node? no socket at ",
			unreachable: true,
		},
		{
			name:        "a missing directory is a missing socket too",
			socket:      func(t *testing.T) string { return filepath.Join(clientTestDir(t), "nodenet", SocketName) },
			wantIs:      fs.ErrNotExist,
			wantMsg:     "is the agent running on this node? no socket at ",
			unreachable: true,
		},
		{
			name: "a socket nobody listens on says so",
			socket: func(t *testing.T) string {
				path := filepath.Join(clientTestDir(t), SocketName)
				l, err := net.Listen("unix", path)
				if err != nil {
					t.Fatal(err)
				}
				l.(*net.UnixListener).SetUnlinkOnClose(false)
				l.Close()
				return path
			},
			wantMsg:     "nothing answers on ",
			unreachable: true,
		},
		{
			name: "an agent that hangs times out",
			socket: func(t *testing.T) string {
				return serveForClient(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { <-r.Context().Done() }))
			},
			timeout:     20 * time.Millisecond,
			wantIs:      context.DeadlineExceeded,
			wantMsg:     "did not answer within 20ms",
			unreachable: true,
		},
		{
			name: "an agent that fails quotes its answer",
			socket: func(t *testing.T) string {
				return serveForClient(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					http.Error(w, "proxy not started", http.StatusServiceUnavailable)
				}))
			},
			wantMsg: "answered GET /v1/status with 503 Service Unavailable: proxy not started",
		},
		{
			name: "an agent without the path is called older",
			socket: func(t *testing.T) string {
				return serveForClient(t, http.NotFoundHandler())
			},
			wantMsg: "does not serve /v1/status (is it an older version than nodenetctl?)",
		},
		{
			name: "an answer that is not JSON is reported",
			socket: func(t *testing.T) string {
				return serveForClient(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("<html>")) }))
			},
			wantMsg: "decode the agent's answer to GET /v1/status",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := NewClient(tt.socket(t))
			c.Timeout = tt.timeout
			_, err := c.Status(context.Background())
			if err == nil {
				t.Fatal("Status succeeded")
			}
			if !strings.Contains(err.Error(), tt.wantMsg) {
				t.Errorf("error %q does not contain %q", err, tt.wantMsg)
			}
			if tt.wantIs != nil && !errors.Is(err, tt.wantIs) {
				t.Errorf("error %q is not %v", err, tt.wantIs)
			}
			if got := IsUnreachable(err); got != tt.unreachable {
				t.Errorf("IsUnreachable(%q) = %v, want %v", err, got, tt.unreachable)
			}
		})
	}
}

func TestAPermissionDeniedDialAsksForRoot(t *testing.T) {
	// Root can always connect, so the errno is made up here.
	path := serveForClient(t, cannedAgent())
	c := NewClient(path)
	dialErr := &net.OpError{Op: "dial", Net: "unix", Err: os.NewSyscallError("connect", syscall.EACCES)}
	err := c.requestError(context.Background(), dialErr)
	if !errors.Is(err, fs.ErrPermission) {
		t.Errorf("error %q is not fs.ErrPermission", err)
	}
	if want := "permission denied on " + path + ": the agent's socket is for "; !strings.HasPrefix(err.Error(), want) {
		t.Errorf("error %q does not start with %q", err, want)
	}
	if !IsUnreachable(err) {
		t.Errorf("IsUnreachable(%q) = false", err)
	}
}

func TestSocketPathIsNextToTheCNISocket(t *testing.T) {
	cni := filepath.Join("var", "run", "nodenet", "cni.sock")
	if got, want := SocketPath(cni), filepath.Join("var", "run", "nodenet", "agent.sock"); got != want {
		t.Errorf("SocketPath(%q) = %q, want %q", cni, got, want)
	}
}

// cannedProvider is a canned Provider for the agent's own handler.
type cannedProvider struct{ dumpErr error }

func (cannedProvider) Status(context.Context) Status     { return cannedStatus }
func (cannedProvider) Services(context.Context) Services { return cannedServices }
func (p cannedProvider) Dump(context.Context) (Dump, error) {
	return cannedDump, p.dumpErr
}

func TestClientReadsWhatTheAgentsHandlerServes(t *testing.T) {
	path := filepath.Join(clientTestDir(t), SocketName)
	l, err := Listen(path)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Serve(ctx, l, NewHandler(cannedProvider{dumpErr: errors.New("hns: access denied")})) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	})

	c := NewClient(path)
	st, err := c.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(&cannedStatus, st); diff != "" {
		t.Errorf("status (-want +got):\n%s", diff)
	}
	svcs, err := c.Services(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(&cannedServices, svcs); diff != "" {
		t.Errorf("services (-want +got):\n%s", diff)
	}
	_, err = c.Dump(ctx)
	if want := "answered GET /v1/dump with 500 Internal Server Error: hns: access denied"; err == nil || !strings.HasSuffix(err.Error(), want) {
		t.Errorf("Dump error %v, want one ending in %q", err, want)
	}
	if IsUnreachable(err) {
		t.Errorf("IsUnreachable(%q) = true for an agent that answered", err)
	}
}
