package linuxnet

import (
	"fmt"
	"net"
	"net/netip"
	"strconv"

	"github.com/vishvananda/netlink"

	"github.com/nodenet/nodenet/internal/netaddr"
	"github.com/nodenet/nodenet/overlay"
)

// vxlanWant is the vxlan device EnsureLocal asks for.
type vxlanWant struct {
	name    string
	vni     uint32
	port    uint16
	local   netip.Addr
	uplink  netlink.Link
	address netip.Prefix // <pod CIDR network address>/32, like flannel's
}

// mismatch compares an existing device with w in what cannot be changed
// in place; nil when it can be adopted.
func (w vxlanWant) mismatch(l netlink.Link) *overlay.MismatchError {
	m := func(field, have, want string) *overlay.MismatchError {
		return &overlay.MismatchError{Network: w.name, Field: field, Have: have, Want: want}
	}
	v, ok := l.(*netlink.Vxlan)
	switch {
	case !ok:
		return m("type", l.Type(), "vxlan")
	case uint32(v.VxlanId) != w.vni:
		return m("VNI", strconv.Itoa(v.VxlanId), strconv.FormatUint(uint64(w.vni), 10))
	case v.Port != int(w.port):
		return m("VXLAN port", strconv.Itoa(v.Port), strconv.Itoa(int(w.port)))
	case addrOf(v.SrcAddr) != w.local:
		return m("local IP", addrOf(v.SrcAddr).String(), w.local.String())
	case v.VtepDevIndex != w.uplink.Attrs().Index:
		return m("adapter", "ifindex "+strconv.Itoa(v.VtepDevIndex), w.uplink.Attrs().Name)
	case v.Learning:
		return m("learning", "on", "off")
	}
	return nil
}

// inspectVXLAN reads the existing device: nil when there is none, a
// *MismatchError when it differs and may not be replaced. It only reads.
func (n *Network) inspectVXLAN(w vxlanWant, allowRecreate bool) (link netlink.Link, replace bool, err error) {
	l, err := n.nl.LinkByName(w.name)
	if isNotFound(err) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("read vxlan device %s: %w", w.name, err)
	}
	if mm := w.mismatch(l); mm != nil {
		if !allowRecreate {
			return nil, false, mm
		}
		n.log.Info("Replacing a mismatching vxlan device", "device", w.name, "field", mm.Field, "have", mm.Have, "want", mm.Want)
		return l, true, nil
	}
	return l, false, nil
}

// ensureVXLAN makes the vxlan device right: created when missing, then
// MTU, its one IPv4 address and up, each only when wrong.
func (n *Network) ensureVXLAN(w vxlanWant, have netlink.Link, replace bool, mtu int) (*netlink.Vxlan, error) {
	if replace {
		if err := n.deleteLink(have); err != nil {
			return nil, err
		}
		have = nil
	}
	if have == nil {
		vx := &netlink.Vxlan{
			LinkAttrs: netlink.LinkAttrs{
				Name:         w.name,
				MTU:          mtu,
				HardwareAddr: VTEPMAC(w.local, w.vni),
			},
			VxlanId:      int(w.vni),
			VtepDevIndex: w.uplink.Attrs().Index,
			SrcAddr:      ipOf(w.local),
			Port:         int(w.port),
			Learning:     false, // peers are programmed, never learned
		}
		if err := n.writing.linkAdd(vx); err != nil {
			return nil, fmt.Errorf("create vxlan device %s: %w", w.name, err)
		}
		n.log.Info("Created the vxlan device", "device", w.name, "vni", w.vni, "port", w.port, "local", w.local, "mtu", mtu)
		l, err := n.nl.LinkByName(w.name)
		if err != nil {
			return nil, fmt.Errorf("read vxlan device %s after creating it: %w", w.name, err)
		}
		have = l
	}
	vx, ok := have.(*netlink.Vxlan)
	if !ok {
		return nil, fmt.Errorf("%s is a %s, not vxlan", w.name, have.Type())
	}
	if derived := VTEPMAC(w.local, w.vni); vx.HardwareAddr.String() != derived.String() {
		// Kept on purpose: peers know this MAC; see the package doc.
		n.log.V(2).Info("Keeping the existing VTEP MAC", "device", w.name, "mac", vx.HardwareAddr, "derived", derived)
	}
	if vx.MTU != mtu {
		if err := n.writing.linkMTU(vx, mtu); err != nil {
			return nil, fmt.Errorf("set %s MTU to %d: %w", w.name, mtu, err)
		}
	}
	if err := n.ensureOnlyV4Address(vx, w.address); err != nil {
		return nil, err
	}
	if vx.Flags&net.FlagUp == 0 {
		if err := n.writing.linkUp(vx); err != nil {
			return nil, fmt.Errorf("set %s up: %w", w.name, err)
		}
	}
	return vx, nil
}

// ensureOnlyV4Address leaves want as the device's only IPv4 address: an
// old pod CIDR's address would make the node answer for the wrong subnet.
func (n *Network) ensureOnlyV4Address(l netlink.Link, want netip.Prefix) error {
	addrs, err := n.nl.AddrList(l, netlink.FAMILY_V4)
	if err != nil {
		return fmt.Errorf("list addresses of %s: %w", l.Attrs().Name, err)
	}
	found := false
	for _, a := range addrs {
		p, ok := netaddr.FromIPNet(a.IPNet)
		if ok && p == want {
			found = true
			continue
		}
		if err := n.writing.addrDel(l, &a); err != nil {
			return fmt.Errorf("remove stale address %v from %s: %w", a.IPNet, l.Attrs().Name, err)
		}
	}
	if found {
		return nil
	}
	if err := n.writing.addrAdd(l, &netlink.Addr{IPNet: netaddr.IPNet(want)}); err != nil {
		return fmt.Errorf("add %v to %s: %w", want, l.Attrs().Name, err)
	}
	return nil
}
