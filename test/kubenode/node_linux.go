package kubenode

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodenet/nodenet/agent/status"
	"github.com/nodenet/nodenet/config"
	"github.com/nodenet/nodenet/test/cluster"
	"github.com/nodenet/nodenet/test/netnode"
)

// OrphanGracePeriod is the agents' cni.orphanGracePeriod: how old an
// address no pod sandbox holds must be before the agent releases it.
// Short, so tests converge within Converge; long enough for a sandbox to
// be listed after its CNI ADD on a loaded machine.
const OrphanGracePeriod = 20 * time.Second

// Node is one node: its namespace, files and processes.
type Node struct {
	*netnode.Node
	Cluster *Cluster
	// Dir is the node's directory.
	Dir string
	// PodCIDR is what Node IPAM gave the Node (set by WaitReady).
	PodCIDR netip.Prefix
	// ContainerdSocket is the node's CRI endpoint.
	ContainerdSocket string
	// CgroupRoot is kubelet's cgroupRoot (in every v1 hierarchy).
	CgroupRoot string
	// AgentConfig is the agent's config file; CNIConfDir, CNIBinDir and
	// CNIDataDir its cni section; StatusSocket its local API.
	AgentConfig  string
	CNIConfDir   string
	CNIBinDir    string
	CNIDataDir   string
	StatusSocket string

	// MountNS is the node's mount namespace (/proc/PID/ns/mnt) when
	// nodenet is installed through its DaemonSet (Options.Install);
	// containerd and kubelet run in it.
	MountNS string

	Containerd *Proc
	Kubelet    *Proc
	// Agent is the agent process; nil when the DaemonSet runs it.
	Agent *Proc

	agentRuns, containerdRuns int
	mountNSHolder             *Proc
}

// installed reports whether the DaemonSet runs the node's agent.
func (n *Node) installed() bool { return n.Cluster.opts.Install != nil }

// newNode makes the node's files: the agent config, the CNI bin dir with
// nodenet-cni and loopback, and kubelet's cgroup root.
func (c *Cluster) newNode(t netnode.TB, i int, name string) *Node {
	t.Helper()
	n := &Node{Node: c.Env.Node(name), Cluster: c, Dir: filepath.Join(c.Dir, name)}
	n.ContainerdSocket = filepath.Join(n.Dir, "containerd", "containerd.sock")
	n.CgroupRoot = fmt.Sprintf("/nodenet-kubenode-%s-%s", filepath.Base(c.Dir), name)
	if c.opts.Install != nil {
		if err := os.MkdirAll(n.Dir, 0o755); err != nil {
			t.Fatalf("kubenode: %v", err)
		}
		t.Cleanup(func() { n.teardown(t) })
		n.newInstallNode(t)
		n.nodeSetup(t)
		return n
	}
	n.CNIConfDir = filepath.Join(n.Dir, "net.d")
	n.CNIBinDir = filepath.Join(n.Dir, "bin")
	n.CNIDataDir = filepath.Join(n.Dir, "data")
	run := filepath.Join(n.Dir, "run")
	n.StatusSocket = filepath.Join(run, status.SocketName)
	for _, d := range []string{run, n.CNIConfDir, n.CNIBinDir, n.CNIDataDir} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatalf("kubenode: %v", err)
		}
	}
	// The node's cleanup goes first (registered after the dir's), so it
	// runs before the dir is pruned or removed.
	t.Cleanup(func() { n.teardown(t) })

	cfg := &config.AgentConfiguration{ClusterCIDRs: []string{ClusterCIDR}, ServiceCIDRs: []string{ServiceCIDR}}
	cfg.Network.Mode = config.NetworkModeOverlay
	cfg.CNI = config.CNIConfiguration{
		SocketPath: filepath.Join(run, "cni.sock"),
		ConfDir:    n.CNIConfDir,
		BinDir:     n.CNIBinDir,
		DataDir:    n.CNIDataDir,
		// The node's own containerd; addresses no sandbox holds are
		// released after OrphanGracePeriod rather than the default 5m,
		// so a test that kills the agent mid-ADD converges.
		RuntimeEndpoint:   "unix://" + n.ContainerdSocket,
		OrphanGracePeriod: &metav1.Duration{Duration: OrphanGracePeriod},
	}
	// The conntrack table size is the host's; a namespace can't set it.
	zero := int32(0)
	cfg.Linux.Conntrack.MaxPerCore = &zero
	n.AgentConfig = filepath.Join(n.Dir, "agent.yaml")
	if err := config.WriteFile(cfg, n.AgentConfig); err != nil {
		t.Fatalf("kubenode: %s: %v", name, err)
	}
	// deploy/: the DaemonSet copies nodenet-cni into the host's CNI bin
	// dir; containerd also runs the loopback plugin from there.
	installs := map[string]string{
		cluster.CNIBinary: filepath.Join(c.BinDir, cluster.CNIBinary),
		"loopback":        filepath.Join(c.Bins.CNIPluginsDir, "loopback"),
	}
	for dst, src := range installs {
		if err := copyExecutable(src, filepath.Join(n.CNIBinDir, dst)); err != nil {
			t.Fatalf("kubenode: %s: install %s: %v", name, dst, err)
		}
	}
	n.nodeSetup(t)
	return n
}

