// Package cri reads the container runtime's pod sandboxes over CRI (the
// k8s.io/cri-api RuntimeService on the runtime's endpoint, as kubelet and
// crictl talk to it). The CNI server uses it to find address allocations
// that belong to no sandbox (cni.SandboxReconciler). It only reads.
package cri

import (
	"context"
	"errors"
	"fmt"
	"net"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/credentials/insecure"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodenet/nodenet/config"
)

// DefaultTimeout bounds one call to the runtime when Options.Timeout is 0.
const DefaultTimeout = 30 * time.Second

// maxMessageBytes is the largest answer accepted, kubelet's limit: a node
// with many sandboxes lists more than gRPC's default 4 MiB.
const maxMessageBytes = 16 << 20

// Options configure a Client.
type Options struct {
	// Endpoint is the runtime's CRI endpoint (config cni.runtimeEndpoint):
	// unix:///run/containerd/containerd.sock, or on Windows
	// npipe:////./pipe/containerd-containerd.
	Endpoint string
	// Timeout bounds each call. Default: DefaultTimeout.
	Timeout time.Duration
}

// Client lists a container runtime's pod sandboxes. It connects on first
// use and reconnects by itself (a restarted runtime); it is safe for
// concurrent use.
type Client struct {
	endpoint string
	timeout  time.Duration
	conn     *grpc.ClientConn
	rt       runtimeapi.RuntimeServiceClient
}

// New checks opts and returns a Client; it does not connect yet. Close it
// when done.
func New(opts Options) (*Client, error) {
	ep, err := config.ParseRuntimeEndpoint(config.HostOS(), opts.Endpoint)
	if err != nil {
		return nil, fmt.Errorf("CRI endpoint %q: %w", opts.Endpoint, err)
	}
	dial, err := dialer(ep)
	if err != nil {
		return nil, fmt.Errorf("CRI endpoint %q: %w", opts.Endpoint, err)
	}
	if opts.Timeout <= 0 {
		opts.Timeout = DefaultTimeout
	}
	// The target is only a name: the dialer decides where to connect.
	conn, err := grpc.NewClient("passthrough:///cri",
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return dial(ctx) }),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(maxMessageBytes)),
		// A runtime that was down is retried within seconds, not gRPC's
		// default two minutes.
		grpc.WithConnectParams(grpc.ConnectParams{
			Backoff:           backoff.Config{BaseDelay: time.Second, Multiplier: 1.6, Jitter: 0.2, MaxDelay: 10 * time.Second},
			MinConnectTimeout: 5 * time.Second,
		}),
	)
	if err != nil {
		return nil, fmt.Errorf("CRI endpoint %q: %w", opts.Endpoint, err)
	}
	return &Client{endpoint: opts.Endpoint, timeout: opts.Timeout, conn: conn, rt: runtimeapi.NewRuntimeServiceClient(conn)}, nil
}

// Endpoint returns the endpoint the client talks to.
func (c *Client) Endpoint() string { return c.endpoint }

// Close drops the connection.
func (c *Client) Close() error { return c.conn.Close() }

// PodSandboxIDs returns the ID of every pod sandbox the runtime has, in
// any state: a NOTREADY sandbox still holds its network until the runtime
// tears it down (with a CNI DEL). A sandbox's ID is the CNI container ID
// of its pod's attachments.
func (c *Client) PodSandboxIDs(ctx context.Context) ([]string, error) {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	resp, err := c.rt.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{})
	if err != nil {
		return nil, fmt.Errorf("list pod sandboxes at %s: %w", c.endpoint, err)
	}
	ids := make([]string, 0, len(resp.Items))
	for _, sb := range resp.Items {
		if sb.GetId() == "" {
			return nil, errors.New("list pod sandboxes at " + c.endpoint + ": the runtime listed a sandbox without an ID")
		}
		ids = append(ids, sb.GetId())
	}
	return ids, nil
}
