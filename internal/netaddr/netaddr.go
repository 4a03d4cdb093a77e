// Package netaddr holds the address arithmetic on pod CIDRs that the
// config (source VIP, gateway checks) and IPAM (reservations) share, and
// the netip <-> net.IPNet conversions the dataplanes and CNI results need.
package netaddr

import (
	"net"
	"net/netip"
)

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

// IPNet converts p (an address with its prefix length, host bits kept) to
// the net.IPNet the kernel and CNI types use.
func IPNet(p netip.Prefix) *net.IPNet {
	return &net.IPNet{IP: net.IP(p.Addr().AsSlice()), Mask: net.CIDRMask(p.Bits(), p.Addr().BitLen())}
}

// FromIPNet converts a kernel or OS address (IP and mask) to a prefix
// holding the unmasked address; ok is false when it isn't one (nil, a
// bad IP, or a mask of the other family).
func FromIPNet(n *net.IPNet) (netip.Prefix, bool) {
	if n == nil {
		return netip.Prefix{}, false
	}
	ip, ok := netip.AddrFromSlice(n.IP)
	if !ok {
		return netip.Prefix{}, false
	}
	ip = ip.Unmap()
	ones, bits := n.Mask.Size()
	if bits != ip.BitLen() {
		return netip.Prefix{}, false
	}
	return netip.PrefixFrom(ip, ones), true
}

// OrNone formats a for logs and messages: "none" for the zero Addr (whose
// String is the puzzling "invalid IP").
func OrNone(a netip.Addr) string {
	if !a.IsValid() {
		return "none"
	}
	return a.String()
}
