package netnode

import (
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// Watch records the link, address, route and neighbour (ARP and FDB)
// notifications of one namespace: what a dataplane wrote while it ran.
//
// Neighbour entries the kernel keeps on its own (ARP resolution, bridge
// learning: any state other than PERMANENT or NOARP) change without
// anyone writing and are not recorded, except on links named as static
// (see WatchNetlink). Run nodes without IPv6 (the default) or link-local
// addresses and DAD add changes of their own.
//
// Notifications reach the watch asynchronously, so Stop first writes a
// sentinel (a veth pair with an address and a permanent neighbour, which
// touches all four groups) and waits until each group has delivered its
// part: everything written before Stop is recorded by then.
type Watch struct {
	ns       *NS
	mu       sync.Mutex
	changes  []string
	synced   [4]chan struct{} // closed when a group delivered the sentinel
	stop     chan struct{}
	stopOnce sync.Once
	done     sync.WaitGroup
}

// The sentinel Stop writes.
const (
	sentinelLink  = "nnwatch0"
	sentinelPeer  = "nnwatch1"
	sentinelAddr  = "169.254.77.1"
	sentinelNeigh = "169.254.77.2"
)

// watch groups, indexes into Watch.synced.
const (
	groupLink = iota
	groupAddr
	groupRoute
	groupNeigh
)

// WatchNetlink starts recording ns's changes; it stops in t.Cleanup.
// static names links whose every neighbour entry is written, never
// resolved (a vxlan device with static FDB and ARP entries): each of
// their neighbour changes is recorded, in any state, since an entry that
// is deleted shows up as FAILED. Links that do not exist are skipped.
func (ns *NS) WatchNetlink(t TB, static ...string) *Watch {
	t.Helper()
	staticIdx, err := linkIndexes(ns, static)
	if err != nil {
		t.Fatalf("netnode: watch %s: %v", ns.Name, err)
	}
	w := &Watch{ns: ns, stop: make(chan struct{})}
	for i := range w.synced {
		w.synced[i] = make(chan struct{})
	}
	h := ns.Handle
	links := make(chan netlink.LinkUpdate, 64)
	addrs := make(chan netlink.AddrUpdate, 64)
	routes := make(chan netlink.RouteUpdate, 64)
	neighs := make(chan netlink.NeighUpdate, 64)
	errc := func(err error) {
		select {
		case <-w.stop: // the subscription's socket was closed by Stop
		default:
			w.add(fmt.Sprintf("watch error: %v", err))
		}
	}
	subscribe := []error{
		netlink.LinkSubscribeWithOptions(links, w.stop, netlink.LinkSubscribeOptions{Namespace: &h, ErrorCallback: errc}),
		netlink.AddrSubscribeWithOptions(addrs, w.stop, netlink.AddrSubscribeOptions{Namespace: &h, ErrorCallback: errc}),
		netlink.RouteSubscribeWithOptions(routes, w.stop, netlink.RouteSubscribeOptions{Namespace: &h, ErrorCallback: errc}),
		netlink.NeighSubscribeWithOptions(neighs, w.stop, netlink.NeighSubscribeOptions{Namespace: &h, ErrorCallback: errc}),
	}
	for _, err := range subscribe {
		if err != nil {
			close(w.stop)
			t.Fatalf("netnode: subscribe to netlink in %s: %v", ns.Name, err)
		}
	}
	// Each subscription closes its channel once stop is closed.
	drain(w, groupLink, links, func(u netlink.LinkUpdate) (string, bool) {
		name := u.Attrs().Name
		desc := fmt.Sprintf("link %s %s (%s)", verb(u.Header.Type == unix.RTM_NEWLINK), name, u.Type())
		return desc, name == sentinelLink || name == sentinelPeer
	})
	drain(w, groupAddr, addrs, func(u netlink.AddrUpdate) (string, bool) {
		desc := fmt.Sprintf("addr %s %s dev #%d", verb(u.NewAddr), u.LinkAddress.String(), u.LinkIndex)
		return desc, u.LinkAddress.IP.String() == sentinelAddr
	})
	drain(w, groupRoute, routes, func(u netlink.RouteUpdate) (string, bool) {
		desc := fmt.Sprintf("route %s %s", verb(u.Type == unix.RTM_NEWROUTE), u.Route.String())
		return desc, u.Dst != nil && u.Dst.IP.String() == sentinelAddr
	})
	drain(w, groupNeigh, neighs, func(u netlink.NeighUpdate) (string, bool) {
		if u.State&(netlink.NUD_PERMANENT|netlink.NUD_NOARP) == 0 && !staticIdx[u.LinkIndex] {
			return "", false // the kernel's own ARP or learning
		}
		desc := fmt.Sprintf("neigh %s %s lladdr %s dev #%d family %d state %#x",
			verb(u.Type == unix.RTM_NEWNEIGH), u.IP, u.HardwareAddr, u.LinkIndex, u.Family, u.State)
		return desc, u.IP.String() == sentinelNeigh
	})
	t.Cleanup(func() { w.Stop() })
	return w
}

// linkIndexes maps the indexes of the named links that exist in ns.
func linkIndexes(ns *NS, names []string) (map[int]bool, error) {
	out := map[int]bool{}
	if len(names) == 0 {
		return out, nil
	}
	h, err := netlink.NewHandleAt(ns.Handle)
	if err != nil {
		return nil, err
	}
	defer h.Close()
	for _, name := range names {
		if l, err := h.LinkByName(name); err == nil {
			out[l.Attrs().Index] = true
		}
	}
	return out, nil
}

// drain records a group's updates until its sentinel arrives; describe
// returns "" for updates not to record.
func drain[T any](w *Watch, group int, ch <-chan T, describe func(T) (string, bool)) {
	w.done.Add(1)
	go func() {
		defer w.done.Done()
		synced := false
		for u := range ch {
			s, sentinel := describe(u)
			switch {
			case synced:
			case sentinel:
				synced = true
				close(w.synced[group])
			case s != "":
				w.add(s)
			}
		}
	}()
}

func verb(added bool) string {
	if added {
		return "add"
	}
	return "del"
}

func (w *Watch) add(change string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.changes = append(w.changes, change)
}

// Changes returns what was recorded so far. Notifications arrive
// asynchronously: Stop first for a complete list.
func (w *Watch) Changes() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]string(nil), w.changes...)
}