// nodeSetup is what every node gets whoever runs its agent: a default
// route and kubelet's cgroup root.
func (n *Node) nodeSetup(t netnode.TB) {
	t.Helper()
	// A real node has a default route; without one, the node's own
	// connections to a ClusterIP fail at the route lookup, before any
	// service proxy's DNAT (kube-proxy needs it too).
	if out, err := n.Run(t.Context(), "ip", "route", "replace", "default", "via", n.Cluster.Env.HostIP.String()); err != nil {
		t.Fatalf("kubenode: %s: default route: %v: %s", n.Name, err, out)
	}
	if err := makeCgroupRoot(n.CgroupRoot); err != nil {
		t.Fatalf("kubenode: %s: %v", n.Name, err)
	}
}

// startContainerd writes the node's containerd config and runs it in the
// node's namespace (pods' namespaces are made there, the node's is their
// host's) with the shim first on PATH.
func (n *Node) startContainerd(t netnode.TB) {
	t.Helper()
	if err := n.StartContainerd(); err != nil {
		t.Fatalf("kubenode: %v", err)
	}
	if err := n.waitCRI(t.Context()); err != nil {
		t.Fatalf("kubenode: %v", err)
	}
}

// StartContainerd (re)starts the node's containerd; it does not wait for
// CRI (see WaitCRI).
func (n *Node) StartContainerd() error {
	c := n.Cluster
	dir := filepath.Join(n.Dir, "containerd")
	cfgPath := filepath.Join(dir, "config.toml")
	spec := containerdSpec{
		Root:               filepath.Join(dir, "root"),
		State:              filepath.Join(dir, "state"),
		Socket:             n.ContainerdSocket,
		SandboxImage:       c.Pause,
		Runc:               c.Bins.Runc,
		CNIConfDir:         n.CNIConfDir,
		CNIBinDir:          n.CNIBinDir,
		Snapshotter:        "overlayfs",
		NetnsUnderStateDir: true,
	}
	if n.installed() {
		// Inside the node's mount namespace: the paths a real node's
		// containerd uses, which are the node's own directories there.
		spec.Socket = "/run/containerd/containerd.sock"
		spec.CNIConfDir, spec.CNIBinDir = "/etc/cni/net.d", "/opt/cni/bin"
		spec.NetnsUnderStateDir = false
	}
	cfg := containerdConfig(spec)
	if err := writeFile(cfgPath, cfg); err != nil {
		return err
	}
	path := filepath.Dir(c.Bins.ContainerdShim) + ":" + filepath.Dir(c.Bins.Runc) + ":" + os.Getenv("PATH")
	n.containerdRuns++
	p, err := startProcNS(n.Name+" containerd", n.Path, n.MountNS, c.Bins.Containerd,
		[]string{"--config", cfgPath, "--log-level", "info"},
		[]string{"PATH=" + path}, filepath.Join(n.Dir, "containerd.log"))
	if err != nil {
		return err
	}
	n.Containerd = p
	return nil
}

// WaitCRI waits until containerd answers CRI.
func (n *Node) waitCRI(ctx context.Context) error {
	return n.poll(ctx, "containerd's CRI", func(ctx context.Context) error {
		if n.Containerd.Exited() {
			return fmt.Errorf("containerd exited: %v\n%s", n.Containerd.Err(), n.Containerd.LogTail(30))
		}
		_, err := n.Crictl(ctx, "info")
		return err
	})
}

