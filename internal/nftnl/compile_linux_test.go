package nftnl

import (
	"fmt"
	"net/netip"
	"strings"
	"testing"
)

// TestCompileRuleRefusesWhatItDoesNotKnow: the compiler is for the
// vocabulary of nodenet's tables and says so rather than guessing.
func TestCompileRuleRefusesWhatItDoesNotKnow(t *testing.T) {
	id := func() uint32 { return 1 }
	for _, text := range []string{
		"ip daddr 10.0.0.1 counter",
		"ip daddr . ip6 saddr @x",
		"meta l4proto icmp drop",
		"dnat ip to 10.0.0.1",
		"numgen random mod 0 == 0 drop",
		"th sport 80 drop",
		"ip saddr { 10.0.0.1, fd00::1 } drop",
		"jump",
		"meta nfproto arp drop",
		"meta nfproto ipv4 ip6 daddr ::1 return",
		"ip saddr 10.0.0.1 meta nfproto ipv6 drop",
		"dnat ip to ip daddr . th dport @m",
	} {
		if _, err := compileRule(text, id); err == nil {
			t.Errorf("%q compiled", text)
		}
	}
	for _, text := range []string{
		"drop", "ip saddr { 10.0.0.0/24, 10.0.1.0/24 } return", "masquerade",
		"meta nfproto ipv6 dnat ip6 to meta l4proto . th dport map @m",
		"dnat ip to ip daddr . meta l4proto . th dport map @m",
		"ip saddr 10.244.1.0/24 ip daddr != { 10.244.0.0/16, 224.0.0.0/4 } masquerade fully-random",
	} {
		if _, err := compileRule(text, id); err != nil {
			t.Errorf("%q: %v", text, err)
		}
	}
}

// TestCompileRuleSpellings: what nft generates the same expressions for
// compiles to the same expressions.
func TestCompileRuleSpellings(t *testing.T) {
	id := func() uint32 { return 1 }
	for _, tc := range []struct{ a, b string }{
		// A one-element set is matched as its element.
		{"ip saddr { 10.244.1.0/24 } return", "ip saddr 10.244.1.0/24 return"},
		{"ip6 daddr != { fd00::1 } drop", "ip6 daddr != fd00::1 drop"},
		// An explicit family check is the one an ip match implies.
		{"meta nfproto ipv4 ip daddr 10.0.0.1 drop", "ip daddr 10.0.0.1 drop"},
		// "dnat to … map" of an address . port map is "dnat addr . port to".
		{"dnat ip to ip daddr . th dport map @m", "dnat ip addr . port to ip daddr . th dport map @m"},
	} {
		a, err := compileRule(tc.a, id)
		if err != nil {
			t.Fatal(err)
		}
		b, err := compileRule(tc.b, id)
		if err != nil {
			t.Fatal(err)
		}
		if len(a.anon) != 0 || len(b.anon) != 0 {
			t.Errorf("%q / %q: anonymous sets %v / %v", tc.a, tc.b, a.anon, b.anon)
		}
		if len(a.exprs) != len(b.exprs) {
			t.Errorf("%q: %d expressions, %q: %d", tc.a, len(a.exprs), tc.b, len(b.exprs))
			continue
		}
		for i := range a.exprs {
			if ga, gb := strings.TrimSpace(sprint(a.exprs[i])), strings.TrimSpace(sprint(b.exprs[i])); ga != gb {
				t.Errorf("%q / %q: expression %d: %s / %s", tc.a, tc.b, i, ga, gb)
			}
		}
	}
}

// TestMergeRanges: an interval set holds sorted, disjoint, non-adjacent
// ranges.
func TestMergeRanges(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"10.0.1.0/24 10.0.0.0/24", "10.0.0.0-10.0.2.0"},
		{"10.0.0.0/8 10.1.0.0/16", "10.0.0.0-11.0.0.0"},
		{"192.0.2.0/24 203.0.113.0/25", "192.0.2.0-192.0.3.0 203.0.113.0-203.0.113.128"},
		{"255.255.255.0/24 0.0.0.0/1", "0.0.0.0-128.0.0.0 255.255.255.0-end"},
		{"0.0.0.0/0 10.0.0.0/8", "0.0.0.0-end"},
		{"fd00:1::/64 fd00:1:0:1::/64", "fd00:1::-fd00:1:0:2::"},
	} {
		var ps []netip.Prefix
		for _, f := range strings.Fields(tc.in) {
			ps = append(ps, netip.MustParsePrefix(f))
		}
		var got []string
		for _, r := range mergeRanges(ps) {
			end := "end"
			if r[1].IsValid() {
				end = r[1].String()
			}
			got = append(got, r[0].String()+"-"+end)
		}
		if g := strings.Join(got, " "); g != tc.want {
			t.Errorf("%s: got %s, want %s", tc.in, g, tc.want)
		}
	}
}

// TestRangeString: listed interval elements read as prefixes where they
// are.
func TestRangeString(t *testing.T) {
	for _, tc := range []struct{ s, end, want string }{
		{"10.0.0.0", "10.1.0.0", "10.0.0.0/16"},
		{"10.0.0.5", "10.0.0.6", "10.0.0.5"},
		{"10.0.0.0", "10.0.2.0", "10.0.0.0/23"},
		{"10.0.0.0", "10.0.3.0", "10.0.0.0-10.0.2.255"},
		{"0.0.0.0", "", "0.0.0.0/0"},
		{"255.255.255.0", "", "255.255.255.0/24"},
		{"fd00:1::", "fd00:1:0:1::", "fd00:1::/64"},
	} {
		var end netip.Addr
		if tc.end != "" {
			end = netip.MustParseAddr(tc.end)
		}
		if got := rangeString(netip.MustParseAddr(tc.s), end); got != tc.want {
			t.Errorf("[%s, %s): got %s, want %s", tc.s, tc.end, got, tc.want)
		}
	}
}

func sprint(x any) string { return fmt.Sprintf("%T%+v", x, x) }
