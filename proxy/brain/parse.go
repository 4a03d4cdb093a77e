package brain

import (
	"errors"
	"net/netip"
	"strconv"
	"strings"
)

// parseAddr parses an IP the way the API server accepts it: IPv4 may have
// leading zeros (legacy objects validated before 1.30), zones are refused,
// and 4-in-6 mapped addresses count as IPv4.
func parseAddr(s string) (netip.Addr, error) {
	a, err := netip.ParseAddr(s)
	if err != nil {
		var ok bool
		if a, ok = parseLegacyIPv4(s); !ok {
			return netip.Addr{}, err
		}
	}
	if a.Zone() != "" {
		return netip.Addr{}, errors.New("IP has a zone")
	}
	return a.Unmap(), nil
}

// parseLegacyIPv4 parses dotted decimal with leading zeros ("010.0.0.1"
// is 10.0.0.1, as Kubernetes' sloppy parser reads it).
func parseLegacyIPv4(s string) (netip.Addr, bool) {
	var b [4]byte
	parts := strings.Split(s, ".")
	if len(parts) != 4 {
		return netip.Addr{}, false
	}
	for i, p := range parts {
		if p == "" || len(p) > 8 || strings.Trim(p, "0123456789") != "" {
			return netip.Addr{}, false
		}
		n, err := strconv.ParseUint(p, 10, 8)
		if err != nil {
			return netip.Addr{}, false
		}
		b[i] = byte(n)
	}
	return netip.AddrFrom4(b), true
}

// parsePrefix parses a CIDR, tolerating host bits (10.0.0.1/8 is
// 10.0.0.0/8) and legacy leading zeros like parseAddr.
func parsePrefix(s string) (netip.Prefix, error) {
	addrPart, bitsPart, ok := strings.Cut(s, "/")
	if !ok {
		return netip.Prefix{}, errors.New("no prefix length")
	}
	a, err := netip.ParseAddr(addrPart)
	if err != nil {
		var ok bool
		if a, ok = parseLegacyIPv4(addrPart); !ok {
			return netip.Prefix{}, err
		}
	}
	if a.Zone() != "" || a.Is4In6() {
		return netip.Prefix{}, errors.New("not a plain IPv4 or IPv6 prefix")
	}
	bits, err := strconv.Atoi(bitsPart)
	if err != nil || strings.Trim(bitsPart, "0123456789") != "" || bits > a.BitLen() || (len(bitsPart) > 1 && bitsPart[0] == '0') {
		return netip.Prefix{}, errors.New("bad prefix length")
	}
	return netip.PrefixFrom(a, bits).Masked(), nil
}
