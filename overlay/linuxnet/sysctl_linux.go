package linuxnet

import (
	"bytes"
	"fmt"
	"os"

	"github.com/nodenet/nodenet/internal/nsexec"
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

// inNS runs f inside the node namespace: /proc/sys/net shows the
// namespace of the thread that opens it.
func (n *Network) inNS(f func() error) error { return nsexec.Do(n.ns, f) }
