// Package netaddr holds the address arithmetic on pod CIDRs that the
// config (source VIP, gateway checks) and IPAM (reservations) share.
package netaddr

import "net/netip"

// Last returns the highest address in p (the IPv4 broadcast address).
func Last(p netip.Prefix) netip.Addr {
	b := p.Masked().Addr().AsSlice()
	for i := p.Bits(); i < len(b)*8; i++ {
		b[i/8] |= 0x80 >> (i % 8)
	}
	a, _ := netip.AddrFromSlice(b)
	return a
}

// AtOffset returns the address offset places after p's network address,
// or false when that is outside p.
func AtOffset(p netip.Prefix, offset int) (netip.Addr, bool) {
	a := p.Masked().Addr()
	for range offset {
		a = a.Next()
		if !a.IsValid() || !p.Contains(a) {
			return netip.Addr{}, false
		}
	}
	return a, true
}

// IsBroadcast reports whether a is p's IPv4 broadcast address (/31 and
// /32 have none, nor does IPv6).
func IsBroadcast(p netip.Prefix, a netip.Addr) bool {
	return a.Is4() && p.Bits() < 31 && a == Last(p)
}
