package cluster

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"time"

	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodenet/nodenet/config"
	"github.com/nodenet/nodenet/test/apiserver"
	"github.com/nodenet/nodenet/test/netnode"
)

// Cluster-wide CIDRs (see the address plan in doc.go).
const (
	ClusterCIDR = "10.244.0.0/16"
	ServiceCIDR = "10.96.0.0/12"
)

const (
	// DirPrefix starts the name of every cluster's directory in
	// os.TempDir; Clean looks for it.
	DirPrefix = "nncl-"
	// lockName is the file a live cluster holds a lock on, in its Dir.
	lockName = ".lock"
	// Converge bounds the harness's waits for the cluster to settle
	// (an agent ready, a pod wired); nothing asserts on speed.
	Converge = 60 * time.Second
	// nodeAnnotation is on every Node from creation, so no agent meets a
	// nil annotations map (flanneld crashes on one).
	nodeAnnotation = "nodenet.io/test-cluster"
)

// Dataplanes an agent runs (its --dataplane).
const (
	DataplaneLinux = "linux"
	// DataplaneSim is the HNS simulator: what a Windows node would get.
	DataplaneSim = "sim"
)

// NodeOptions describe one node.
type NodeOptions struct {
	// Name is the node's (and its Node object's) name.
	Name string
	// Dataplane is the agent's --dataplane: DataplaneLinux (default) or
	// DataplaneSim, which makes the Node a Windows one
	// (kubernetes.io/os=windows).
	Dataplane string
	// NoAgent leaves the node without an agent; start one with
	// Node.StartAgent.
	NoAgent bool
}

// Options configure New.
type Options struct {
	// Nodes are created in order; the i-th (from 0) gets pod CIDR
	// 10.244.(i+1).0/24 and underlay address .(11+i).
	Nodes []NodeOptions
	// Mode is every node's network.mode; default overlay.
	Mode config.NetworkMode
	// BinDir holds nodenet-agent, nodenet-cni and nodenetctl (make
	// build's bin/); empty builds them into the cluster's directory.
	BinDir string
	// AgentArgs are appended to every agent's flags (e.g. --v=4).
	AgentArgs []string
	// Configure, when set, adjusts each node's config before it is
	// written.
	Configure func(n *Node, cfg *config.AgentConfiguration)
	// Progress, when set, is called as New gets through its steps, for a
	// demo's progress lines.
	Progress func(step string)
}

// Cluster is a running cluster.
type Cluster struct {
	Env *netnode.Env
	API *apiserver.Server
	// Nodes in Options order.
	Nodes []*Node
	// Dir is the cluster's private directory; BinDir where its binaries
	// are; Kubeconfig the admin kubeconfig every agent uses.
	Dir        string
	BinDir     string
	Kubeconfig string

	opts Options
}

// New builds the cluster, starts the agents and waits until each is
// ready (see Node.WaitReady). Everything goes in t's cleanup, agents
// first.
func New(t netnode.TB, opts Options) *Cluster {
	t.Helper()
	if opts.Mode == "" {
		opts.Mode = config.NetworkModeOverlay
	}
	if opts.Progress == nil {
		opts.Progress = func(string) {}
	}
	c := &Cluster{opts: opts}
	c.makeDir(t)
	c.BinDir = opts.BinDir
	if c.BinDir == "" {
		opts.Progress("building nodenet-agent, nodenet-cni and nodenetctl")
		c.BinDir = filepath.Join(c.Dir, "bin")
		if err := buildBinaries(c.BinDir); err != nil {
			t.Fatalf("cluster: %v", err)
		}
	}
	if err := checkBinaries(c.BinDir); err != nil {
		t.Fatalf("cluster: %v", err)
	}

	names := make([]string, len(opts.Nodes))
	for i, n := range opts.Nodes {
		names[i] = n.Name
	}
	opts.Progress(fmt.Sprintf("creating %d node network namespaces on an underlay bridge", len(names)))
	c.Env = netnode.New(t, netnode.Options{Nodes: names})

	opts.Progress(fmt.Sprintf("starting etcd and kube-apiserver on %s", c.Env.HostIP))
	c.startAPIServer(t)
	for i, no := range opts.Nodes {
		c.Nodes = append(c.Nodes, c.newNode(t, i, no))
	}
	opts.Progress(fmt.Sprintf("created %d Node objects with pod CIDRs", len(c.Nodes)))

	var started []*Node
	for _, n := range c.Nodes {
		if opts.Nodes[n.index].NoAgent {
			continue
		}
		n.StartAgent(t, AgentOptions{})
		started = append(started, n)
		opts.Progress(fmt.Sprintf("started nodenet-agent --dataplane=%s on %s (pid %d)", n.Dataplane, n.Name, n.Agent.PID()))
	}
	for _, n := range started {
		if _, err := n.WaitReady(t.Context()); err != nil {
			t.Fatalf("cluster: %v", err)
		}
	}
	if len(started) > 0 {
		opts.Progress("every agent is ready: network, CNI server and proxy")
	}
	return c
}

