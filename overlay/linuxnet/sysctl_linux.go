package linuxnet

import (
	"bytes"
	"fmt"
	"os"
	"runtime"

	"github.com/vishvananda/netns"
)

// Forwarding switches; the node routes between the bridge, the vxlan
// device and the uplink.
const (
	ipv4Forward = "/proc/sys/net/ipv4/ip_forward"
	ipv6Forward = "/proc/sys/net/ipv6/conf/all/forwarding"
)

// ensureSysctls sets each path to "1" in the node namespace, writing only
// those that are not already.
func (n *Network) ensureSysctls(paths []string) error {
	for _, p := range paths {
		var have []byte
		err := n.inNS(func() error {
			var err error
			have, err = os.ReadFile(p)
			return err
		})
		if err != nil {
			return fmt.Errorf("read %s: %w", p, err)
		}
		if string(bytes.TrimSpace(have)) == "1" {
			continue
		}
		err = n.writing.sysctl(func() error {
			return n.inNS(func() error { return os.WriteFile(p, []byte("1"), 0o644) })
		})
		if err != nil {
			return fmt.Errorf("set %s to 1: %w", p, err)
		}
		n.log.V(2).Info("Enabled forwarding", "sysctl", p)
	}
	return nil
}

// inNS runs f on a locked OS thread inside the node namespace. /proc/sys/net
// shows the namespace of the thread that opens it, so that thread has to
// be there. A thread that cannot be switched back is never unlocked, so
// the runtime discards it instead of reusing it in the wrong namespace.
func (n *Network) inNS(f func() error) error {
	done := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		orig, err := netns.Get()
		if err != nil {
			runtime.UnlockOSThread()
			done <- fmt.Errorf("open this thread's namespace: %w", err)
			return
		}
		defer orig.Close()
		if err := netns.Set(n.ns); err != nil {
			runtime.UnlockOSThread()
			done <- fmt.Errorf("enter the node namespace: %w", err)
			return
		}
		ferr := f()
		if err := netns.Set(orig); err != nil {
			done <- fmt.Errorf("return from the node namespace: %w", err)
			return // thread stays locked and dies with the goroutine
		}
		runtime.UnlockOSThread()
		done <- ferr
	}()
	return <-done
}
