package kubenode

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/nodenet/nodenet/test/apiserver"
	"github.com/nodenet/nodenet/test/cluster"
	"github.com/nodenet/nodenet/test/netnode"
)

// Cluster-wide CIDRs (see the address plan in doc.go).
const (
	ClusterCIDR = "10.244.0.0/16"
	ServiceCIDR = "10.96.0.0/12"
	// DNSServiceIP is kube-dns's ClusterIP, kubelet's clusterDNS, when
	// Options.ClusterDNS is set.
	DNSServiceIP = "10.96.0.10"
)

// Converge bounds the harness's waits for the cluster to settle (a
// component ready, a node Ready); nothing asserts on speed.
const Converge = 3 * time.Minute

// Options configure New.
type Options struct {
	// Nodes is how many nodes; default 1. They are named node-0, node-1...
	Nodes int
	// Binaries; zero means FindBinaries.
	Binaries *Binaries
	// BinDir holds nodenet-agent, nodenet-cni and nodenetctl (make
	// build's bin/); empty builds them into the work dir.
	BinDir string
	// AgentArgs are appended to every agent's flags; --v=2 (one line per
	// CNI request) is always there.
	AgentArgs []string
	// Install, when set, installs nodenet through its DaemonSet instead
	// of running nodenet-agent processes (see Install).
	Install *Install
	// ClusterDNS sets kubelet's clusterDNS to DNSServiceIP.
	ClusterDNS bool
	// Dir is the work dir; empty makes one under os.TempDir. It is
	// removed on success and kept (logs only) on failure or with
	// KeepLogs.
	Dir      string
	KeepLogs bool
	// Progress, when set, is called as New gets through its steps.
	Progress func(step string)
}

// Cluster is a running cluster.
type Cluster struct {
	Env *netnode.Env
	API *apiserver.Server
	// Client is the admin clientset; Kubeconfig the admin kubeconfig
	// every component uses.
	Client     kubernetes.Interface
	Kubeconfig string
	Dir        string
	BinDir     string
	Bins       Binaries
	Images     []Image
	Pause      string
	Nodes      []*Node
	// Controllers and Scheduler run in the root namespace.
	Controllers *Proc
	Scheduler   *Proc

	opts Options
	t    netnode.TB
}

// New brings the cluster up and returns once every node is Ready and its
// agent ready; everything is torn down in t's cleanup.
func New(t netnode.TB, opts Options) *Cluster {
	t.Helper()
	if opts.Nodes <= 0 {
		opts.Nodes = 1
	}
	if opts.Progress == nil {
		opts.Progress = func(string) {}
	}
	var bins Binaries
	if opts.Binaries != nil {
		bins = *opts.Binaries
	} else {
		var err error
		if bins, err = FindBinaries(); err != nil {
			t.Fatalf("kubenode: %v; %s", err, BuildHint)
		}
	}
	c := &Cluster{Bins: bins, opts: opts, t: t}
	var err error
	if c.Images, err = bins.Images(); err != nil {
		t.Fatalf("kubenode: %v", err)
	}
	if c.Pause, err = PauseImage(c.Images); err != nil {
		t.Fatalf("kubenode: %v", err)
	}
	c.makeDir(t)
	c.BinDir = opts.BinDir
	if c.BinDir == "" && opts.Install == nil {
		opts.Progress("building nodenet-agent, nodenet-cni and nodenetctl")
		c.BinDir = filepath.Join(c.Dir, "bin")
		if err := cluster.BuildBinaries(c.BinDir); err != nil {
			t.Fatalf("kubenode: %v", err)
		}
	}

	names := make([]string, opts.Nodes)
	for i := range names {
		names[i] = fmt.Sprintf("node-%d", i)
	}
	opts.Progress(fmt.Sprintf("creating %d node network namespaces on an underlay bridge", len(names)))
	c.Env = netnode.New(t, netnode.Options{Nodes: names})

	opts.Progress("starting etcd and kube-apiserver on " + c.Env.HostIP.String())
	c.startAPIServer(t)
	opts.Progress("starting kube-controller-manager and kube-scheduler")
	c.startControlPlane(t)

	for i, name := range names {
		n := c.newNode(t, i, name)
		c.Nodes = append(c.Nodes, n)
		if opts.Install != nil {
			n.startMountNamespace(t)
		}
		opts.Progress(fmt.Sprintf("%s: starting containerd, importing %d images", name, len(c.Images)))
		n.startContainerd(t)
		n.importImages(t)
		if opts.Install != nil {
			n.importNodenetImage(t)
			opts.Progress(name + ": starting kubelet (no node network yet)")
			n.startKubelet(t)
			continue
		}
		opts.Progress(name + ": starting kubelet and nodenet-agent")
		n.startKubelet(t)
		n.StartAgent(t)
	}
	if opts.Install != nil {
		c.installNodenet(t)
	}
	for _, n := range c.Nodes {
		if err := n.WaitReady(t.Context()); err != nil {
			t.Fatalf("kubenode: %v", err)
		}
		opts.Progress(fmt.Sprintf("%s Ready (pod CIDR %s)", n.Name, n.PodCIDR))
		// The apiserver reaches pods directly (pods/proxy, port-forward
		// checks), as a control-plane node on the overlay would: route
		// each pod CIDR to its node over the underlay. The route goes with
		// the underlay link.
		if out, err := exec.Command("ip", "route", "replace", n.PodCIDR.String(), "via", n.IP.String()).CombinedOutput(); err != nil {
			t.Fatalf("kubenode: route %s via %s: %v: %s", n.PodCIDR, n.IP, err, out)
		}
	}
	if err := c.waitDefaultServiceAccount(t.Context()); err != nil {
		t.Fatalf("kubenode: %v", err)
	}
	return c
}

