package netnode

import (
	"context"
	"fmt"
	"net/netip"
	"os"

	"github.com/containernetworking/cni/libcni"
	"github.com/containernetworking/cni/pkg/invoke"
	current "github.com/containernetworking/cni/pkg/types/100"
	"github.com/containernetworking/cni/pkg/version"
)

// Runtime is the CNI side of a container runtime on one node: one libcni
// client and one conflist, the way containerd holds them.
//
// ADD and DEL run on a thread inside the node's namespace, so the plugins
// start there, as they would on a real node: plugins that act on "the
// host" (the reference bridge plugin makes its bridge there) act on the
// node.
type Runtime struct {
	node   *Node
	client *libcni.CNIConfig
	list   *libcni.NetworkConfigList
}

// RuntimeOptions configure NewRuntime.
type RuntimeOptions struct {
	// Conflist is the network configuration list, as in /etc/cni/net.d.
	Conflist []byte
	// BinDir is the CNI_PATH; default Env.PluginDir().
	BinDir string
}

// NewRuntime returns a runtime for n.
func (n *Node) NewRuntime(t TB, opts RuntimeOptions) *Runtime {
	t.Helper()
	if opts.BinDir == "" {
		dir, err := n.env.PluginDir()
		if err != nil {
			t.Fatalf("netnode: %v", err)
		}
		opts.BinDir = dir
	}
	list, err := libcni.ConfListFromBytes(opts.Conflist)
	if err != nil {
		t.Fatalf("netnode: conflist: %v", err)
	}
	// The executor is set up front: libcni fills a nil one in lazily,
	// which races when ADDs run in parallel.
	exec := &invoke.DefaultExec{RawExec: &invoke.RawExec{Stderr: os.Stderr}, PluginDecoder: version.PluginDecoder{}}
	return &Runtime{
		node:   n,
		client: libcni.NewCNIConfigWithCacheDir([]string{opts.BinDir}, t.TempDir(), exec),
		list:   list,
	}
}

// Pod is a pod sandbox: its own namespace, and its address once added.
type Pod struct {
	*NS
	// Name is the pod's name (K8S_POD_NAME).
	Name string
	// Node is where it runs.
	Node *Node
	// IP is the first address ADD returned.
	IP netip.Addr

	rt *libcni.RuntimeConf
}

// NewPod creates a pod's namespace on n without networking it; use
// Runtime.Add, or wire it by hand.
func (n *Node) NewPod(t TB, name string) *Pod {
	t.Helper()
	p := &Pod{Name: name, Node: n, NS: newNS(t, n.env.name(n.Name, name))}
	p.rt = &libcni.RuntimeConf{
		ContainerID: "ctr-" + name,
		NetNS:       p.Path,
		IfName:      "eth0",
		Args: [][2]string{
			{"IgnoreUnknown", "1"},
			{"K8S_POD_NAMESPACE", "default"},
			{"K8S_POD_NAME", name},
			{"K8S_POD_INFRA_CONTAINER_ID", "ctr-" + name},
		},
	}
	return p
}

// AddPod creates a pod and runs ADD for it; a failed ADD fails t.
func (r *Runtime) AddPod(t TB, name string) *Pod {
	t.Helper()
	p := r.node.NewPod(t, name)
	if err := r.Add(t.Context(), p); err != nil {
		t.Fatalf("netnode: %v", err)
	}
	return p
}

// Add runs ADD for p and records its address.
func (r *Runtime) Add(ctx context.Context, p *Pod) error {
	var res *current.Result
	err := r.node.Do(func() error {
		raw, err := r.client.AddNetworkList(ctx, r.list, p.rt)
		if err != nil {
			return err
		}
		res, err = current.NewResultFromResult(raw)
		return err
	})
	if err != nil {
		return fmt.Errorf("ADD pod %s on %s: %w", p.Name, r.node.Name, err)
	}
	if len(res.IPs) == 0 {
		return fmt.Errorf("ADD pod %s on %s returned no address", p.Name, r.node.Name)
	}
	ip, _ := netip.AddrFromSlice(res.IPs[0].Address.IP)
	p.IP = ip.Unmap()
	return nil
}

// Del runs DEL for p.
func (r *Runtime) Del(ctx context.Context, p *Pod) error {
	err := r.node.Do(func() error { return r.client.DelNetworkList(ctx, r.list, p.rt) })
	if err != nil {
		return fmt.Errorf("DEL pod %s on %s: %w", p.Name, r.node.Name, err)
	}
	return nil
}
