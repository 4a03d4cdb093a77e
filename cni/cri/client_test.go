package cri

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// listingRuntime lists fixed sandboxes.
type listingRuntime struct {
	runtimeapi.UnimplementedRuntimeServiceServer
	items []*runtimeapi.PodSandbox
}

func (r *listingRuntime) ListPodSandbox(context.Context, *runtimeapi.ListPodSandboxRequest) (*runtimeapi.ListPodSandboxResponse, error) {
	return &runtimeapi.ListPodSandboxResponse{Items: r.items}, nil
}

func serve(t *testing.T, rt runtimeapi.RuntimeServiceServer) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "nn-cri-") // short: sun_path
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	path := filepath.Join(dir, "cri.sock")
	l, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	runtimeapi.RegisterRuntimeServiceServer(srv, rt)
	go srv.Serve(l)
	t.Cleanup(srv.Stop)
	return "unix://" + path
}

func TestPodSandboxIDs(t *testing.T) {
	tests := []struct {
		name     string
		endpoint func(t *testing.T) string
		want     []string
		wantErr  string
	}{
		{
			name: "sandboxes in every state are listed",
			endpoint: func(t *testing.T) string {
				return serve(t, &listingRuntime{items: []*runtimeapi.PodSandbox{
					{Id: "ready", State: runtimeapi.PodSandboxState_SANDBOX_READY},
					{Id: "stopped", State: runtimeapi.PodSandboxState_SANDBOX_NOTREADY},
				}})
			},
			want: []string{"ready", "stopped"},
		},
		{
			name:     "a runtime without ListPodSandbox is an error",
			endpoint: func(t *testing.T) string { return serve(t, &runtimeapi.UnimplementedRuntimeServiceServer{}) },
			wantErr:  "Unimplemented",
		},
		{
			name:     "nothing listening is an error naming the endpoint",
			endpoint: func(t *testing.T) string { return "unix://" + filepath.Join(t.TempDir(), "none.sock") },
			wantErr:  "list pod sandboxes at unix://",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := New(Options{Endpoint: tt.endpoint(t), Timeout: 5 * time.Second})
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			got, err := c.PodSandboxIDs(context.Background())
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("PodSandboxIDs = %v, %v; want an error containing %q", got, err, tt.wantErr)
				}
				return
			}
			slices.Sort(got)
			if err != nil || !slices.Equal(got, tt.want) {
				t.Errorf("PodSandboxIDs = %v, %v; want %v", got, err, tt.want)
			}
		})
	}
}

func TestNewRejectsEndpointsThisOSCannotDial(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("named pipes are dialable here")
	}
	for _, ep := range []string{"npipe:////./pipe/containerd-containerd", "/run/containerd/containerd.sock", "tcp://127.0.0.1:1"} {
		if _, err := New(Options{Endpoint: ep}); err == nil {
			t.Errorf("New(%q) succeeded", ep)
		}
	}
}
