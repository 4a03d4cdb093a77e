// Address plan: 10.244.1.0/24 and fd00:10:244:1::/64 are the node's pod
// CIDRs; 10.244.1.2 is the source VIP; 10.244.2.0/24 stands for another
// node's CIDR; /30, /31, /32, /126, /127, /128 probe the size limits.
package ipam

import (
	"net/netip"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestNewRejectsInvalidOptions(t *testing.T) {
	dir := t.TempDir()
	tests := []struct {
		name    string
		opts    Options
		wantErr string
	}{
		{
			name:    "an empty data directory is refused",
			opts:    Options{Network: testNetwork, Ranges: []Range{rng("10.244.1.0/24")}},
			wantErr: "data directory is empty",
		},
		{
			name:    "an empty network name is refused",
			opts:    Options{DataDir: dir, Ranges: []Range{rng("10.244.1.0/24")}},
			wantErr: "network name is empty",
		},
		{
			name:    "a network name that is a path is refused",
			opts:    Options{DataDir: dir, Network: "../etc", Ranges: []Range{rng("10.244.1.0/24")}},
			wantErr: `network name "../etc" must be a single path element`,
		},
		{
			name:    "a network name of dot-dot is refused",
			opts:    Options{DataDir: dir, Network: "..", Ranges: []Range{rng("10.244.1.0/24")}},
			wantErr: `network name ".." must be a single path element`,
		},
		{
			name:    "no range is refused",
			opts:    Options{DataDir: dir, Network: testNetwork},
			wantErr: "no ranges: need one pod CIDR per IP family",
		},
		{
			name:    "a range without a subnet is refused",
			opts:    Options{DataDir: dir, Network: testNetwork, Ranges: []Range{{}}},
			wantErr: "range 0: subnet is not set",
		},
		{
			name:    "a subnet with host bits set is refused",
			opts:    Options{DataDir: dir, Network: testNetwork, Ranges: []Range{rng("10.244.1.7/24")}},
			wantErr: "range 0: subnet 10.244.1.7/24 has host bits set (the network is 10.244.1.0/24)",
		},
		{
			name:    "an IPv4-mapped IPv6 subnet is refused",
			opts:    Options{DataDir: dir, Network: testNetwork, Ranges: []Range{rng("::ffff:10.244.1.0/120")}},
			wantErr: "range 0: subnet ::ffff:10.244.1.0/120 is an IPv4-mapped IPv6 prefix: give it as IPv4",
		},
		{
			name:    "an IPv4 /31 is too small",
			opts:    Options{DataDir: dir, Network: testNetwork, Ranges: []Range{rng("10.244.1.0/31")}},
			wantErr: "range 0: subnet 10.244.1.0/31 is too small to allocate from: an IPv4 range needs /30 or larger, an IPv6 range /126 or larger",
		},
		{
			name:    "an IPv4 /32 is too small",
			opts:    Options{DataDir: dir, Network: testNetwork, Ranges: []Range{rng("10.244.1.0/32")}},
			wantErr: "range 0: subnet 10.244.1.0/32 is too small to allocate from: an IPv4 range needs /30 or larger, an IPv6 range /126 or larger",
		},
		{
			name:    "an IPv6 /127 is too small",
			opts:    Options{DataDir: dir, Network: testNetwork, Ranges: []Range{rng("fd00:10:244:1::/127")}},
			wantErr: "range 0: subnet fd00:10:244:1::/127 is too small to allocate from: an IPv4 range needs /30 or larger, an IPv6 range /126 or larger",
		},
		{
			name:    "an IPv4 /30 whose only free address is the source VIP is too small",
			opts:    Options{DataDir: dir, Network: testNetwork, Ranges: []Range{rng("10.244.1.0/30", "10.244.1.2")}},
			wantErr: "range 0: subnet 10.244.1.0/30 is too small: no address left after reserving the network, broadcast and gateway addresses and 1 more",
		},
		{
			name:    "a reserved address outside the subnet is refused",
			opts:    Options{DataDir: dir, Network: testNetwork, Ranges: []Range{rng("10.244.1.0/24", "10.244.2.2")}},
			wantErr: "range 0: reserved address 10.244.2.2 is outside 10.244.1.0/24",
		},
		{
			name:    "a reserved IPv6 address in an IPv4 range is refused",
			opts:    Options{DataDir: dir, Network: testNetwork, Ranges: []Range{rng("10.244.1.0/24", "fd00:10:244:1::2")}},
			wantErr: "range 0: reserved address fd00:10:244:1::2 is outside 10.244.1.0/24",
		},
		{
			name:    "an unset reserved address is refused",
			opts:    Options{DataDir: dir, Network: testNetwork, Ranges: []Range{{Subnet: v4Subnet, Reserved: []netip.Addr{{}}}}},
			wantErr: "range 0: reserved address 0 is not set",
		},
		{
			name:    "a gateway outside the subnet is refused",
			opts:    Options{DataDir: dir, Network: testNetwork, Ranges: []Range{{Subnet: v4Subnet, Gateway: addr("10.244.2.1")}}},
			wantErr: "range 0: gateway 10.244.2.1 is outside 10.244.1.0/24",
		},
		{
			name:    "a gateway on the broadcast address is refused",
			opts:    Options{DataDir: dir, Network: testNetwork, Ranges: []Range{{Subnet: v4Subnet, Gateway: addr("10.244.1.255")}}},
			wantErr: "range 0: gateway 10.244.1.255 is the network or broadcast address of 10.244.1.0/24",
		},
		{
			name:    "two IPv4 ranges are refused",
			opts:    Options{DataDir: dir, Network: testNetwork, Ranges: []Range{rng("10.244.1.0/24"), rng("10.244.2.0/24")}},
			wantErr: "range 1: 10.244.2.0/24 is the second range of its IP family (range 0 is 10.244.1.0/24): give one pod CIDR per family",
		},
		{
			name:    "two IPv6 ranges are refused",
			opts:    Options{DataDir: dir, Network: testNetwork, Ranges: []Range{rng("fd00:10:244:1::/64"), rng("10.244.1.0/24"), rng("fd00:10:244:2::/64")}},
			wantErr: "range 2: fd00:10:244:2::/64 is the second range of its IP family (range 0 is fd00:10:244:1::/64): give one pod CIDR per family",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, err := New(tt.opts)
			if err == nil {
				_ = a.Close()
				t.Fatalf("New succeeded, want error %q", tt.wantErr)
			}
			if diff := cmp.Diff(tt.wantErr, err.Error()); diff != "" {
				t.Errorf("error (-want +got):\n%s", diff)
			}
		})
	}
}

