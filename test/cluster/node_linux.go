package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"time"

	"github.com/nodenet/nodenet/agent/status"
	"github.com/nodenet/nodenet/config"
	"github.com/nodenet/nodenet/test/netnode"
)

// Node is one node: its namespace, files, Node object and agent.
type Node struct {
	*netnode.Node
	Cluster *Cluster
	// PodCIDR is the Node object's pod CIDR.
	PodCIDR netip.Prefix
	// Dataplane is the agent's --dataplane.
	Dataplane string
	// Dir is the node's directory; ConfigPath its agent config
	// (AgentConfiguration YAML), Config what that file holds.
	Dir        string
	ConfigPath string
	Config     *config.AgentConfiguration
	// CNISocket is cni.socketPath; StatusSocket the agent's local API
	// (nodenetctl --socket) beside it.
	CNISocket    string
	StatusSocket string
	// Agent is the agent started last; nil before StartAgent.
	Agent *Agent

	index   int
	runs    int
	runtime *netnode.Runtime
}

// newNode makes the node's files and its Node object.
func (c *Cluster) newNode(t netnode.TB, i int, no NodeOptions) *Node {
	t.Helper()
	n := &Node{
		Node:      c.Env.Node(no.Name),
		Cluster:   c,
		PodCIDR:   PodCIDR(i),
		Dataplane: no.Dataplane,
		Dir:       filepath.Join(c.Dir, no.Name),
		index:     i,
	}
	if n.Dataplane == "" {
		n.Dataplane = DataplaneLinux
	}
	run := filepath.Join(n.Dir, "run")
	n.CNISocket = filepath.Join(run, "cni.sock")
	n.StatusSocket = filepath.Join(run, status.SocketName)
	cfg := &config.AgentConfiguration{ClusterCIDRs: []string{ClusterCIDR}, ServiceCIDRs: []string{ServiceCIDR}}
	cfg.Network.Mode = c.opts.Mode
	cfg.CNI = config.CNIConfiguration{
		SocketPath: n.CNISocket,
		ConfDir:    filepath.Join(n.Dir, "net.d"),
		BinDir:     filepath.Join(n.Dir, "bin"),
		DataDir:    filepath.Join(n.Dir, "data"),
	}
	// The conntrack table size is the host's (a namespace can't set it);
	// the agent leaves it alone at 0.
	zero := int32(0)
	cfg.Linux.Conntrack.MaxPerCore = &zero
	if c.opts.Configure != nil {
		c.opts.Configure(n, cfg)
	}
	n.Config = cfg
	n.ConfigPath = filepath.Join(n.Dir, "agent.yaml")
	// The socket's directory must not be world-writable.
	for _, dir := range []string{run, cfg.CNI.ConfDir, cfg.CNI.BinDir, cfg.CNI.DataDir} {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			t.Fatalf("cluster: %v", err)
		}
	}
	if err := config.WriteFile(cfg, n.ConfigPath); err != nil {
		t.Fatalf("cluster: node %s: %v", n.Name, err)
	}
	if err := copyFile(filepath.Join(c.BinDir, CNIBinary), filepath.Join(cfg.CNI.BinDir, CNIBinary)); err != nil {
		t.Fatalf("cluster: install %s on %s: %v", CNIBinary, n.Name, err)
	}
	if err := c.createNodeObject(t.Context(), n); err != nil {
		t.Fatalf("cluster: %v", err)
	}
	return n
}

// ConflistPath is where the agent writes the conflist.
func (n *Node) ConflistPath() string {
	name := n.Config.CNI.ConflistName
	if name == "" {
		name = config.DefaultConflistName
	}
	return filepath.Join(n.Config.CNI.ConfDir, name)
}

// Status asks the running agent for its status over its local API.
func (n *Node) Status(ctx context.Context) (*status.Status, error) {
	var s status.Status
	if err := getJSON(ctx, n.StatusSocket, status.PathStatus, &s); err != nil {
		return nil, fmt.Errorf("status of %s's agent: %w", n.Name, err)
	}
	return &s, nil
}

