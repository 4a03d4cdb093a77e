//go:build windows

package hostroute

import (
	"context"
	"net/netip"
	"testing"
)

// Address plan: none of its own; it reads the host's table and converts
// 10.244.2.0/24 via 192.168.1.12 both ways.

func TestTableListReadsTheHostTable(t *testing.T) {
	routes, err := New().List(context.Background())
	if err != nil {
		t.Fatalf("List: %v", err)
	}
	for _, r := range routes {
		if !r.Destination.IsValid() || !r.NextHop.IsValid() {
			t.Errorf("route with invalid fields: %+v", r)
		}
	}
	t.Logf("%d routes", len(routes))
}

func TestRowConversionRoundTrips(t *testing.T) {
	for _, r := range []Route{
		{Destination: netip.MustParsePrefix("10.244.2.0/24"), NextHop: netip.MustParseAddr("192.168.1.12"), InterfaceIndex: 7, Metric: 11},
		{Destination: netip.MustParsePrefix("fd00:10:244:2::/64"), NextHop: netip.MustParseAddr("fd00::12"), InterfaceIndex: 7, Metric: 11},
	} {
		t.Run("a route to "+r.Destination.String()+" survives the MIB row form", func(t *testing.T) {
			row, err := New().row(r)
			if err != nil {
				t.Fatalf("row: %v", err)
			}
			row.Metric = r.Metric
			got, ok := fromRow(row)
			if !ok || got != r {
				t.Errorf("round trip = %+v, %t; want %+v", got, ok, r)
			}
		})
	}
}
