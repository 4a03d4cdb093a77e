package netnode

import (
	"context"
	"fmt"
	"net/netip"

	"github.com/containernetworking/cni/libcni"
	"github.com/containernetworking/cni/pkg/types"
	current "github.com/containernetworking/cni/pkg/types/100"
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
	return &Runtime{node: n, client: NewCNIClient(opts.BinDir, t.TempDir()), list: list}
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
	// Conf is what the runtime passes for the pod (container ID
	// "ctr-<name>", eth0, the Kubernetes args); edit it before ADD for
	// capabilities such as portMappings.
	Conf *libcni.RuntimeConf
}

// NewPod creates a pod's namespace on n without networking it; use
// Runtime.Add, or wire it by hand.
func (n *Node) NewPod(t TB, name string) *Pod {
	t.Helper()
	p := &Pod{Name: name, Node: n, NS: newNS(t, n.env.name(n.Name, name))}
	p.Conf = &libcni.RuntimeConf{
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
	err := r.do("ADD pod "+p.Name, func() error {
		raw, err := r.client.AddNetworkList(ctx, r.list, p.Conf)
		if err != nil {
			return err
		}
		res, err = current.NewResultFromResult(raw)
		return err
	})
	if err != nil {
		return err
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
	return r.do("DEL pod "+p.Name, func() error { return r.client.DelNetworkList(ctx, r.list, p.Conf) })
}

// Check runs CHECK for p.
func (r *Runtime) Check(ctx context.Context, p *Pod) error {
	return r.do("CHECK pod "+p.Name, func() error { return r.client.CheckNetworkList(ctx, r.list, p.Conf) })
}

// GC runs GC: every attachment but valid's may go.
func (r *Runtime) GC(ctx context.Context, valid []types.GCAttachment) error {
	return r.do("GC", func() error {
		return r.client.GCNetworkList(ctx, r.list, &libcni.GCArgs{ValidAttachments: valid})
	})
}

// Status runs STATUS.
func (r *Runtime) Status(ctx context.Context) error {
	return r.do("STATUS", func() error { return r.client.GetStatusNetworkList(ctx, r.list) })
}

// Conflist is the network configuration list the runtime holds.
func (r *Runtime) Conflist() []byte { return r.list.Bytes }

// do runs a CNI operation inside the node and names it in the error,
// which wraps the plugin's (*types.Error keeps its code).
func (r *Runtime) do(op string, fn func() error) error {
	if err := r.node.Do(fn); err != nil {
		return fmt.Errorf("%s on %s: %w", op, r.node.Name, err)
	}
	return nil
}
