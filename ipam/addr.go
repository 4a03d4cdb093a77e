package ipam

import (
	"math"
	"net/netip"
)

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
