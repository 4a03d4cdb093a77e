package nodecidr

// Address plan: cluster CIDRs 10.244.0.0/16 (node /24s), 10.0.0.0/30
// (node /31s, to fill quickly) and fd00:10:244::/56 (node /64s).

import (
	"net/netip"
	"strings"
	"testing"
)

func prefixes(ss ...string) []netip.Prefix {
	var out []netip.Prefix
	for _, s := range ss {
		out = append(out, netip.MustParsePrefix(s))
	}
	return out
}

func TestPoolNextHandsOutTheLowestFreeSubnet(t *testing.T) {
	tests := []struct {
		name string
		cidr string
		bits int
		used []netip.Prefix
		want string // "" for exhausted
	}{
		{"an empty pool starts at its first subnet", "10.244.0.0/16", 24, nil, "10.244.0.0/24"},
		{"used subnets in order are skipped", "10.244.0.0/16", 24, prefixes("10.244.0.0/24", "10.244.1.0/24"), "10.244.2.0/24"},
		{"a hole left by a deleted node is reused first", "10.244.0.0/16", 24, prefixes("10.244.0.0/24", "10.244.2.0/24"), "10.244.1.0/24"},
		{"order of the used list does not matter", "10.244.0.0/16", 24, prefixes("10.244.1.0/24", "10.244.0.0/24"), "10.244.2.0/24"},
		{"a smaller hand-set subnet blocks the whole subnet around it", "10.244.0.0/16", 24, prefixes("10.244.0.64/26"), "10.244.1.0/24"},
		{"a larger used prefix is skipped whole", "10.244.0.0/16", 24, prefixes("10.244.0.0/23", "10.244.2.0/24"), "10.244.3.0/24"},
		{"fragmented small subnets each block their own subnet", "10.244.0.0/16", 24, prefixes("10.244.0.128/25", "10.244.1.3/32", "10.244.3.0/24"), "10.244.2.0/24"},
		{"prefixes outside the pool or of the other family are ignored", "10.244.0.0/16", 24, prefixes("10.245.0.0/24", "10.243.255.0/24", "fd00::/64"), "10.244.0.0/24"},
		{"a prefix covering the whole pool exhausts it", "10.244.0.0/16", 24, prefixes("10.0.0.0/8"), ""},
		{"the last subnet is handed out", "10.0.0.0/30", 31, prefixes("10.0.0.0/31"), "10.0.0.2/31"},
		{"a full pool is exhausted", "10.0.0.0/30", 31, prefixes("10.0.0.0/31", "10.0.0.2/31"), ""},
		{"a pool as large as one subnet holds exactly that one", "10.0.0.0/30", 30, nil, "10.0.0.0/30"},
		{"IPv6 subnets are handed out in order", "fd00:10:244::/56", 64, prefixes("fd00:10:244::/64", "fd00:10:244:1::/64"), "fd00:10:244:2::/64"},
		{"the top IPv6 subnet is reachable", "fd00:10:244::/56", 64, prefixes("fd00:10:244::/57", "fd00:10:244:80::/58", "fd00:10:244:c0::/59", "fd00:10:244:e0::/60", "fd00:10:244:f0::/61", "fd00:10:244:f8::/62", "fd00:10:244:fc::/63", "fd00:10:244:fe::/64"), "fd00:10:244:ff::/64"},
		{"an IPv6 pool at the end of the address space exhausts without wrapping", "ffff:ffff:ffff:ffff::/64", 65, prefixes("ffff:ffff:ffff:ffff::/65", "ffff:ffff:ffff:ffff:8000::/65"), ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := NewPool(netip.MustParsePrefix(tt.cidr), tt.bits)
			if err != nil {
				t.Fatal(err)
			}
			got, ok := p.Next(tt.used)
			switch {
			case tt.want == "" && ok:
				t.Errorf("Next = %s, want exhausted", got)
			case tt.want != "" && (!ok || got != netip.MustParsePrefix(tt.want)):
				t.Errorf("Next = %s, %v; want %s", got, ok, tt.want)
			}
		})
	}
}

func TestPoolNextFillsAPoolWithDistinctSubnets(t *testing.T) {
	p, err := NewPool(netip.MustParsePrefix("10.244.0.0/20"), 24)
	if err != nil {
		t.Fatal(err)
	}
	var used []netip.Prefix
	seen := map[netip.Prefix]bool{}
	for {
		next, ok := p.Next(used)
		if !ok {
			break
		}
		if seen[next] || !p.CIDR().Contains(next.Addr()) || next.Bits() != 24 {
			t.Fatalf("Next handed out %s after %v", next, used)
		}
		seen[next] = true
		used = append(used, next)
	}
	if len(used) != 16 || p.Size() != "16" {
		t.Errorf("handed out %d subnets of a pool of %s, want 16", len(used), p.Size())
	}
}

func TestNewPoolRejectsMasksThatDoNotFit(t *testing.T) {
	tests := []struct {
		name    string
		cidr    netip.Prefix
		bits    int
		wantErr string
	}{
		{"a mask shorter than the cluster CIDR's", netip.MustParsePrefix("10.244.0.0/16"), 15, "/15 does not fit cluster CIDR 10.244.0.0/16"},
		{"an IPv4 mask longer than 32", netip.MustParsePrefix("10.244.0.0/16"), 33, "between 16 and 32"},
		{"an IPv6 mask longer than 128", netip.MustParsePrefix("fd00::/56"), 129, "between 56 and 128"},
		{"a missing cluster CIDR", netip.Prefix{}, 24, "not a valid prefix"},
		{"a host-bits cluster CIDR is masked, not rejected", netip.MustParsePrefix("10.244.3.4/16"), 24, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := NewPool(tt.cidr, tt.bits)
			if tt.wantErr == "" {
				if err != nil {
					t.Fatalf("NewPool: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("NewPool error = %v, want one containing %q", err, tt.wantErr)
			}
		})
	}
}