// makeDir makes the work dir and registers its removal: kept, logs and
// configs only, when t failed.
func (c *Cluster) makeDir(t netnode.TB) {
	t.Helper()
	dir := c.opts.Dir
	if dir == "" {
		var err error
		if dir, err = os.MkdirTemp("", "nnkn-"); err != nil {
			t.Fatalf("kubenode: %v", err)
		}
	} else if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatalf("kubenode: %v", err)
	}
	// Pods run as other users read their volumes through kubelet's dirs.
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatalf("kubenode: %v", err)
	}
	c.Dir = dir
	t.Cleanup(func() {
		failed := false
		if f, ok := t.(interface{ Failed() bool }); ok {
			failed = f.Failed()
		}
		if failed || c.opts.KeepLogs {
			pruneToLogs(dir)
			t.Logf("kubenode: logs kept in %s", dir)
			return
		}
		if err := os.RemoveAll(dir); err != nil {
			t.Errorf("kubenode: %v", err)
		}
	})
}

// startAPIServer runs the apiserver on the host's underlay address, so
// kubelets and agents in the nodes reach it, with what a real cluster's
// has on: ServiceAccount admission, and the lease endpoint reconciler so
// the kubernetes Service has the apiserver as its endpoint (pods reach the
// API through nodenet's proxy).
func (c *Cluster) startAPIServer(t netnode.TB) {
	t.Helper()
	api, err := apiserver.Start(t.Context(), apiserver.Options{
		BindAddress:             c.Env.HostIP.String(),
		ServiceClusterIPRange:   ServiceCIDR,
		TempDir:                 c.Dir,
		ServiceAccountAdmission: true,
		ExtraAPIServerArgs: []string{
			"--endpoint-reconciler-type=lease",
			// Node names resolve nowhere here: reach kubelet (logs,
			// exec) at its InternalIP.
			"--kubelet-preferred-address-types=InternalIP,Hostname",
		},
	})
	if err != nil {
		t.Fatalf("kubenode: start apiserver: %v", err)
	}
	t.Cleanup(func() {
		if f, ok := t.(interface{ Failed() bool }); c.opts.KeepLogs || ok && f.Failed() {
			// Stop removes the server's dir; keep its logs.
			for _, name := range []string{"kube-apiserver.log", "etcd.log"} {
				_ = copyFileTo(filepath.Join(api.Dir, name), filepath.Join(c.Dir, name))
			}
		}
		api.Stop()
	})
	c.API = api
	c.Client = api.Client()
	c.Kubeconfig = filepath.Join(c.Dir, "kubeconfig")
	if err := api.WriteKubeconfig(c.Kubeconfig); err != nil {
		t.Fatalf("kubenode: %v", err)
	}
}