// makeDir makes the cluster's directory and locks it while this
// process lives.
func (c *Cluster) makeDir(t netnode.TB) {
	t.Helper()
	dir, err := os.MkdirTemp("", DirPrefix)
	if err != nil {
		t.Fatalf("cluster: %v", err)
	}
	t.Cleanup(func() {
		if err := os.RemoveAll(dir); err != nil {
			t.Errorf("cluster: %v", err)
		}
	})
	lock, err := os.Create(filepath.Join(dir, lockName))
	if err != nil {
		t.Fatalf("cluster: %v", err)
	}
	if err := unix.Flock(int(lock.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		t.Fatalf("cluster: lock %s: %v", dir, err)
	}
	t.Cleanup(func() { lock.Close() })
	c.Dir = dir
}

// startAPIServer runs the apiserver on the host's underlay address, so
// agents in the nodes reach it, and writes the kubeconfig.
func (c *Cluster) startAPIServer(t netnode.TB) {
	t.Helper()
	api, err := apiserver.Start(t.Context(), apiserver.Options{
		BindAddress:           c.Env.HostIP.String(),
		ServiceClusterIPRange: ServiceCIDR,
		TempDir:               c.Dir,
	})
	if err != nil {
		t.Fatalf("cluster: start apiserver: %v", err)
	}
	t.Cleanup(func() {
		if f, ok := t.(interface{ Failed() bool }); ok && f.Failed() {
			t.Logf("apiserver logs (%s):\n%s", api.Dir, api.LogTail())
		}
		api.Stop()
	})
	c.API = api
	c.Kubeconfig = filepath.Join(c.Dir, "kubeconfig")
	if err := api.WriteKubeconfig(c.Kubeconfig); err != nil {
		t.Fatalf("cluster: %v", err)
	}
}

// Node returns the node called name, or nil.
func (c *Cluster) Node(name string) *Node {
	for _, n := range c.Nodes {
		if n.Name == name {
			return n
		}
	}
	return nil
}

// PodCIDR is the i-th node's (from 0) pod CIDR.
func PodCIDR(i int) netip.Prefix {
	return netip.PrefixFrom(netip.AddrFrom4([4]byte{10, 244, byte(i + 1), 0}), 24)
}

// createNodeObject registers n with the apiserver, as kubelet and the
// node IPAM controller would have: InternalIP and pod CIDR set.
func (c *Cluster) createNodeObject(ctx context.Context, n *Node) error {
	nodeOS := "linux"
	if n.Dataplane == DataplaneSim {
		nodeOS = "windows"
	}
	obj := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name: n.Name,
			Labels: map[string]string{
				corev1.LabelHostname: n.Name,
				corev1.LabelOSStable: nodeOS,
			},
			Annotations: map[string]string{nodeAnnotation: "true"},
		},
		Spec: corev1.NodeSpec{PodCIDR: n.PodCIDR.String(), PodCIDRs: []string{n.PodCIDR.String()}},
		Status: corev1.NodeStatus{
			Addresses: []corev1.NodeAddress{
				{Type: corev1.NodeInternalIP, Address: n.IP.String()},
				{Type: corev1.NodeHostName, Address: n.Name},
			},
		},
	}
	// Nodes take their status on create, as kubelet registers them.
	if _, err := c.API.Client().CoreV1().Nodes().Create(ctx, obj, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("create Node %s: %w", n.Name, err)
	}
	return nil
}
