package conntrack

import (
	"errors"
	"fmt"
	"net"
	"net/netip"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
	"k8s.io/klog/v2"

	"github.com/nodenet/nodenet/proxy"
)

// Options configure a Cleaner.
type Options struct {
	Logger klog.Logger
}

// Cleaner is the Linux Flusher: it deletes stale entries from the conntrack
// table of the calling thread's network namespace.
type Cleaner struct {
	log klog.Logger
}

var _ Flusher = (*Cleaner)(nil)

// New returns a Cleaner.
func New(opts Options) *Cleaner {
	return &Cleaner{log: opts.Logger}
}

// Flush deletes the entries NewPlan(prev, next, changed) calls stale. It
// does nothing, not even list the table, when nothing can be stale.
func (c *Cleaner) Flush(prev, next *proxy.State, changed map[proxy.ServicePortKey]struct{}) error {
	return c.Apply(NewPlan(prev, next, changed))
}

// Apply deletes the entries plan calls stale, one table walk per family.
func (c *Cleaner) Apply(plan Plan) error {
	if plan.Empty() {
		return nil
	}
	var errs []error
	for _, fam := range plan.Families() {
		family := netlink.InetFamily(unix.AF_INET)
		if fam == proxy.IPv6 {
			family = unix.AF_INET6
		}
		n, err := netlink.ConntrackDeleteFilters(netlink.ConntrackTable, family, filter{plan})
		if err != nil {
			// An interrupted dump still deleted what it saw; the caller
			// retries with a full sync for the rest.
			errs = append(errs, fmt.Errorf("flush stale %s conntrack entries (%d deleted): %w", fam, n, err))
			continue
		}
		c.log.V(4).Info("Flushed stale conntrack entries", "family", fam, "frontends", len(plan.Keep), "deleted", n)
	}
	return errors.Join(errs...)
}

// filter adapts a Plan to netlink's table walk.
type filter struct{ plan Plan }

func (f filter) MatchConntrackFlow(flow *netlink.ConntrackFlow) bool {
	e, ok := entryOf(flow)
	return ok && f.plan.Stale(e)
}

// entryOf reads what a Plan needs from flow; ok is false for protocols
// that never go stale.
func entryOf(flow *netlink.ConntrackFlow) (Entry, bool) {
	var proto proxy.Protocol
	switch flow.Forward.Protocol {
	case unix.IPPROTO_UDP:
		proto = proxy.UDP
	case unix.IPPROTO_SCTP:
		proto = proxy.SCTP
	default:
		return Entry{}, false
	}
	dst, ok1 := addrPort(flow.Forward.DstIP, flow.Forward.DstPort)
	src, ok2 := addrPort(flow.Reverse.SrcIP, flow.Reverse.SrcPort)
	return Entry{Protocol: proto, OrigDst: dst, ReplySrc: src}, ok1 && ok2
}

func addrPort(ip net.IP, port uint16) (netip.AddrPort, bool) {
	addr, ok := netip.AddrFromSlice(ip)
	return netip.AddrPortFrom(addr.Unmap(), port), ok
}
