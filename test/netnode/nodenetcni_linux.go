package netnode

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/nodenet/nodenet/agent/config"
	"github.com/nodenet/nodenet/cni"
	"github.com/nodenet/nodenet/cni/hostport"
	"github.com/nodenet/nodenet/cni/vethbridge"
)

// NodenetCNI is nodenet's CNI server for one node, running in this
// process with the production Linux wiring, plus the runtime that drives
// the real nodenet-cni binary against it. The server answers "try again
// later" until it is handed the node network (Server.SetNetwork), which
// the overlay controller's OnReady does in e2e tests.
type NodenetCNI struct {
	*Runtime
	Server *cni.Server
}

// NodenetCNIOptions configure StartNodenetCNI.
type NodenetCNIOptions struct {
	// NetworkName is network.name: the conflist's name and the node
	// bridge; default config.DefaultNetworkName.
	NetworkName string
}

// StartNodenetCNI starts the CNI server for n and stops it in t.Cleanup.
func (n *Node) StartNodenetCNI(t testing.TB, opts NodenetCNIOptions) *NodenetCNI {
	t.Helper()
	if opts.NetworkName == "" {
		opts.NetworkName = config.DefaultNetworkName
	}
	// Short and private: the socket path must fit sun_path and its
	// directory must not be world-writable.
	dir, err := os.MkdirTemp("", "nn-cni-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	socket := filepath.Join(dir, "cni.sock")

	veth, err := vethbridge.New(vethbridge.Options{HostNetNS: n.Path})
	if err != nil {
		t.Fatalf("netnode: vethbridge: %v", err)
	}
	wiring, err := hostport.New(hostport.Options{Inner: veth, HostNetNS: n.Path})
	if err != nil {
		t.Fatalf("netnode: hostport: %v", err)
	}
	server, err := cni.NewServer(cni.ServerOptions{SocketPath: socket, IPAMDir: filepath.Join(dir, "ipam"), Wiring: wiring})
	if err != nil {
		t.Fatalf("netnode: %v", err)
	}
	l, err := server.Listen()
	if err != nil {
		t.Fatalf("netnode: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- server.Serve(ctx, l) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("netnode: CNI server of %s: %v", n.Name, err)
		}
		l.Close()
		server.Close()
	})

	cfg := &config.AgentConfiguration{}
	cfg.Network.Name = opts.NetworkName
	cfg.CNI.SocketPath = socket
	conflist, err := cni.RenderConflist(cfg)
	if err != nil {
		t.Fatalf("netnode: %v", err)
	}
	return &NodenetCNI{Runtime: n.NewRuntime(t, RuntimeOptions{Conflist: conflist}), Server: server}
}
