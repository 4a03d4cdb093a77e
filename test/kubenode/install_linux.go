package kubenode

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodenet/nodenet/agent/status"
	"github.com/nodenet/nodenet/test/netnode"
)

// Install makes New install nodenet the way users do: the nodes come up
// with containerd and kubelet and no node network, the image built by
// `make image` is imported into each node's containerd, and `kubectl
// apply -k` of an overlay that only sets the image runs deploy/'s
// DaemonSets. The agents are pods: kubelet starts them, mounts their
// hostPaths, probes /readyz, restarts and deletes them.
//
// Both kubelets share this machine's file system, so each node's
// containerd and kubelet run in a mount namespace of their own, where
// the node's own directories are bind-mounted over the host paths the
// DaemonSet and the runtime use (nodeMounts): two agents never share an
// IPAM store, a socket, a conflist or a plugin binary.
type Install struct {
	// ImageArchive is the OCI archive `make image` wrote.
	ImageArchive string
	// Image is the reference the archive carries; the overlay sets the
	// DaemonSets' image to it. Not :latest, which kubelet would pull.
	Image string
	// DeployDir is the repository's deploy/ directory.
	DeployDir string
	// Kubectl is the kubectl binary that applies it.
	Kubectl string
}

// AgentNamespace and AgentDaemonSet are deploy/linux's.
const (
	AgentNamespace = "nodenet-system"
	AgentDaemonSet = "nodenet-agent-linux"
)

// nodeMount is a host path that a node sees as its own directory.
type nodeMount struct {
	hostPath string // what the DaemonSet and runtime use
	nodeDir  string // under the node's dir
}

// nodeMounts are the host paths each node gets to itself: the CNI bin
// and conf dirs (install-cni and the agent write there), the agent's
// socket and state dirs, pod network namespaces (containerd makes them
// in /run/netns, the agent enters them through its HostToContainer
// mount), containerd's socket dir (the agent's sandbox reconcile dials
// it) and /etc/kubernetes, where the agent reads the API server's
// address from kubelet.conf as on a kubeadm node.
var nodeMounts = []nodeMount{
	{"/opt/cni/bin", "cni-bin"},
	{"/etc/cni/net.d", "net.d"},
	{"/run/nodenet", "nodenet-run"},
	{"/var/lib/nodenet", "nodenet-lib"},
	{"/run/netns", "netns"},
	{"/run/containerd", "containerd-run"},
	{"/etc/kubernetes", "etc-kubernetes"},
}

// nodeDirOf returns where hostPath lives for node n.
func (n *Node) nodeDirOf(hostPath string) string {
	for _, m := range nodeMounts {
		if m.hostPath == hostPath {
			return filepath.Join(n.Dir, m.nodeDir)
		}
	}
	panic("kubenode: no node mount for " + hostPath)
}

// newInstallNode lays out an installed node's files: its directories for
// nodeMounts, the loopback plugin in its CNI bin dir (a node's
// kubernetes-cni package puts it there; nodenet-cni comes from the
// DaemonSet), and kubelet.conf naming the API server.
func (n *Node) newInstallNode(t netnode.TB) {
	t.Helper()
	c := n.Cluster
	for _, m := range nodeMounts {
		if err := os.MkdirAll(filepath.Join(n.Dir, m.nodeDir), 0o755); err != nil {
			t.Fatalf("kubenode: %v", err)
		}
		// The mount point must exist on the host; an empty directory is
		// all it leaves there.
		if err := os.MkdirAll(m.hostPath, 0o755); err != nil {
			t.Fatalf("kubenode: %v", err)
		}
	}
	n.ContainerdSocket = filepath.Join(n.nodeDirOf("/run/containerd"), "containerd.sock")
	n.CNIConfDir = n.nodeDirOf("/etc/cni/net.d")
	n.CNIBinDir = n.nodeDirOf("/opt/cni/bin")
	n.CNIDataDir = n.nodeDirOf("/var/lib/nodenet")
	n.StatusSocket = filepath.Join(n.nodeDirOf("/run/nodenet"), status.SocketName)
	if err := copyExecutable(filepath.Join(c.Bins.CNIPluginsDir, "loopback"), filepath.Join(n.CNIBinDir, "loopback")); err != nil {
		t.Fatalf("kubenode: %s: install loopback: %v", n.Name, err)
	}
	if err := copyFileTo(c.Kubeconfig, filepath.Join(n.nodeDirOf("/etc/kubernetes"), "kubelet.conf")); err != nil {
		t.Fatalf("kubenode: %s: %v", n.Name, err)
	}
}

