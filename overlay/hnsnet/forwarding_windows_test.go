//go:build windows

package hnsnet

import (
	"testing"

	"golang.org/x/sys/windows"
)

// The row written to SetIpInterfaceEntry turns forwarding on and clears
// the IPv4 site prefix length, and nothing is written when forwarding is
// already on. (The iphlpapi calls themselves need a real host.)
func TestForwardingRow(t *testing.T) {
	for _, tc := range []struct {
		name      string
		in        windows.MibIpInterfaceRow
		wantWrite bool
		wantSite  uint32
	}{
		{name: "IPv4, off: on, site prefix length cleared", in: windows.MibIpInterfaceRow{Family: windows.AF_INET, SitePrefixLength: 64}, wantWrite: true},
		{name: "IPv4, on already: no write", in: windows.MibIpInterfaceRow{Family: windows.AF_INET, ForwardingEnabled: 1, SitePrefixLength: 64}, wantSite: 64},
		{name: "IPv6, off: the site prefix length stays", in: windows.MibIpInterfaceRow{Family: windows.AF_INET6, SitePrefixLength: 48}, wantWrite: true, wantSite: 48},
	} {
		t.Run(tc.name, func(t *testing.T) {
			row := tc.in
			if got := forwardingRow(&row); got != tc.wantWrite {
				t.Fatalf("write = %t, want %t", got, tc.wantWrite)
			}
			if row.ForwardingEnabled != 1 || row.SitePrefixLength != tc.wantSite {
				t.Errorf("row forwarding=%d site=%d, want 1 and %d", row.ForwardingEnabled, row.SitePrefixLength, tc.wantSite)
			}
		})
	}
}
