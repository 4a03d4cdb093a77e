package kubenode

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/nodenet/nodenet/test/netnode"
)

// cgroupV1 is where these machines mount the v1 hierarchies (DESIGN §8).
const cgroupV1 = "/sys/fs/cgroup"

// cgroupHierarchies lists the mounted v1 hierarchies (cpu, memory, ...,
// the named systemd one); the v2 "unified" mount is left alone.
func cgroupHierarchies() ([]string, error) {
	entries, err := os.ReadDir(cgroupV1)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, e := range entries {
		if e.Name() == "unified" {
			continue
		}
		p := filepath.Join(cgroupV1, e.Name())
		// cpu,cpuacct style symlinks point at a hierarchy listed anyway.
		if fi, err := os.Lstat(p); err != nil || !fi.IsDir() {
			continue
		}
		out = append(out, p)
	}
	return out, nil
}

// makeCgroupRoot makes kubelet's cgroup root in every hierarchy: kubelet
// refuses a cgroupRoot that does not exist. cpuset needs its cpus and
// mems set before a process may join, copied from the parent.
func makeCgroupRoot(root string) error {
	hs, err := cgroupHierarchies()
	if err != nil {
		return err
	}
	for _, h := range hs {
		dir := filepath.Join(h, root)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return fmt.Errorf("cgroup %s: %w", dir, err)
		}
		if filepath.Base(h) != "cpuset" {
			continue
		}
		for _, f := range []string{"cpuset.cpus", "cpuset.mems"} {
			val, err := os.ReadFile(filepath.Join(h, f))
			if err != nil {
				return err
			}
			if err := os.WriteFile(filepath.Join(dir, f), val, 0o644); err != nil {
				return fmt.Errorf("cgroup %s: %w", filepath.Join(dir, f), err)
			}
		}
	}
	return nil
}

// teardown stops the node and removes what its processes left: pods
// first through CRI while the agent still serves DEL, then the processes,
// leftover shims and containers, mounts, cgroups and kubelet's symlinks.
func (n *Node) teardown(t netnode.TB) {
	if n.installed() {
		n.teardownInstalled(t)
		return
	}
	n.Kubelet.Stop()
	if n.Containerd != nil && !n.Containerd.Exited() && n.Agent != nil && !n.Agent.Exited() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		if out, err := n.Crictl(ctx, "rmp", "-fa"); err != nil {
			t.Logf("kubenode: %s: remove pods: %v %s", n.Name, err, out)
		}
		cancel()
	}
	n.Agent.Stop()
	n.Containerd.Stop()
	n.removeLeftovers(t)
}

