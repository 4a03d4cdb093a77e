package linuxnet

import (
	"fmt"
	"net/netip"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"k8s.io/klog/v2"

	"github.com/nodenet/nodenet/config"
	"github.com/nodenet/nodenet/overlay"
)

// Options configures New.
type Options struct {
	// NetNS is the node's network namespace; the zero value means the
	// namespace of the calling thread when New runs. The caller keeps
	// ownership of a handle it passes.
	NetNS netns.NsHandle
	// Logger receives structured logs; the zero value uses klog's.
	Logger klog.Logger
}

// Network is overlay.Interface on netlink. It keeps only what EnsureLocal
// decided (device names, the uplink) between calls; everything else is
// read from the kernel, so a new Network adopts what an earlier one made.
type Network struct {
	ns      netns.NsHandle
	ownNS   bool // ns was opened by New and is closed by Close
	nl      *netlink.Handle
	log     klog.Logger
	local   *localState
	writing *writer
}

// localState is what EnsureLocal settled, for SyncRemotes and Check.
type localState struct {
	spec    overlay.LocalSpec
	uplink  string
	upIndex int
	subnets []netip.Prefix
	vxlan   string // empty in l2bridge mode
	vxlanIP netip.Prefix
}

var _ overlay.Interface = (*Network)(nil)

// New returns a Network working in opts.NetNS. Close releases it.
func New(opts Options) (*Network, error) {
	n := &Network{ns: opts.NetNS, log: opts.Logger}
	if n.log.GetSink() == nil {
		n.log = klog.Background()
	}
	n.log = n.log.WithName("linuxnet")
	if opts.NetNS == 0 {
		cur, err := netns.Get()
		if err != nil {
			return nil, fmt.Errorf("open the current network namespace: %w", err)
		}
		n.ns, n.ownNS = cur, true
	}
	h, err := netlink.NewHandleAt(n.ns)
	if err != nil {
		n.Close()
		return nil, fmt.Errorf("open netlink in the node namespace: %w", err)
	}
	n.nl = h
	n.writing = &writer{nl: h}
	return n, nil
}

// Close releases the netlink socket (and the namespace handle New
// opened). The network itself stays as it is.
func (n *Network) Close() {
	if n.nl != nil {
		n.nl.Close()
		n.nl = nil
	}
	if n.ownNS {
		n.ns.Close()
		n.ownNS = false
	}
}

func isOverlay(m config.NetworkMode) bool { return m == config.NetworkModeOverlay }
