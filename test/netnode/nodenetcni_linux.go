package netnode

import (
	"context"
	"os"
	"path/filepath"

	"github.com/nodenet/nodenet/cni"
	"github.com/nodenet/nodenet/config"
)

// NodenetCNI is nodenet's CNI server for one node with the production
// Linux wiring, plus the runtime that drives the real nodenet-cni binary
// against it. The server runs in this process, or in a child process with
// NodenetCNIOptions.Process. It answers "try again later" until it has
// the node network (NodenetCNIOptions.Network, or Server.SetNetwork, which
// the overlay controller's OnReady calls in e2e tests).
//
// With NodenetCNIOptions.AgentSocket the server is a nodenet-agent
// process's instead, and only the runtime is here.
type NodenetCNI struct {
	*Runtime
	// Server is the in-process server while it runs; nil with AgentSocket
	// or Process.
	Server *cni.Server
	// Dir is the server's private directory, holding Socket and the IPAM
	// store IPAMDir (host-local's layout: IPAMDir/<network>/<address>);
	// empty with AgentSocket.
	Dir, Socket, IPAMDir string

	t    TB
	node *Node
	opts NodenetCNIOptions
	stop func() // ends the running server; nil while none runs
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
	// Network, when set, is handed to the server whenever it starts, as
	// the agent does once its node network is up.
	Network *cni.NodeNetwork
	// Process runs the server in a child process inside the node, so that
	// Stop kills it as an agent crash would. The child is this test binary
	// again: its TestMain must call RunChild first. Needs Network.
	Process bool
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
	if opts.Process && opts.Network == nil {
		t.Fatal("netnode: a CNI server process needs the node network up front")
	}
	// Short and private: the socket path must fit sun_path and its
	// directory must not be world-writable.
	dir, err := os.MkdirTemp("", "nn-cni-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	c := &NodenetCNI{
		Dir: dir, Socket: filepath.Join(dir, "cni.sock"), IPAMDir: filepath.Join(dir, "ipam"),
		t: t, node: n, opts: opts,
	}
	c.Start(t)
	t.Cleanup(c.Stop)
	c.Runtime = n.NewRuntime(t, RuntimeOptions{Conflist: renderConflist(t, opts.NetworkName, c.Socket), BinDir: opts.BinDir})
	return c
}

// Start starts the server again after Stop, over the same socket and IPAM
// store: an agent restart.
func (c *NodenetCNI) Start(t TB) {
	t.Helper()
	if c.stop != nil {
		t.Fatalf("netnode: the CNI server of %s runs already", c.node.Name)
	}
	spec := serverSpec{Socket: c.Socket, IPAMDir: c.IPAMDir, HostNetNS: c.node.Path, Network: c.opts.Network}
	var err error
	if c.opts.Process {
		c.stop, err = startServerProcess(c.node, spec)
	} else {
		c.stop, err = c.serveHere(spec)
	}
	if err != nil {
		t.Fatalf("netnode: CNI server of %s: %v", c.node.Name, err)
	}
}

// Stop ends the server: an in-process one shuts down, a child process is
// killed (SIGKILL: nothing cleaned up). Its socket path and IPAM store
// stay for Start. Stopping a stopped server does nothing.
func (c *NodenetCNI) Stop() {
	if c.stop != nil {
		c.stop()
		c.stop = nil
	}
}

// serveHere runs the server in this process.
func (c *NodenetCNI) serveHere(spec serverSpec) (stop func(), err error) {
	server, l, err := listenCNI(spec)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- server.Serve(ctx, l) }()
	c.Server = server
	return func() {
		cancel()
		if err := <-done; err != nil {
			c.t.Errorf("netnode: CNI server of %s: %v", c.node.Name, err)
		}
		l.Close()
		server.Close()
		c.Server = nil
	}, nil
}

// renderConflist is the agent's conflist for a network and socket.
func renderConflist(t TB, network, socket string) []byte {
	t.Helper()
	conflist, err := cni.RenderConflist(cni.ConflistOptions{Network: network, SocketPath: socket})
	if err != nil {
		t.Fatalf("netnode: %v", err)
	}
	return conflist
}