// startMountNamespace starts the node's mount namespace: a process that
// holds it (a copy of the host's mounts, receiving the host's later
// mounts but never sending its own), then bind-mounts the node's
// directories over nodeMounts. /run/netns is made shared, so the pod
// namespaces containerd mounts there reach the agent's container.
func (n *Node) startMountNamespace(t netnode.TB) {
	t.Helper()
	p, err := startProc(n.Name+" mount namespace", "", "unshare",
		[]string{"--mount", "--propagation", "slave", "--", "sleep", "infinity"}, nil,
		filepath.Join(n.Dir, "mountns.log"))
	if err != nil {
		t.Fatalf("kubenode: %v", err)
	}
	n.mountNSHolder = p
	ns := fmt.Sprintf("/proc/%d/ns/mnt", p.PID())
	// unshare execs sleep once the namespace exists: wait for that.
	if err := waitFor(t.Context(), 10*time.Second, func() error {
		self, err := os.Readlink("/proc/self/ns/mnt")
		if err != nil {
			return err
		}
		theirs, err := os.Readlink(ns)
		if err != nil {
			return err
		}
		comm, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", p.PID()))
		if theirs == self || strings.TrimSpace(string(comm)) != "sleep" {
			return errors.New("mount namespace not made yet")
		}
		return nil
	}); err != nil {
		t.Fatalf("kubenode: %s: %v", n.Name, err)
	}
	n.MountNS = ns
	for _, m := range nodeMounts {
		if out, err := n.inMountNS(t.Context(), "mount", "--bind", filepath.Join(n.Dir, m.nodeDir), m.hostPath); err != nil {
			t.Fatalf("kubenode: %s: bind %s: %v: %s", n.Name, m.hostPath, err, out)
		}
	}
	if out, err := n.inMountNS(t.Context(), "mount", "--make-shared", "/run/netns"); err != nil {
		t.Fatalf("kubenode: %s: %v: %s", n.Name, err, out)
	}
}

// inMountNS runs a command in the node's mount namespace.
func (n *Node) inMountNS(ctx context.Context, name string, args ...string) ([]byte, error) {
	return exec.CommandContext(ctx, "nsenter", append([]string{"--mount=" + n.MountNS, "--", name}, args...)...).CombinedOutput()
}

// processesInMountNS lists the PIDs in the node's mount namespace but
// its holder: containerd, kubelet, shims and every container.
func (n *Node) processesInMountNS() []int {
	if n.MountNS == "" {
		return nil
	}
	want, err := os.Readlink(n.MountNS)
	if err != nil {
		return nil
	}
	var pids []int
	procs, _ := os.ReadDir("/proc")
	for _, e := range procs {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() || pid == n.mountNSHolder.PID() {
			continue
		}
		if got, err := os.Readlink(filepath.Join("/proc", e.Name(), "ns", "mnt")); err == nil && got == want {
			pids = append(pids, pid)
		}
	}
	return pids
}