// Stop waits for the notifications of everything written so far, ends
// the subscriptions and returns every recorded change.
func (w *Watch) Stop() []string {
	w.stopOnce.Do(func() {
		if err := w.sync(); err != nil {
			w.add(fmt.Sprintf("watch error: %v", err))
		}
		close(w.stop)
		w.done.Wait()
	})
	return w.Changes()
}

// syncTimeout bounds the wait for the sentinel's notifications.
const syncTimeout = 10 * time.Second

// sync writes the sentinel, waits for every group to deliver it and
// removes it again.
func (w *Watch) sync() error {
	h, err := netlink.NewHandleAt(w.ns.Handle)
	if err != nil {
		return err
	}
	defer h.Close()
	veth := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: sentinelLink}, PeerName: sentinelPeer}
	if err := h.LinkAdd(veth); err != nil {
		return fmt.Errorf("add sentinel link: %w", err)
	}
	defer func() {
		if l, err := h.LinkByName(sentinelLink); err == nil {
			_ = h.LinkDel(l)
		}
	}()
	l, err := h.LinkByName(sentinelLink)
	if err != nil {
		return err
	}
	addr := &netlink.Addr{IPNet: &net.IPNet{IP: net.ParseIP(sentinelAddr), Mask: net.CIDRMask(32, 32)}}
	if err := h.AddrAdd(l, addr); err != nil {
		return fmt.Errorf("add sentinel address: %w", err)
	}
	neigh := &netlink.Neigh{
		LinkIndex:    l.Attrs().Index,
		Family:       netlink.FAMILY_V4,
		State:        netlink.NUD_PERMANENT,
		IP:           net.ParseIP(sentinelNeigh),
		HardwareAddr: net.HardwareAddr{0x02, 0, 0, 0, 0, 1},
	}
	if err := h.NeighAdd(neigh); err != nil {
		return fmt.Errorf("add sentinel neighbour: %w", err)
	}
	timeout := time.After(syncTimeout)
	for group, synced := range w.synced {
		select {
		case <-synced:
		case <-timeout:
			return fmt.Errorf("notifications of group %d did not arrive within %s", group, syncTimeout)
		}
	}
	return nil
}