// WaitCRI waits until containerd answers CRI.
func (n *Node) WaitCRI(ctx context.Context) error { return n.waitCRI(ctx) }

// importImages imports every image archive into containerd's k8s.io
// namespace, where CRI looks, so nothing is ever pulled.
func (n *Node) importImages(t netnode.TB) {
	t.Helper()
	imported := map[string]bool{} // an archive may carry several refs
	for _, im := range n.Cluster.Images {
		if imported[im.Archive] {
			continue
		}
		imported[im.Archive] = true
		out, err := exec.CommandContext(t.Context(), n.Cluster.Bins.Ctr, "--address", n.ContainerdSocket,
			"-n", "k8s.io", "images", "import", im.Archive).CombinedOutput()
		if err != nil {
			t.Fatalf("kubenode: %s: import %s: %v\n%s", n.Name, im.Archive, err, out)
		}
	}
	out, err := n.Crictl(t.Context(), "images", "-o", "json")
	if err != nil {
		t.Fatalf("kubenode: %s: %v", n.Name, err)
	}
	for _, im := range n.Cluster.Images {
		if !strings.Contains(out, `"`+im.Ref+`"`) {
			t.Fatalf("kubenode: %s: image %s not in CRI after importing %s:\n%s", n.Name, im.Ref, im.Archive, out)
		}
	}
}

// startKubelet writes the node's KubeletConfiguration and runs kubelet in
// the node's namespace.
func (n *Node) startKubelet(t netnode.TB) {
	t.Helper()
	c := n.Cluster
	resolv := filepath.Join(n.Dir, "resolv.conf")
	// Pods with dnsPolicy Default get this: no host resolver is
	// reachable from a node namespace.
	if err := writeFile(resolv, "nameserver "+c.Env.HostIP.String()+"\n"); err != nil {
		t.Fatalf("kubenode: %v", err)
	}
	spec := kubeletSpec{
		NodeIP:        n.IP.String(),
		CgroupRoot:    n.CgroupRoot,
		RuntimeSocket: n.kubeletRuntimeSocket(),
		ResolvConf:    resolv,
		PodLogsDir:    filepath.Join(n.Dir, "pod-logs"),
		MaxPods:       110,
	}
	if c.opts.ClusterDNS {
		spec.ClusterDNS = []string{DNSServiceIP}
	}
	cfgPath := filepath.Join(n.Dir, "kubelet.yaml")
	if err := writeFile(cfgPath, kubeletConfig(spec)); err != nil {
		t.Fatalf("kubenode: %v", err)
	}
	args := []string{
		"--config=" + cfgPath,
		"--kubeconfig=" + c.Kubeconfig,
		"--root-dir=" + filepath.Join(n.Dir, "kubelet"),
		"--node-ip=" + n.IP.String(),
		"--hostname-override=" + n.Name,
		"--v=2",
	}
	p, err := startProcNS(n.Name+" kubelet", n.Path, n.MountNS, c.Bins.Kubelet, args, nil, filepath.Join(n.Dir, "kubelet.log"))
	if err != nil {
		t.Fatalf("kubenode: %v", err)
	}
	n.Kubelet = p
}

// kubeletRuntimeSocket is containerd's socket as kubelet sees it.
func (n *Node) kubeletRuntimeSocket() string {
	if n.installed() {
		return "/run/containerd/containerd.sock"
	}
	return n.ContainerdSocket
}

// StartAgent (re)starts nodenet-agent in the node's namespace, as the
// DaemonSet would (NODE_NAME, config file, kubeconfig); it does not wait.
func (n *Node) StartAgent(t netnode.TB) {
	t.Helper()
	if err := n.startAgent(); err != nil {
		t.Fatalf("kubenode: %v", err)
	}
}

func (n *Node) startAgent() error {
	c := n.Cluster
	n.agentRuns++
	args := []string{"--config", n.AgentConfig, "--kubeconfig", c.Kubeconfig, "--dataplane", "linux", "--v=2"}
	args = append(args, c.opts.AgentArgs...)
	p, err := startProc(n.Name+" nodenet-agent", n.Path, filepath.Join(c.BinDir, cluster.AgentBinary), args,
		[]string{config.NodeNameEnv + "=" + n.Name}, filepath.Join(n.Dir, "agent.log"))
	if err != nil {
		return err
	}
	n.Agent = p
	return nil
}