// stopMountNamespace kills what is left in the node's mount namespace
// and its holder; the namespace and its mounts go with the last of them.
func (n *Node) stopMountNamespace() {
	if n.mountNSHolder == nil {
		return
	}
	pids := n.processesInMountNS()
	for _, pid := range pids {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
	deadline := time.Now().Add(10 * time.Second)
	for _, pid := range pids {
		for syscall.Kill(pid, 0) == nil && !isZombie(pid) && time.Now().Before(deadline) {
			time.Sleep(20 * time.Millisecond)
		}
	}
	n.mountNSHolder.Kill()
}

// imageImport imports the nodenet image archive into the node's
// containerd, for CRI.
func (n *Node) importNodenetImage(t netnode.TB) {
	t.Helper()
	in := n.Cluster.opts.Install
	out, err := exec.CommandContext(t.Context(), n.Cluster.Bins.Ctr, "--address", n.ContainerdSocket,
		"-n", "k8s.io", "images", "import", in.ImageArchive).CombinedOutput()
	if err != nil {
		t.Fatalf("kubenode: %s: import %s: %v\n%s", n.Name, in.ImageArchive, err, out)
	}
	imgs, err := n.Crictl(t.Context(), "images", "-o", "json")
	if err != nil {
		t.Fatalf("kubenode: %s: %v", n.Name, err)
	}
	if !strings.Contains(imgs, `"`+in.Image+`"`) {
		t.Fatalf("kubenode: %s: image %s not in CRI after importing %s:\n%s", n.Name, in.Image, in.ImageArchive, imgs)
	}
}

// writeOverlay writes a kustomization that only sets deploy/'s image.
func (c *Cluster) writeOverlay(image string) (string, error) {
	in := c.opts.Install
	dir := filepath.Join(c.Dir, "overlay")
	deploy, err := filepath.Abs(in.DeployDir)
	if err != nil {
		return "", err
	}
	rel, err := filepath.Rel(dir, deploy)
	if err != nil {
		return "", err
	}
	name, tag, ok := strings.Cut(image, ":")
	if i := strings.LastIndex(image, ":"); i > strings.LastIndex(image, "/") {
		name, tag, ok = image[:i], image[i+1:], true
	}
	if !ok {
		return "", fmt.Errorf("image %q has no tag", image)
	}
	k := fmt.Sprintf(`# Written by test/kubenode: deploy/ as a user installs it, only the
# image set to the one make image built and the nodes imported.
apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources:
  - %s
images:
  - name: ghcr.io/nodenet/nodenet
    newName: %s
    newTag: %q
`, rel, name, tag)
	return dir, writeFile(filepath.Join(dir, "kustomization.yaml"), k)
}

// Kubectl runs kubectl with the admin kubeconfig and returns its output.
func (c *Cluster) Kubectl(ctx context.Context, args ...string) (string, error) {
	in := c.opts.Install
	if in == nil || in.Kubectl == "" {
		return "", errors.New("kubenode: no kubectl (Options.Install.Kubectl)")
	}
	ctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, in.Kubectl, append([]string{"--kubeconfig", c.Kubeconfig}, args...)...).CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("kubectl %s: %w: %s", strings.Join(args, " "), err, out)
	}
	return string(out), nil
}

