package linuxnet

import (
	"net"
	"net/netip"

	"github.com/vishvananda/netlink"

	"github.com/nodenet/nodenet/internal/netaddr"
)

func ipOf(a netip.Addr) net.IP { return net.IP(a.AsSlice()) }

func addrOf(ip net.IP) netip.Addr {
	a, _ := netip.AddrFromSlice(ip)
	return a.Unmap()
}

// addrSet reads a link's addresses as prefixes.
func addrSet(addrs []netlink.Addr) map[netip.Prefix]bool {
	set := make(map[netip.Prefix]bool, len(addrs))
	for _, a := range addrs {
		if p, ok := netaddr.FromIPNet(a.IPNet); ok {
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
