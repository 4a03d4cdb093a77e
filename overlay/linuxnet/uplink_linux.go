package linuxnet

import (
	"errors"
	"fmt"
	"net/netip"
	"slices"

	"github.com/vishvananda/netlink"

	"github.com/nodenet/nodenet/internal/netaddr"
	"github.com/nodenet/nodenet/overlay"
)

// uplink is the adapter NodeIP sits on.
type uplink struct {
	link    netlink.Link
	subnets []netip.Prefix // its IPv4 and global IPv6 subnets
}

// findUplink resolves spec.ExternalInterface, or the link holding
// spec.NodeIP, with reads only. Anything missing is a *SpecError.
func (n *Network) findUplink(spec overlay.LocalSpec) (*uplink, error) {
	const field = "network.externalInterface"
	if !spec.NodeIP.Is4() {
		return nil, &overlay.SpecError{Field: "node IP", Reason: fmt.Sprintf("%v is not an IPv4 address", spec.NodeIP)}
	}
	var link netlink.Link
	if spec.ExternalInterface != "" {
		l, err := n.nl.LinkByName(spec.ExternalInterface)
		if isNotFound(err) {
			return nil, &overlay.SpecError{Field: field, Reason: fmt.Sprintf("interface %q does not exist in the node's network namespace", spec.ExternalInterface)}
		}
		if err != nil {
			return nil, fmt.Errorf("read uplink %s: %w", spec.ExternalInterface, err)
		}
		link = l
	} else {
		addrs, err := n.nl.AddrList(nil, netlink.FAMILY_V4)
		if err != nil {
			return nil, fmt.Errorf("list addresses: %w", err)
		}
		for _, a := range addrs {
			if p, ok := netaddr.FromIPNet(a.IPNet); ok && p.Addr() == spec.NodeIP {
				if link, err = n.nl.LinkByIndex(a.LinkIndex); err != nil {
					return nil, fmt.Errorf("read the link holding %v: %w", spec.NodeIP, err)
				}
				break
			}
		}
		if link == nil {
			return nil, &overlay.SpecError{Field: field, Reason: fmt.Sprintf("no interface holds the node IP %v; set network.externalInterface or fix the node IP", spec.NodeIP)}
		}
	}
	addrs, err := n.nl.AddrList(link, netlink.FAMILY_ALL)
	if err != nil {
		return nil, fmt.Errorf("list addresses of %s: %w", link.Attrs().Name, err)
	}
	up := &uplink{link: link}
	holds := false
	for _, a := range addrs {
		p, ok := netaddr.FromIPNet(a.IPNet)
		if !ok || p.Addr().IsLinkLocalUnicast() {
			continue
		}
		holds = holds || p.Addr() == spec.NodeIP
		if m := p.Masked(); !slices.Contains(up.subnets, m) {
			up.subnets = append(up.subnets, m)
		}
	}
	if !holds {
		return nil, &overlay.SpecError{Field: field, Reason: fmt.Sprintf("interface %q does not hold the node IP %v", link.Attrs().Name, spec.NodeIP)}
	}
	return up, nil
}

// onLink reports whether ip is in one of the uplink's subnets: host-gw
// routes need the next hop to be L2-adjacent.
func onLink(subnets []netip.Prefix, ip netip.Addr) bool {
	for _, s := range subnets {
		if s.Contains(ip) {
			return true
		}
	}
	return false
}

func isNotFound(err error) bool {
	var nf netlink.LinkNotFoundError
	return errors.As(err, &nf)
}
