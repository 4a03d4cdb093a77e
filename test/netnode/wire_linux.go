package netnode

import (
	"fmt"
	"net/netip"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/nodenet/nodenet/internal/netaddr"
)

// PodWiring is what WirePod gives a pod: what a CNI ADD into a bridge
// does, without a CNI plugin (tests of the node network wire pods so).
type PodWiring struct {
	// Bridge is the node bridge the host end of the veth joins.
	Bridge string
	// Addrs are eth0's addresses, with the pod CIDR's prefix length; the
	// first is the pod's IP.
	Addrs []netip.Prefix
	// Gateways get a default route each, in their family.
	Gateways []netip.Addr
	// MTU of both veth ends; 0 keeps the kernel's default.
	MTU int
}

// WirePod creates a pod on n and wires it by hand: a veth (host end
// "vp<N>", the node's N-th wired pod) into w.Bridge, eth0 with w.Addrs
// and default routes via w.Gateways.
func (n *Node) WirePod(t TB, name string, w PodWiring) *Pod {
	t.Helper()
	p := n.NewPod(t, name)
	if len(w.Addrs) > 0 {
		p.IP = w.Addrs[0].Addr()
	}
	n.pods++
	host := fmt.Sprintf("vp%d", n.pods)
	err := n.Do(func() error {
		v := &netlink.Veth{
			LinkAttrs:     netlink.LinkAttrs{Name: host, MTU: w.MTU},
			PeerName:      "eth0",
			PeerNamespace: netlink.NsFd(int(p.Handle)),
		}
		if err := netlink.LinkAdd(v); err != nil {
			return fmt.Errorf("add veth %s: %w", host, err)
		}
		br, err := netlink.LinkByName(w.Bridge)
		if err != nil {
			return err
		}
		l, err := netlink.LinkByName(host)
		if err != nil {
			return err
		}
		if err := netlink.LinkSetMaster(l, br); err != nil {
			return err
		}
		return netlink.LinkSetUp(l)
	})
	if err == nil {
		err = p.Do(func() error { return wireEth0(w) })
	}
	if err != nil {
		t.Fatalf("netnode: wire pod %s on %s: %v", name, n.Name, err)
	}
	return p
}

// wireEth0 configures the pod end; call inside the pod.
func wireEth0(w PodWiring) error {
	eth0, err := netlink.LinkByName("eth0")
	if err != nil {
		return err
	}
	if w.MTU != 0 {
		if err := netlink.LinkSetMTU(eth0, w.MTU); err != nil {
			return err
		}
	}
	if err := netlink.LinkSetUp(eth0); err != nil {
		return err
	}
	for _, a := range w.Addrs {
		if err := netlink.AddrAdd(eth0, linkAddr(a)); err != nil {
			return fmt.Errorf("address %s: %w", a, err)
		}
	}
	for _, gw := range w.Gateways {
		r := &netlink.Route{LinkIndex: eth0.Attrs().Index, Gw: gw.AsSlice()}
		if gw.Is6() {
			r.Dst = netaddr.IPNet(netip.PrefixFrom(netip.IPv6Unspecified(), 0))
		}
		if err := netlink.RouteAdd(r); err != nil {
			return fmt.Errorf("default route via %s: %w", gw, err)
		}
	}
	return nil
}

// linkAddr is p as an interface address; IPv6 ones skip duplicate
// address detection, so they are usable at once.
func linkAddr(p netip.Prefix) *netlink.Addr {
	a := &netlink.Addr{IPNet: netaddr.IPNet(p)}
	if p.Addr().Is6() {
		a.Flags = unix.IFA_F_NODAD
	}
	return a
}
