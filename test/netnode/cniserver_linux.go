package netnode

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"time"

	"github.com/nodenet/nodenet/cni"
	"github.com/nodenet/nodenet/cni/hostport"
	"github.com/nodenet/nodenet/cni/vethbridge"
)

// childEnv carries a serverSpec to a child process; see RunChild.
const childEnv = "NODENET_NETNODE_CNI_SERVER"

// childStartTimeout bounds how long a child takes to listen.
const childStartTimeout = 30 * time.Second

// serverSpec is one CNI server: for this process, or as JSON for a child.
type serverSpec struct {
	Socket    string
	IPAMDir   string
	HostNetNS string // the node's namespace, where the wiring works
	Network   *cni.NodeNetwork
}

// listenCNI makes nodenet's CNI server with the production Linux wiring
// (veths into the node bridge, hostPorts in nftables on top), hands it
// the node network when the spec has one, and listens.
func listenCNI(spec serverSpec) (*cni.Server, net.Listener, error) {
	veth, err := vethbridge.New(vethbridge.Options{HostNetNS: spec.HostNetNS})
	if err != nil {
		return nil, nil, fmt.Errorf("vethbridge: %w", err)
	}
	wiring, err := hostport.New(hostport.Options{Inner: veth, HostNetNS: spec.HostNetNS})
	if err != nil {
		return nil, nil, fmt.Errorf("hostport: %w", err)
	}
	server, err := cni.NewServer(cni.ServerOptions{SocketPath: spec.Socket, IPAMDir: spec.IPAMDir, Wiring: wiring})
	if err != nil {
		return nil, nil, err
	}
	if spec.Network != nil {
		if err := server.SetNetwork(spec.Network); err != nil {
			server.Close()
			return nil, nil, err
		}
	}
	l, err := server.Listen()
	if err != nil {
		server.Close()
		return nil, nil, err
	}
	return server, l, nil
}

// startServerProcess runs the server in a child inside node and waits
// until it listens; stop kills it. The child is this test binary, not
// nodenet-agent as in test/cluster: the agent needs an apiserver and
// brings up the node network itself, while the tests that kill a CNI
// server need only the server, over a node network they made.
func startServerProcess(node *Node, spec serverSpec) (stop func(), err error) {
	data, err := json.Marshal(spec)
	if err != nil {
		return nil, err
	}
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	// Its lifetime is the server's (stop), not a context's.
	cmd := node.Command(context.Background(), exe, "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"="+string(data))
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	p, err := StartProcess(cmd)
	if err != nil {
		return nil, err
	}
	// Ready once the socket accepts: the socket file a killed server left
	// refuses connections until the new one listens.
	deadline := time.Now().Add(childStartTimeout)
	for {
		if c, err := net.Dial("unix", spec.Socket); err == nil {
			c.Close()
			return p.Kill, nil
		}
		select {
		case <-p.Done():
			return nil, fmt.Errorf("the server process exited before it listened: %v (did TestMain call netnode.RunChild?)", p.Err())
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			p.Kill()
			return nil, fmt.Errorf("the server process does not listen on %s after %s", spec.Socket, childStartTimeout)
		}
	}
}

// RunChild makes this process the CNI server process that
// NodenetCNIOptions.Process starts, serving until it is killed; in any
// other process it returns at once. Call it first in TestMain.
func RunChild() {
	data, ok := os.LookupEnv(childEnv)
	if !ok {
		return
	}
	var spec serverSpec
	err := json.Unmarshal([]byte(data), &spec)
	if err == nil {
		var server *cni.Server
		var l net.Listener
		if server, l, err = listenCNI(spec); err == nil {
			err = server.Serve(context.Background(), l)
		}
	}
	fmt.Fprintln(os.Stderr, "netnode CNI server process:", err)
	os.Exit(1)
}