// WaitReady waits until the Node is Ready with a pod CIDR and the agent
// reports network, CNI and proxy ready.
func (n *Node) WaitReady(ctx context.Context) error {
	return n.poll(ctx, n.Name+" Ready", func(ctx context.Context) error {
		for _, p := range []*Proc{n.Containerd, n.Kubelet, n.Agent} {
			if p != nil && p.Exited() {
				return fmt.Errorf("%s exited: %v\n%s", p.Name, p.Err(), p.LogTail(40))
			}
		}
		node, err := n.Cluster.Client.CoreV1().Nodes().Get(ctx, n.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if node.Spec.PodCIDR == "" {
			return errors.New("no pod CIDR yet")
		}
		if n.PodCIDR, err = netip.ParsePrefix(node.Spec.PodCIDR); err != nil {
			return err
		}
		s, err := n.Status(ctx)
		if err != nil {
			return fmt.Errorf("agent status: %w", err)
		}
		switch {
		case !s.Network.Ready:
			return fmt.Errorf("agent network not ready: %s: %s", s.Network.Reason, s.Network.Message)
		case !s.CNI.Ready:
			return errors.New("agent CNI server not ready")
		case !s.Proxy.Running || s.Proxy.Syncs == 0:
			return errors.New("agent proxy not synced")
		}
		if ok, why := nodeReady(node); !ok {
			return fmt.Errorf("node not Ready: %s", why)
		}
		return nil
	})
}

// poll is Cluster.poll naming the node's processes in a failure.
func (n *Node) poll(ctx context.Context, what string, check func(context.Context) error) error {
	err := n.Cluster.poll(ctx, what, check)
	if err != nil && n.Kubelet != nil && !strings.Contains(err.Error(), "last lines") {
		err = fmt.Errorf("%w\n%s", err, n.Kubelet.LogTail(20))
	}
	return err
}

// Crictl runs crictl against the node's containerd and returns its
// output.
func (n *Node) Crictl(ctx context.Context, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	full := append([]string{"--runtime-endpoint", "unix://" + n.ContainerdSocket,
		"--image-endpoint", "unix://" + n.ContainerdSocket, "--timeout", "60s"}, args...)
	cmd := exec.CommandContext(ctx, n.Cluster.Bins.Crictl, full...)
	var stderr strings.Builder
	cmd.Stderr = &stderr // warnings (no /etc/crictl.yaml) stay out of the output
	out, err := cmd.Output()
	if err != nil {
		return string(out), fmt.Errorf("%s: crictl %s: %w: %s%s", n.Name, strings.Join(args, " "), err, out, stderr.String())
	}
	return string(out), nil
}

// KillAgent ends the agent as a crash would.
func (n *Node) KillAgent() {
	n.Agent.Kill()
	<-n.Agent.Done()
}

// RestartAgent kills the agent and starts a new one.
func (n *Node) RestartAgent() error {
	n.KillAgent()
	return n.startAgent()
}

// RestartContainerd stops containerd (SIGTERM, as systemd restarts it;
// shims and containers keep running) and starts it again, waiting for
// CRI.
func (n *Node) RestartContainerd(ctx context.Context) error {
	n.Containerd.Stop()
	if err := n.StartContainerd(); err != nil {
		return err
	}
	return n.waitCRI(ctx)
}

// Status asks the agent for its status.
func (n *Node) Status(ctx context.Context) (*status.Status, error) {
	return status.NewClient(n.StatusSocket).Status(ctx)
}

func copyExecutable(src, dst string) error {
	data, err := os.ReadFile(src)
	if err != nil {
		return err
	}
	return os.WriteFile(dst, data, 0o755)
}

// StartProcess runs another process in the node's namespace (CoreDNS,
// say), logging to <name>.log in the node's dir, and stops it in t's
// cleanup.
func (n *Node) StartProcess(t netnode.TB, name, bin string, args ...string) *Proc {
	t.Helper()
	p, err := startProc(n.Name+" "+name, n.Path, bin, args, nil, filepath.Join(n.Dir, name+".log"))
	if err != nil {
		t.Fatalf("kubenode: %v", err)
	}
	t.Cleanup(p.Stop)
	return p
}
