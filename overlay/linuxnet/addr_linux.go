package linuxnet

import (
	"net"
	"net/netip"

	"github.com/vishvananda/netlink"
)

// prefixOf converts a netlink address to a netip.Prefix (host bits kept).
func prefixOf(ipn *net.IPNet) (netip.Prefix, bool) {
	if ipn == nil {
		return netip.Prefix{}, false
	}
	a, ok := netip.AddrFromSlice(ipn.IP)
	if !ok {
		return netip.Prefix{}, false
	}
	ones, _ := ipn.Mask.Size()
	return netip.PrefixFrom(a.Unmap(), ones), true
}

func ipNet(p netip.Prefix) *net.IPNet {
	bits := 32
	if p.Addr().Is6() {
		bits = 128
	}
	return &net.IPNet{IP: p.Addr().AsSlice(), Mask: net.CIDRMask(p.Bits(), bits)}
}

func ipOf(a netip.Addr) net.IP { return net.IP(a.AsSlice()) }

func addrOf(ip net.IP) netip.Addr {
	a, _ := netip.AddrFromSlice(ip)
	return a.Unmap()
}

// addrSet reads a link's addresses as prefixes.
func addrSet(addrs []netlink.Addr) map[netip.Prefix]bool {
	set := make(map[netip.Prefix]bool, len(addrs))
	for _, a := range addrs {
		if p, ok := prefixOf(a.IPNet); ok {
			set[p] = true
		}
	}
	return set
}

func family(a netip.Addr) int {
	if a.Is4() {
		return netlink.FAMILY_V4
	}
	return netlink.FAMILY_V6
}