// installNodenet applies the overlay and waits until every node is
// Ready through its agent pod.
func (c *Cluster) installNodenet(t netnode.TB) {
	t.Helper()
	ctx := t.Context()
	// Before: kubelet runs, but without a network the Node is NotReady.
	for _, n := range c.Nodes {
		if err := n.poll(ctx, n.Name+" registered NotReady", func(ctx context.Context) error {
			node, err := c.Client.CoreV1().Nodes().Get(ctx, n.Name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			if ok, why := nodeReady(node); ok {
				return fmt.Errorf("Ready before nodenet is installed: %s", why)
			} else if !strings.Contains(why, "network") && !strings.Contains(why, "cni") && !strings.Contains(why, "CNI") {
				return fmt.Errorf("not Ready for another reason: %s", why)
			}
			return nil
		}); err != nil {
			t.Fatalf("kubenode: %v", err)
		}
		c.opts.Progress(n.Name + " NotReady: no CNI config yet")
	}
	dir, err := c.writeOverlay(c.opts.Install.Image)
	if err != nil {
		t.Fatalf("kubenode: %v", err)
	}
	c.opts.Progress("kubectl apply -k " + dir + " (image " + c.opts.Install.Image + ")")
	out, err := c.Kubectl(ctx, "apply", "-k", dir)
	if err != nil {
		t.Fatalf("kubenode: %v", err)
	}
	c.opts.Progress(strings.TrimSpace(out))
	if err := c.WaitAgentsReady(ctx); err != nil {
		t.Fatalf("kubenode: %v", err)
	}
}

// AgentPods returns the agent pods by node name.
func (c *Cluster) AgentPods(ctx context.Context) (map[string]corev1.Pod, error) {
	pods, err := c.Client.CoreV1().Pods(AgentNamespace).List(ctx, metav1.ListOptions{
		LabelSelector: "app.kubernetes.io/name=nodenet,nodenet.io/os=linux"})
	if err != nil {
		return nil, err
	}
	out := map[string]corev1.Pod{}
	for _, p := range pods.Items {
		if p.DeletionTimestamp == nil {
			out[p.Spec.NodeName] = p
		}
	}
	return out, nil
}

// WaitAgentsReady waits until the DaemonSet's rollout is complete and
// each node has a Ready agent pod (kubelet's readiness probe on /readyz
// passed) and is Ready itself.
func (c *Cluster) WaitAgentsReady(ctx context.Context) error {
	if err := c.poll(ctx, "the agent DaemonSet rolled out", func(ctx context.Context) error {
		ds, err := c.Client.AppsV1().DaemonSets(AgentNamespace).Get(ctx, AgentDaemonSet, metav1.GetOptions{})
		if err != nil {
			return err
		}
		st := ds.Status
		if st.ObservedGeneration < ds.Generation || st.DesiredNumberScheduled != int32(len(c.Nodes)) ||
			st.UpdatedNumberScheduled != st.DesiredNumberScheduled || st.NumberReady != st.DesiredNumberScheduled ||
			st.NumberAvailable != st.DesiredNumberScheduled {
			return fmt.Errorf("DaemonSet %s: desired %d, updated %d, ready %d, available %d", AgentDaemonSet,
				st.DesiredNumberScheduled, st.UpdatedNumberScheduled, st.NumberReady, st.NumberAvailable)
		}
		pods, err := c.AgentPods(ctx)
		if err != nil {
			return err
		}
		for _, n := range c.Nodes {
			p, ok := pods[n.Name]
			if !ok {
				return fmt.Errorf("no agent pod on %s", n.Name)
			}
			if !podReady(&p) {
				return fmt.Errorf("agent pod %s on %s not Ready: %s", p.Name, n.Name, podWhy(&p))
			}
		}
		return nil
	}); err != nil {
		return fmt.Errorf("%w\n%s", err, c.agentLogTails())
	}
	for _, n := range c.Nodes {
		if err := n.WaitReady(ctx); err != nil {
			return err
		}
	}
	return nil
}

// agentLogTails is the end of each node's agent container log.
func (c *Cluster) agentLogTails() string {
	var b strings.Builder
	for _, n := range c.Nodes {
		logs, _ := n.agentContainerLogs()
		lines := strings.Split(strings.TrimRight(logs, "\n"), "\n")
		if len(lines) > 30 {
			lines = lines[len(lines)-30:]
		}
		fmt.Fprintf(&b, "--- %s agent container log ---\n%s\n", n.Name, strings.Join(lines, "\n"))
	}
	return b.String()
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// podWhy summarizes why a pod is not Ready: its phase and containers'
// states.
func podWhy(p *corev1.Pod) string {
	parts := []string{string(p.Status.Phase)}
	for _, cs := range append(append([]corev1.ContainerStatus(nil), p.Status.InitContainerStatuses...), p.Status.ContainerStatuses...) {
		switch {
		case cs.State.Waiting != nil:
			parts = append(parts, fmt.Sprintf("%s waiting (%s: %s)", cs.Name, cs.State.Waiting.Reason, cs.State.Waiting.Message))
		case cs.State.Terminated != nil:
			parts = append(parts, fmt.Sprintf("%s terminated (%s, exit %d)", cs.Name, cs.State.Terminated.Reason, cs.State.Terminated.ExitCode))
		case cs.State.Running != nil && !cs.Ready:
			parts = append(parts, cs.Name+" running, not ready")
		}
	}
	return strings.Join(parts, "; ")
}

// agentContainerLogs concatenates the node's agent container logs that
// kubelet keeps (every restart's, oldest first), in CRI log format.
func (n *Node) agentContainerLogs() (string, error) {
	dirs, err := filepath.Glob(filepath.Join(n.Dir, "pod-logs", AgentNamespace+"_"+AgentDaemonSet+"-*", "agent"))
	if err != nil || len(dirs) == 0 {
		return "", fmt.Errorf("%s: no agent container logs", n.Name)
	}
	type logFile struct {
		path string
		mod  time.Time
	}
	var files []logFile
	for _, d := range dirs {
		names, _ := filepath.Glob(filepath.Join(d, "*.log*"))
		for _, f := range names {
			if st, err := os.Stat(f); err == nil {
				files = append(files, logFile{f, st.ModTime()})
			}
		}
	}
	sort.Slice(files, func(i, j int) bool { return files[i].mod.Before(files[j].mod) })
	var b strings.Builder
	for _, f := range files {
		data, err := os.ReadFile(f.path)
		if err == nil {
			b.Write(data)
		}
	}
	return b.String(), nil
}

// agentLog is the agent's log however it runs: the process's log file,
// or its container logs.
func (n *Node) agentLog() (string, error) {
	if n.Cluster.opts.Install != nil {
		return n.agentContainerLogs()
	}
	data, err := os.ReadFile(filepath.Join(n.Dir, "agent.log"))
	return string(data), err
}

// waitFor polls check every 50 ms until it succeeds or d passes.
func waitFor(ctx context.Context, d time.Duration, check func() error) error {
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	for {
		err := check()
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// crictlPods lists the node's pod sandboxes: id, namespace and name.
func (n *Node) crictlPods(ctx context.Context) ([]sandbox, error) {
	out, err := n.Crictl(ctx, "pods", "-o", "json")
	if err != nil {
		return nil, err
	}
	var list struct {
		Items []struct {
			ID       string `json:"id"`
			Metadata struct {
				Name      string `json:"name"`
				Namespace string `json:"namespace"`
			} `json:"metadata"`
		} `json:"items"`
	}
	if err := json.Unmarshal([]byte(out), &list); err != nil {
		return nil, fmt.Errorf("crictl pods: %w", err)
	}
	var out2 []sandbox
	for _, it := range list.Items {
		out2 = append(out2, sandbox{ID: it.ID, Namespace: it.Metadata.Namespace, Name: it.Metadata.Name})
	}
	return out2, nil
}

type sandbox struct{ ID, Namespace, Name string }

// WaitAgentConfig waits until kubelet has refreshed a running agent
// pod's nodenet-config volume to a config.yaml containing want: then its
// ConfigMap cache holds the edit, and pods it starts get it too.
func (c *Cluster) WaitAgentConfig(ctx context.Context, want string) error {
	return c.poll(ctx, "kubelet to see the nodenet-config edit", func(ctx context.Context) error {
		pods, err := c.AgentPods(ctx)
		if err != nil {
			return err
		}
		for _, n := range c.Nodes {
			p, ok := pods[n.Name]
			if !ok || p.Status.Phase != corev1.PodRunning {
				continue
			}
			path := filepath.Join(n.Dir, "kubelet", "pods", string(p.UID), "volumes", "kubernetes.io~configmap", "config", "config.yaml")
			out, err := n.inMountNS(ctx, "cat", path)
			if err == nil && strings.Contains(string(out), want) {
				return nil
			}
		}
		return fmt.Errorf("no running agent's config.yaml contains %q yet", want)
	})
}
