package netaddr

// Address plan: pod CIDRs 10.244.1.0/24, 10.244.9.0/30, 10.244.1.4/31 and
// fd00:10:244:1::/64.

import (
	"net"
	"net/netip"
	"testing"
)

func TestLast(t *testing.T) {
	for _, tt := range []struct{ prefix, want string }{
		{"10.244.1.0/24", "10.244.1.255"},
		{"10.244.1.77/24", "10.244.1.255"}, // host bits are ignored
		{"10.244.9.0/30", "10.244.9.3"},
		{"10.244.1.4/32", "10.244.1.4"},
		{"fd00:10:244:1::/64", "fd00:10:244:1:ffff:ffff:ffff:ffff"},
	} {
		t.Run(tt.prefix+" ends at "+tt.want, func(t *testing.T) {
			if got := Last(netip.MustParsePrefix(tt.prefix)); got != netip.MustParseAddr(tt.want) {
				t.Errorf("got %s", got)
			}
		})
	}
}

func TestAtOffset(t *testing.T) {
	for _, tt := range []struct {
		name   string
		prefix string
		offset int
		want   string // "" = not in the prefix
	}{
		{"offset 1 of a /24 is the gateway", "10.244.1.0/24", 1, "10.244.1.1"},
		{"offset 2 of a /24 is the source VIP", "10.244.1.0/24", 2, "10.244.1.2"},
		{"offset 0 is the network address", "10.244.1.0/24", 0, "10.244.1.0"},
		{"the last address of a /30 is in it", "10.244.9.0/30", 3, "10.244.9.3"},
		{"past the end of a /30 is not", "10.244.9.0/30", 4, ""},
		{"IPv6 works", "fd00:10:244:1::/64", 2, "fd00:10:244:1::2"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := AtOffset(netip.MustParsePrefix(tt.prefix), tt.offset)
			if tt.want == "" {
				if ok {
					t.Errorf("got %s, want none", got)
				}
				return
			}
			if !ok || got != netip.MustParseAddr(tt.want) {
				t.Errorf("got %s %v, want %s", got, ok, tt.want)
			}
		})
	}
}

func TestIsBroadcast(t *testing.T) {
	for _, tt := range []struct {
		prefix, addr string
		want         bool
	}{
		{"10.244.1.0/24", "10.244.1.255", true},
		{"10.244.1.0/24", "10.244.1.254", false},
		{"10.244.1.4/31", "10.244.1.5", false}, // point-to-point: no broadcast
		{"fd00:10:244:1::/64", "fd00:10:244:1:ffff:ffff:ffff:ffff", false},
	} {
		if got := IsBroadcast(netip.MustParsePrefix(tt.prefix), netip.MustParseAddr(tt.addr)); got != tt.want {
			t.Errorf("IsBroadcast(%s, %s) = %v, want %v", tt.prefix, tt.addr, got, tt.want)
		}
	}
}

func TestIPNetRoundTrip(t *testing.T) {
	for _, s := range []string{"10.244.1.7/24", "10.244.1.0/24", "fd00:10:244:1::9/64", "0.0.0.0/0"} {
		t.Run(s+" survives net.IPNet with its host bits", func(t *testing.T) {
			p := netip.MustParsePrefix(s)
			n := IPNet(p)
			if n.String() != s {
				t.Errorf("IPNet = %s", n)
			}
			got, ok := FromIPNet(n)
			if !ok || got != p {
				t.Errorf("FromIPNet = %v, %t; want %v", got, ok, p)
			}
		})
	}
	for _, tt := range []struct {
		name string
		in   *net.IPNet
		want string
	}{
		{"a 16-byte IPv4 address with an IPv4 mask is IPv4", &net.IPNet{IP: net.ParseIP("10.244.1.7"), Mask: net.CIDRMask(24, 32)}, "10.244.1.7/24"},
		{"nil is not an address", nil, ""},
		{"an IPv4 address with an IPv6 mask is not one", &net.IPNet{IP: net.ParseIP("10.244.1.7").To4(), Mask: net.CIDRMask(24, 128)}, ""},
		{"a truncated IP is not one", &net.IPNet{IP: net.IP{10, 244}, Mask: net.CIDRMask(16, 32)}, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := FromIPNet(tt.in)
			if (tt.want == "") != !ok || (ok && got.String() != tt.want) {
				t.Errorf("FromIPNet = %v, %t; want %q", got, ok, tt.want)
			}
		})
	}
}

func TestOrNone(t *testing.T) {
	for _, tt := range []struct {
		in   netip.Addr
		want string
	}{
		{netip.Addr{}, "none"},
		{netip.MustParseAddr("10.244.1.2"), "10.244.1.2"},
		{netip.MustParseAddr("fd00::2"), "fd00::2"},
	} {
		if got := OrNone(tt.in); got != tt.want {
			t.Errorf("OrNone(%#v) = %q, want %q", tt.in, got, tt.want)
		}
	}
}
