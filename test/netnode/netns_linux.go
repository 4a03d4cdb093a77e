package netnode

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"

	"github.com/nodenet/nodenet/internal/nsexec"
)

// netnsDir is where `ip netns` keeps named namespaces.
const netnsDir = "/var/run/netns"

// NS is a named network namespace: a node, a pod or the underlay.
type NS struct {
	// Name is its `ip netns` name.
	Name string
	// Path is its bind mount, what CNI calls the netns path.
	Path string
	// Handle is an open handle, valid until cleanup (netlink's
	// *SubscribeOptions and linuxnet take one).
	Handle netns.NsHandle

	closeOnce sync.Once
	closeErr  error
}

// newNS creates a named namespace with loopback up and removes it in
// t.Cleanup.
func newNS(t TB, name string) *NS {
	t.Helper()
	if out, err := exec.Command("ip", "netns", "add", name).CombinedOutput(); err != nil {
		t.Fatalf("ip netns add %s: %v: %s", name, err, out)
	}
	ns := &NS{Name: name, Path: filepath.Join(netnsDir, name)}
	t.Cleanup(func() {
		if err := ns.Close(); err != nil {
			t.Errorf("%v", err)
		}
	})
	h, err := netns.GetFromPath(ns.Path)
	if err != nil {
		t.Fatalf("open netns %s: %v", name, err)
	}
	ns.Handle = h
	if out, err := ns.Run(t.Context(), "ip", "link", "set", "lo", "up"); err != nil {
		t.Fatalf("%s: lo up: %v: %s", name, err, out)
	}
	return ns
}

// Close removes the namespace now rather than in cleanup: a runtime may
// tear a sandbox down before its DEL, and benchmarks make thousands.
// Calling it again does nothing.
func (ns *NS) Close() error {
	ns.closeOnce.Do(func() {
		if ns.Handle.IsOpen() {
			_ = ns.Handle.Close()
		}
		if out, err := exec.Command("ip", "netns", "del", ns.Name).CombinedOutput(); err != nil {
			ns.closeErr = fmt.Errorf("ip netns del %s: %w: %s", ns.Name, err, out)
		}
	})
	return ns.closeErr
}

// Netlink returns a netlink handle working inside the namespace, closed
// in t.Cleanup.
func (ns *NS) Netlink(t TB) *netlink.Handle {
	t.Helper()
	h, err := netlink.NewHandleAt(ns.Handle)
	if err != nil {
		t.Fatalf("netnode: netlink handle in %s: %v", ns.Name, err)
	}
	t.Cleanup(h.Close)
	return h
}

// Do runs fn on an OS thread inside the namespace, from a goroutine of its
// own, and always moves the thread back. Sockets fn opens stay in the
// namespace after it returns; processes fn starts inherit it. A thread
// that cannot be moved back stays locked to that goroutine, so the runtime
// retires it with the goroutine instead of reusing it. fn must return
// its failure rather than call t.Fatal (which would end that goroutine).
func (ns *NS) Do(fn func() error) error { return nsexec.Do(ns.Handle, fn) }

// Command returns cmd to run inside the namespace (through `ip netns
// exec`, which execs in place, so the process is cmd's own).
func (ns *NS) Command(ctx context.Context, name string, args ...string) *exec.Cmd {
	return exec.CommandContext(ctx, "ip", append([]string{"netns", "exec", ns.Name, name}, args...)...)
}

// Run runs a command inside the namespace and returns its combined output.
func (ns *NS) Run(ctx context.Context, name string, args ...string) (string, error) {
	out, err := ns.Command(ctx, name, args...).CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("%s: %s %s: %w", ns.Name, name, strings.Join(args, " "), err)
	}
	return string(out), nil
}

// Sysctl sets a /proc/sys/net key (dotted, as sysctl(8) names it) inside
// the namespace; /proc/sys/net follows the opening thread's netns.
func (ns *NS) Sysctl(key, value string) error {
	path := filepath.Join("/proc/sys", strings.ReplaceAll(key, ".", "/"))
	return ns.Do(func() error {
		if err := os.WriteFile(path, []byte(value), 0o644); err != nil {
			return fmt.Errorf("%s: sysctl %s=%s: %w", ns.Name, key, value, err)
		}
		return nil
	})
}

// sysctlIfPresent is Sysctl for keys that exist only with a kernel module
// loaded (br_netfilter).
func (ns *NS) sysctlIfPresent(key, value string) error {
	err := ns.Sysctl(key, value)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	return err
}

// removeNamedWithPrefix deletes every named netns whose name starts with
// prefix: what a crashed holder of a slot left behind.
func removeNamedWithPrefix(prefix string) error {
	entries, err := os.ReadDir(netnsDir)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	var errs []error
	for _, e := range entries {
		if !strings.HasPrefix(e.Name(), prefix) {
			continue
		}
		if out, err := exec.Command("ip", "netns", "del", e.Name()).CombinedOutput(); err != nil {
			errs = append(errs, fmt.Errorf("ip netns del %s: %w: %s", e.Name(), err, out))
		}
	}
	return errors.Join(errs...)
}
