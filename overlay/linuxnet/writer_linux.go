package linuxnet

import (
	"github.com/vishvananda/netlink"
)

// writer is the only way this package changes the kernel, so that every
// netlink write is counted (LocalNetwork.Writes, SyncResult.Writes): the
// tests and benchmarks hold the idempotence contract to that count.
type writer struct {
	nl     *netlink.Handle
	writes int
}

// take returns the writes counted since the last take.
func (w *writer) take() int {
	n := w.writes
	w.writes = 0
	return n
}

func (w *writer) do(f func() error) error {
	w.writes++
	return f()
}

func (w *writer) linkAdd(l netlink.Link) error { return w.do(func() error { return w.nl.LinkAdd(l) }) }
func (w *writer) linkDel(l netlink.Link) error { return w.do(func() error { return w.nl.LinkDel(l) }) }
func (w *writer) linkUp(l netlink.Link) error  { return w.do(func() error { return w.nl.LinkSetUp(l) }) }
func (w *writer) linkMTU(l netlink.Link, mtu int) error {
	return w.do(func() error { return w.nl.LinkSetMTU(l, mtu) })
}
func (w *writer) addrAdd(l netlink.Link, a *netlink.Addr) error {
	return w.do(func() error { return w.nl.AddrAdd(l, a) })
}
func (w *writer) addrDel(l netlink.Link, a *netlink.Addr) error {
	return w.do(func() error { return w.nl.AddrDel(l, a) })
}
func (w *writer) neighSet(n *netlink.Neigh) error {
	return w.do(func() error { return w.nl.NeighSet(n) })
}
func (w *writer) neighDel(n *netlink.Neigh) error {
	return w.do(func() error { return w.nl.NeighDel(n) })
}
func (w *writer) routeReplace(r *netlink.Route) error {
	return w.do(func() error { return w.nl.RouteReplace(r) })
}
func (w *writer) routeDel(r *netlink.Route) error {
	return w.do(func() error { return w.nl.RouteDel(r) })
}

// sysctl counts a /proc/sys write; it changes the kernel like the others.
func (w *writer) sysctl(f func() error) error { return w.do(f) }