// startControlPlane runs kube-controller-manager and kube-scheduler in
// the root namespace with the admin kubeconfig.
func (c *Cluster) startControlPlane(t netnode.TB) {
	t.Helper()
	ports, err := freePorts(2)
	if err != nil {
		t.Fatalf("kubenode: %v", err)
	}
	kcm := []string{
		"--kubeconfig=" + c.Kubeconfig,
		"--authentication-kubeconfig=" + c.Kubeconfig,
		"--authorization-kubeconfig=" + c.Kubeconfig,
		"--bind-address=127.0.0.1",
		"--secure-port=" + strconv.Itoa(ports[0]),
		"--leader-elect=false",
		// Every default controller: endpointslice, nodeipam, nodelifecycle,
		// serviceaccount(-token), namespace, garbagecollector, replicaset,
		// deployment, job, ...; the cloud ones stop themselves without a
		// cloud provider.
		"--controllers=*",
		"--allocate-node-cidrs=true",
		"--cluster-cidr=" + ClusterCIDR,
		"--node-cidr-mask-size=24",
		"--service-cluster-ip-range=" + ServiceCIDR,
		"--service-account-private-key-file=" + c.API.ServiceAccountKeyFile(),
		"--root-ca-file=" + c.API.CAFile(),
		"--use-service-account-credentials=false",
		"--v=2",
	}
	c.Controllers, err = startProc("kube-controller-manager", "", c.Bins.KubeControllerManager, kcm, nil,
		filepath.Join(c.Dir, "kube-controller-manager.log"))
	if err != nil {
		t.Fatalf("kubenode: %v", err)
	}
	t.Cleanup(c.Controllers.Stop)
	sched := []string{
		"--kubeconfig=" + c.Kubeconfig,
		"--authentication-kubeconfig=" + c.Kubeconfig,
		"--authorization-kubeconfig=" + c.Kubeconfig,
		"--bind-address=127.0.0.1",
		"--secure-port=" + strconv.Itoa(ports[1]),
		"--leader-elect=false",
		"--v=2",
	}
	c.Scheduler, err = startProc("kube-scheduler", "", c.Bins.KubeScheduler, sched, nil,
		filepath.Join(c.Dir, "kube-scheduler.log"))
	if err != nil {
		t.Fatalf("kubenode: %v", err)
	}
	t.Cleanup(c.Scheduler.Stop)
}

// waitDefaultServiceAccount waits for the serviceaccount controller, so
// pods can be created in default at once.
func (c *Cluster) waitDefaultServiceAccount(ctx context.Context) error {
	return c.poll(ctx, "the default ServiceAccount", func(ctx context.Context) error {
		_, err := c.Client.CoreV1().ServiceAccounts("default").Get(ctx, "default", metav1.GetOptions{})
		return err
	})
}

// poll calls check until it succeeds, failing early when a control-plane
// process exits.
func (c *Cluster) poll(ctx context.Context, what string, check func(context.Context) error) error {
	ctx, cancel := context.WithTimeout(ctx, Converge)
	defer cancel()
	var last error
	for {
		if last = check(ctx); last == nil {
			return nil
		}
		for _, p := range []*Proc{c.Controllers, c.Scheduler} {
			if p != nil && p.Exited() {
				return fmt.Errorf("%s exited while waiting for %s: %v\n%s", p.Name, what, p.Err(), p.LogTail(30))
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for %s: %w", what, last)
		case <-time.After(500 * time.Millisecond):
		}
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

// nodeReady reports the Node's Ready condition.
func nodeReady(n *corev1.Node) (bool, string) {
	for _, cond := range n.Status.Conditions {
		if cond.Type == corev1.NodeReady {
			return cond.Status == corev1.ConditionTrue, cond.Reason + ": " + cond.Message
		}
	}
	return false, "no Ready condition yet"
}

// freePorts returns n loopback ports free right now.
func freePorts(n int) ([]int, error) {
	var ports []int
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// writeFile writes a file the harness made (a config), making its dir.
func writeFile(path, data string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return os.WriteFile(path, []byte(data), 0o644)
}

func copyFileTo(src, dst string) error {
	data, err := os.ReadFile(src)
	if err != nil {
		return err
	}
	return os.WriteFile(dst, data, 0o644)
}

// pruneToLogs removes everything under dir but logs and configs, what a
// failure is read from (image stores and pod roots are large).
func pruneToLogs(dir string) {
	_ = filepath.Walk(dir, func(path string, info os.FileInfo, err error) error {
		if err != nil || path == dir {
			return nil
		}
		if info.IsDir() {
			switch info.Name() {
			case "root", "kubelet", "state", "bin", "data":
				_ = os.RemoveAll(path)
				return filepath.SkipDir
			}
			return nil
		}
		keep := strings.HasSuffix(path, ".log") || strings.HasSuffix(path, ".yaml") ||
			strings.HasSuffix(path, ".toml") || strings.HasSuffix(path, ".conflist")
		if !keep {
			_ = os.Remove(path)
		}
		return nil
	})
}
