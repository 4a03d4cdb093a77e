package ipam

import (
	"math"
	"net/netip"
)

// lastAddr returns the highest address in p (the IPv4 broadcast address).
func lastAddr(p netip.Prefix) netip.Addr {
	b := p.Masked().Addr().AsSlice()
	for i := p.Bits(); i < len(b)*8; i++ {
		b[i/8] |= 0x80 >> (i % 8)
	}
	a, _ := netip.AddrFromSlice(b)
	return a
}

// addrAtOffset returns the address offset places after p's network
// address, or false when that is outside p.
func addrAtOffset(p netip.Prefix, offset int) (netip.Addr, bool) {
	a := p.Masked().Addr()
	for range offset {
		a = a.Next()
		if !a.IsValid() || !p.Contains(a) {
			return netip.Addr{}, false
		}
	}
	return a, true
}

// prefixSize returns how many addresses p holds, saturated at MaxUint64
// (an IPv6 /64 holds one more than fits).
func prefixSize(p netip.Prefix) uint64 {
	hostBits := p.Addr().BitLen() - p.Bits()
	if hostBits >= 64 {
		return math.MaxUint64
	}
	return 1 << hostBits
}

// nextInPrefix returns the address after a, wrapping from the end of p back
// to its network address.
func nextInPrefix(p netip.Prefix, a netip.Addr) netip.Addr {
	n := a.Next()
	if !n.IsValid() || !p.Contains(n) {
		return p.Addr()
	}
	return n
}
