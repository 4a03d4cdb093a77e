package linuxnet

import (
	"fmt"
	"net"
	"net/netip"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/nodenet/nodenet/internal/netaddr"
	"github.com/nodenet/nodenet/overlay"
)

// inspectBridge reads the link named spec.Name: nil when there is none,
// a *MismatchError when it is not a bridge (and may not be replaced).
// It only reads.
func (n *Network) inspectBridge(spec overlay.LocalSpec) (link netlink.Link, replace bool, err error) {
	l, err := n.nl.LinkByName(spec.Name)
	if isNotFound(err) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("read bridge %s: %w", spec.Name, err)
	}
	if _, ok := l.(*netlink.Bridge); ok {
		return l, false, nil
	}
	if !spec.AllowRecreate {
		return nil, false, &overlay.MismatchError{Network: spec.Name, Field: "type", Have: l.Type(), Want: "bridge"}
	}
	return l, true, nil
}

// gatewayPrefixes are the bridge's addresses: each gateway with its pod
// CIDR's prefix length.
func gatewayPrefixes(spec overlay.LocalSpec) []netip.Prefix {
	out := make([]netip.Prefix, len(spec.Gateways))
	for i, gw := range spec.Gateways {
		out[i] = netip.PrefixFrom(gw, spec.PodCIDRs[i].Bits())
	}
	return out
}

// ensureBridge makes the bridge right: created (with a pinned MAC) when
// missing, then MTU, gateway addresses and up, each only when wrong.
func (n *Network) ensureBridge(spec overlay.LocalSpec, have netlink.Link, replace bool, mtu int) (netlink.Link, error) {
	if replace {
		if err := n.deleteLink(have); err != nil {
			return nil, err
		}
		have = nil
	}
	if have == nil {
		br := &netlink.Bridge{LinkAttrs: netlink.LinkAttrs{
			Name:         spec.Name,
			MTU:          mtu,
			HardwareAddr: bridgeMAC(spec.NodeIP, spec.Name),
		}}
		if err := n.writing.linkAdd(br); err != nil {
			return nil, fmt.Errorf("create bridge %s: %w", spec.Name, err)
		}
		n.log.Info("Created the node bridge", "bridge", spec.Name, "mtu", mtu)
		l, err := n.nl.LinkByName(spec.Name)
		if err != nil {
			return nil, fmt.Errorf("read bridge %s after creating it: %w", spec.Name, err)
		}
		have = l
	}
	if have.Attrs().MTU != mtu {
		if err := n.writing.linkMTU(have, mtu); err != nil {
			return nil, fmt.Errorf("set bridge %s MTU to %d: %w", spec.Name, mtu, err)
		}
	}
	addrs, err := n.nl.AddrList(have, netlink.FAMILY_ALL)
	if err != nil {
		return nil, fmt.Errorf("list addresses of %s: %w", spec.Name, err)
	}
	present := addrSet(addrs)
	for _, p := range gatewayPrefixes(spec) {
		if present[p] {
			continue
		}
		a := &netlink.Addr{IPNet: netaddr.IPNet(p)}
		if p.Addr().Is6() {
			a.Flags = unix.IFA_F_NODAD // the gateway must work at once
		}
		if err := n.writing.addrAdd(have, a); err != nil {
			return nil, fmt.Errorf("add gateway %v to %s: %w", p, spec.Name, err)
		}
		n.log.Info("Added a gateway address", "bridge", spec.Name, "address", p)
	}
	if have.Attrs().Flags&net.FlagUp == 0 {
		if err := n.writing.linkUp(have); err != nil {
			return nil, fmt.Errorf("set %s up: %w", spec.Name, err)
		}
	}
	return have, nil
}

// deleteLink removes a link AllowRecreate lets us replace, but never one
// with ports: those are pods' veths, and deleting it would cut them off.
func (n *Network) deleteLink(l netlink.Link) error {
	links, err := n.nl.LinkList()
	if err != nil {
		return fmt.Errorf("list links: %w", err)
	}
	var ports []string
	for _, p := range links {
		if p.Attrs().MasterIndex == l.Attrs().Index {
			ports = append(ports, p.Attrs().Name)
		}
	}
	if len(ports) > 0 {
		return fmt.Errorf("will not delete %s to re-create it: pods are attached (ports %v); move them off first", l.Attrs().Name, ports)
	}
	if err := n.writing.linkDel(l); err != nil {
		return fmt.Errorf("delete %s: %w", l.Attrs().Name, err)
	}
	n.log.Info("Deleted a mismatching link to re-create it", "link", l.Attrs().Name, "type", l.Type())
	return nil
}