// Services asks the running agent what its proxy programmed.
func (n *Node) Services(ctx context.Context) (*status.Services, error) {
	var s status.Services
	if err := getJSON(ctx, n.StatusSocket, status.PathServices, &s); err != nil {
		return nil, fmt.Errorf("services of %s's agent: %w", n.Name, err)
	}
	return &s, nil
}

// WaitReady waits until the node's agent reports its network ready, its
// CNI server ready, its proxy synced, and the conflist is written; it
// fails early when the agent exits.
func (n *Node) WaitReady(ctx context.Context) (*status.Status, error) {
	if n.Agent == nil {
		return nil, fmt.Errorf("node %s has no agent", n.Name)
	}
	ctx, cancel := context.WithTimeout(ctx, Converge)
	defer cancel()
	var last error
	for {
		s, err := n.readiness(ctx)
		if err == nil {
			return s, nil
		}
		last = err
		select {
		case <-n.Agent.Done():
			return nil, fmt.Errorf("the agent on %s exited before it was ready: %w\n%s", n.Name, n.Agent.Err(), n.Agent.LogTail(40))
		case <-ctx.Done():
			return nil, fmt.Errorf("the agent on %s not ready within %s: %w\n%s", n.Name, Converge, last, n.Agent.LogTail(40))
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// readiness checks once what WaitReady waits for.
func (n *Node) readiness(ctx context.Context) (*status.Status, error) {
	s, err := n.Status(ctx)
	if err != nil {
		return nil, err
	}
	switch {
	case !s.Network.Ready:
		return nil, fmt.Errorf("network not ready: %s: %s", s.Network.Reason, s.Network.Message)
	case !s.CNI.Ready:
		return nil, errors.New("CNI server not ready")
	case !s.Proxy.Running || s.Proxy.Syncs == 0:
		return nil, fmt.Errorf("proxy not synced (running %t, %d syncs)", s.Proxy.Running, s.Proxy.Syncs)
	}
	if _, err := os.Stat(n.ConflistPath()); err != nil {
		return nil, fmt.Errorf("no conflist: %w", err)
	}
	return s, nil
}

// getJSON GETs path from the agent's local API on socket.
func getJSON(ctx context.Context, socket, path string, into any) error {
	tr := &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", socket)
	}}
	defer tr.CloseIdleConnections()
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://agent"+path, nil)
	if err != nil {
		return err
	}
	resp, err := (&http.Client{Transport: tr}).Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s: %s", path, resp.Status, body)
	}
	return json.Unmarshal(body, into)
}

// Ctl runs nodenetctl inside the node with --socket set to its agent's
// and returns its combined output.
func (n *Node) Ctl(ctx context.Context, args ...string) (string, error) {
	args = append(args, "--socket", n.StatusSocket)
	return n.Run(ctx, filepath.Join(n.Cluster.BinDir, CtlBinary), args...)
}

// Runtime is the node's container runtime CNI side: libcni with the
// conflist the agent wrote and the nodenet-cni binary installed in the
// node's CNI bin dir, kubelet's exact path. The agent must be ready.
func (n *Node) Runtime(t netnode.TB) *netnode.Runtime {
	t.Helper()
	if n.runtime == nil {
		conflist, err := os.ReadFile(n.ConflistPath())
		if err != nil {
			t.Fatalf("cluster: %s's conflist: %v", n.Name, err)
		}
		n.runtime = n.NewRuntime(t, netnode.RuntimeOptions{Conflist: conflist, BinDir: n.Config.CNI.BinDir})
	}
	return n.runtime
}

// AddPod creates pod name on the node through CNI ADD.
func (n *Node) AddPod(t netnode.TB, name string) *netnode.Pod {
	t.Helper()
	return n.Runtime(t).AddPod(t, name)
}