func TestNewAcceptsTheSmallestRanges(t *testing.T) {
	tests := []struct {
		name  string
		rng   Range
		first netip.Addr
	}{
		{name: "an IPv4 /30 hands out its one address", rng: rng("10.244.1.0/30"), first: addr("10.244.1.2")},
		{name: "an IPv6 /126 hands out the two after the gateway", rng: rng("fd00:10:244:1::/126"), first: addr("fd00:10:244:1::2")},
		{name: "an IPv6 /64 with the VIP reserved skips it", rng: rng("fd00:10:244:1::/64", "fd00:10:244:1::2"), first: addr("fd00:10:244:1::3")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := newAllocator(t, "", tt.rng)
			got := mustAllocate(t, a, "pod-a", "eth0")
			if diff := cmp.Diff([]netip.Addr{tt.first}, ipsOf(got), netipCmp); diff != "" {
				t.Errorf("allocated (-want +got):\n%s", diff)
			}
		})
	}
}

func TestNewCreatesTheStoreDirectory(t *testing.T) {
	dataDir := filepath.Join(t.TempDir(), "does", "not", "exist")
	newAllocator(t, dataDir, rng("10.244.1.0/24"))
	fi, err := os.Stat(filepath.Join(dataDir, testNetwork))
	if err != nil || !fi.IsDir() {
		t.Fatalf("store directory: %v, %v", fi, err)
	}
}

func TestGatewayDefaultsToTheFirstAddress(t *testing.T) {
	tests := []struct {
		name string
		rng  Range
		want netip.Addr
	}{
		{name: "an IPv4 range without a gateway uses .1", rng: rng("10.244.1.0/24"), want: addr("10.244.1.1")},
		{name: "an IPv6 range without a gateway uses ::1", rng: rng("fd00:10:244:1::/64"), want: addr("fd00:10:244:1::1")},
		{name: "an explicit gateway is kept", rng: Range{Subnet: v4Subnet, Gateway: addr("10.244.1.254")}, want: addr("10.244.1.254")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := newAllocator(t, "", tt.rng)
			got := mustAllocate(t, a, "pod-a", "eth0")
			if diff := cmp.Diff(tt.want, got[0].Gateway, netipCmp); diff != "" {
				t.Errorf("gateway (-want +got):\n%s", diff)
			}
		})
	}
}
