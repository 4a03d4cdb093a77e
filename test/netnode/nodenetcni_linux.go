package netnode

import (
	"context"
	"os"
	"path/filepath"

	"github.com/nodenet/nodenet/cni"
	"github.com/nodenet/nodenet/cni/hostport"
	"github.com/nodenet/nodenet/cni/vethbridge"
	"github.com/nodenet/nodenet/config"
)

// NodenetCNI is nodenet's CNI server for one node, running in this
// process with the production Linux wiring, plus the runtime that drives
// the real nodenet-cni binary against it. The server answers "try again
// later" until it is handed the node network (Server.SetNetwork), which
// the overlay controller's OnReady does in e2e tests.
//
// With NodenetCNIOptions.AgentSocket the server is a nodenet-agent
// process's instead, and only the runtime is here.
type NodenetCNI struct {
	*Runtime
	// Server is the in-process server; nil with AgentSocket.
	Server *cni.Server
}

// NodenetCNIOptions configure StartNodenetCNI.
type NodenetCNIOptions struct {
	// NetworkName is network.name: the conflist's name and the node
	// bridge; default config.DefaultNetworkName.
	NetworkName string
	// AgentSocket is the CNI socket of a nodenet-agent serving the node
	// (its cni.socketPath): when set, no server starts here and the
	// conflist points the plugin at that socket.
	AgentSocket string
	// BinDir is the runtime's CNI_PATH, holding nodenet-cni; default
	// Env.PluginDir().
	BinDir string
}

// StartNodenetCNI starts the CNI server for n and stops it in t.Cleanup.
func (n *Node) StartNodenetCNI(t TB, opts NodenetCNIOptions) *NodenetCNI {
	t.Helper()
	if opts.NetworkName == "" {
		opts.NetworkName = config.DefaultNetworkName
	}
	if opts.AgentSocket != "" {
		return &NodenetCNI{Runtime: n.NewRuntime(t, RuntimeOptions{
			Conflist: renderConflist(t, opts.NetworkName, opts.AgentSocket),
			BinDir:   opts.BinDir,
		})}
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

	conflist := renderConflist(t, opts.NetworkName, socket)
	return &NodenetCNI{Runtime: n.NewRuntime(t, RuntimeOptions{Conflist: conflist, BinDir: opts.BinDir}), Server: server}
}

// renderConflist is the agent's conflist for a network and socket.
func renderConflist(t TB, network, socket string) []byte {
	t.Helper()
	cfg := &config.AgentConfiguration{}
	cfg.Network.Name = network
	cfg.CNI.SocketPath = socket
	conflist, err := cni.RenderConflist(cfg)
	if err != nil {
		t.Fatalf("netnode: %v", err)
	}
	return conflist
}