// killLeftovers SIGKILLs, by PID, every process of the node's that
// survives its containerd: shims (their command line names the node's
// containerd socket, under dir) and containers (in the node's cgroups).
func killLeftovers(dir, cgroupRoot string) []error {
	pids := map[int]bool{}
	procs, _ := os.ReadDir("/proc")
	for _, e := range procs {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err == nil && strings.Contains(string(cmdline), "containerd-shim") && strings.Contains(string(cmdline), dir) {
			pids[pid] = true
		}
	}
	hs, _ := cgroupHierarchies()
	for _, h := range hs {
		if filepath.Base(h) != "pids" && filepath.Base(h) != "memory" {
			continue
		}
		_ = filepath.WalkDir(filepath.Join(h, cgroupRoot), func(path string, d os.DirEntry, err error) error {
			if err != nil || d.IsDir() || d.Name() != "cgroup.procs" {
				return nil
			}
			data, _ := os.ReadFile(path)
			for _, f := range strings.Fields(string(data)) {
				if pid, err := strconv.Atoi(f); err == nil {
					pids[pid] = true
				}
			}
			return nil
		})
	}
	for pid := range pids {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
	// Wait for them to be gone so their mounts and cgroups can go.
	deadline := time.Now().Add(10 * time.Second)
	var errs []error
	for pid := range pids {
		for syscall.Kill(pid, 0) == nil {
			if isZombie(pid) || time.Now().After(deadline) {
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	return errs
}

func isZombie(pid int) bool {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return true
	}
	s := string(data)
	i := strings.LastIndexByte(s, ')')
	return i > 0 && i+2 < len(s) && s[i+2] == 'Z'
}

// unmountUnder unmounts every mount point under dir, deepest first
// (kubelet's tmpfs volumes, containerd's overlay rootfs and shm, pod
// network namespaces), lazily so a busy one still goes.
func unmountUnder(dir string) error {
	var errs []error
	for range 3 {
		points, err := mountsUnder(dir)
		if err != nil {
			return err
		}
		if len(points) == 0 {
			return nil
		}
		errs = errs[:0]
		for _, p := range points {
			if err := unix.Unmount(p, unix.MNT_DETACH); err != nil && !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.ENOENT) {
				errs = append(errs, fmt.Errorf("unmount %s: %w", p, err))
			}
		}
	}
	return errors.Join(errs...)
}

// mountsUnder lists mount points under dir from /proc/self/mountinfo,
// deepest first.
func mountsUnder(dir string) ([]string, error) {
	data, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return nil, err
	}
	prefix := strings.TrimSuffix(dir, "/") + "/"
	var out []string
	for _, line := range strings.Split(string(data), "\n") {
		f := strings.Fields(line)
		if len(f) < 5 {
			continue
		}
		p := unescapeMountinfo(f[4])
		if strings.HasPrefix(p, prefix) {
			out = append(out, p)
		}
	}
	sort.Slice(out, func(i, j int) bool { return len(out[i]) > len(out[j]) })
	return out, nil
}

// unescapeMountinfo undoes mountinfo's octal escapes (\040 for a space).
func unescapeMountinfo(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if v, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(v))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// removeCgroupRoot removes kubelet's cgroup root and every cgroup below
// it in every hierarchy, deepest first (rmdir is all a cgroup takes).
func removeCgroupRoot(root string) error {
	hs, err := cgroupHierarchies()
	if err != nil {
		return err
	}
	var errs []error
	for _, h := range hs {
		top := filepath.Join(h, root)
		var dirs []string
		_ = filepath.WalkDir(top, func(path string, d os.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				dirs = append(dirs, path)
			}
			return nil
		})
		sort.Slice(dirs, func(i, j int) bool { return len(dirs[i]) > len(dirs[j]) })
		for _, d := range dirs {
			var err error
			// A cgroup whose last task just died may stay busy briefly.
			for range 50 {
				if err = unix.Rmdir(d); err == nil || errors.Is(err, unix.ENOENT) {
					err = nil
					break
				}
				time.Sleep(100 * time.Millisecond)
			}
			if err != nil {
				errs = append(errs, fmt.Errorf("rmdir %s: %w", d, err))
			}
		}
	}
	return errors.Join(errs...)
}

// containerLogLinks is where kubelet links container logs, whatever its
// podLogsDir (a fixed path in kubelet).
const containerLogLinks = "/var/log/containers"

// removeContainerLogLinks removes kubelet's symlinks into dir.
func removeContainerLogLinks(dir string) {
	entries, err := os.ReadDir(containerLogLinks)
	if err != nil {
		return
	}
	for _, e := range entries {
		p := filepath.Join(containerLogLinks, e.Name())
		if target, err := os.Readlink(p); err == nil && strings.HasPrefix(target, dir+"/") {
			_ = os.Remove(p)
		}
	}
}

// teardownInstalled is teardown for a node whose agent is a pod: kubelet
// stops (so nothing is recreated), every other pod is removed through
// CRI while the agent pod still serves DEL, then the agent's; then
// everything in the node's mount namespace ends, and the namespace with
// its mounts.
func (n *Node) teardownInstalled(t netnode.TB) {
	n.Kubelet.Stop()
	if n.Containerd != nil && !n.Containerd.Exited() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		if pods, err := n.crictlPods(ctx); err == nil {
			var agents []string
			for _, p := range pods {
				if p.Namespace == AgentNamespace {
					agents = append(agents, p.ID)
					continue
				}
				if out, err := n.Crictl(ctx, "rmp", "-f", p.ID); err != nil {
					t.Logf("kubenode: %s: remove pod %s/%s: %v %s", n.Name, p.Namespace, p.Name, err, out)
				}
			}
			for _, id := range agents {
				_, _ = n.Crictl(ctx, "rmp", "-f", id)
			}
		}
		cancel()
	}
	n.Containerd.Stop()
	n.stopMountNamespace()
	n.removeLeftovers(t)
}

// removeLeftovers removes what the node's processes left once they
// stopped: surviving shims and containers, mounts under the node's dir,
// its cgroups and kubelet's log symlinks.
func (n *Node) removeLeftovers(t netnode.TB) {
	var errs []error
	errs = append(errs, killLeftovers(n.Dir, n.CgroupRoot)...)
	if err := unmountUnder(n.Dir); err != nil {
		errs = append(errs, err)
	}
	if err := removeCgroupRoot(n.CgroupRoot); err != nil {
		errs = append(errs, err)
	}
	removeContainerLogLinks(n.Dir)
	for _, err := range errs {
		t.Errorf("kubenode: %s cleanup: %v", n.Name, err)
	}
}
