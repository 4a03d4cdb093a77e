package hostport

import (
	"fmt"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// netlinkConntrack deletes conntrack entries over netlink in the netns at
// path ("" = the agent's own).
type netlinkConntrack struct {
	path string
}

func newConntrack(netnsPath string) conntrack { return netlinkConntrack{path: netnsPath} }

// clearUDP deletes the UDP flows whose original destination is k's port
// (and k's hostIP, if it has one). Like the reference portmap plugin: a
// client that kept sending to the port before the mapping existed has a
// conntrack entry that isn't DNATed, and keeps it as long as it sends.
func (c netlinkConntrack) clearUDP(k key) error {
	var h *netlink.Handle
	var err error
	if c.path == "" {
		h, err = netlink.NewHandle(unix.NETLINK_NETFILTER)
	} else {
		var nsh netns.NsHandle
		if nsh, err = netns.GetFromPath(c.path); err != nil {
			return fmt.Errorf("open netns %s: %w", c.path, err)
		}
		h, err = netlink.NewHandleAt(nsh, unix.NETLINK_NETFILTER)
		nsh.Close()
	}
	if err != nil {
		return fmt.Errorf("netlink: %w", err)
	}
	defer h.Close()
	f := &netlink.ConntrackFilter{}
	if err := f.AddProtocol(unix.IPPROTO_UDP); err != nil {
		return err
	}
	if err := f.AddPort(netlink.ConntrackOrigDstPort, k.port); err != nil {
		return err
	}
	fam := netlink.InetFamily(unix.AF_INET)
	if k.v6 {
		fam = netlink.InetFamily(unix.AF_INET6)
	}
	if k.hostIP.IsValid() {
		if err := f.AddIP(netlink.ConntrackOrigDstIP, k.hostIP.AsSlice()); err != nil {
			return err
		}
	}
	if _, err := h.ConntrackDeleteFilters(netlink.ConntrackTable, fam, f); err != nil {
		return fmt.Errorf("delete conntrack entries of %s: %w", k, err)
	}
	return nil
}
