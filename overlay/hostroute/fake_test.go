// Address plan: interface 7 holds the node subnet 192.168.1.0/24 (node
// 192.168.1.11, peers .12 and .13); interface 9 holds 172.16.0.0/24.
// Remote pod subnets are 10.244.2.0/24 and 10.244.3.0/24.
package hostroute

import (
	"context"
	"net/netip"
	"testing"
)

var ctx = context.Background()

func route(dst, via string, ifIndex int, metric uint32) Route {
	return Route{Destination: netip.MustParsePrefix(dst), NextHop: netip.MustParseAddr(via), InterfaceIndex: ifIndex, Metric: metric}
}

func TestFake(t *testing.T) {
	for _, tc := range []struct {
		name       string
		steps      func(f *Fake) error
		wantErr    func(error) bool
		wantRoutes int
		wantWrites int
	}{
		{
			name:       "a route on-link on its interface is added",
			steps:      func(f *Fake) error { return f.Add(ctx, route("10.244.2.0/24", "192.168.1.12", 7, 100)) },
			wantRoutes: 1, wantWrites: 1,
		},
		{
			name: "a second route with the same key is rejected even with another metric",
			steps: func(f *Fake) error {
				if err := f.Add(ctx, route("10.244.2.0/24", "192.168.1.12", 7, 100)); err != nil {
					return err
				}
				return f.Add(ctx, route("10.244.2.0/24", "192.168.1.12", 7, 5))
			},
			wantErr: IsExists, wantRoutes: 1, wantWrites: 2,
		},
		{
			name: "the same destination via another next hop is a separate route",
			steps: func(f *Fake) error {
				if err := f.Add(ctx, route("10.244.2.0/24", "192.168.1.12", 7, 100)); err != nil {
					return err
				}
				return f.Add(ctx, route("10.244.2.0/24", "192.168.1.13", 7, 100))
			},
			wantRoutes: 2, wantWrites: 2,
		},
		{
			name:       "deleting an absent route fails with not found",
			steps:      func(f *Fake) error { return f.Delete(ctx, route("10.244.3.0/24", "192.168.1.13", 7, 100)) },
			wantErr:    IsNotFound,
			wantWrites: 1,
		},
		{
			name: "delete ignores the metric",
			steps: func(f *Fake) error {
				if err := f.Add(ctx, route("10.244.2.0/24", "192.168.1.12", 7, 100)); err != nil {
					return err
				}
				return f.Delete(ctx, route("10.244.2.0/24", "192.168.1.12", 7, 0))
			},
			wantWrites: 2,
		},
		{
			name:       "a next hop that is not on-link on the interface is rejected",
			steps:      func(f *Fake) error { return f.Add(ctx, route("10.244.2.0/24", "192.168.1.12", 9, 100)) },
			wantErr:    func(err error) bool { return err != nil && !IsExists(err) && !IsNotFound(err) },
			wantWrites: 1,
		},
		{
			name:       "an unknown interface is rejected",
			steps:      func(f *Fake) error { return f.Add(ctx, route("10.244.2.0/24", "192.168.1.12", 42, 100)) },
			wantErr:    func(err error) bool { return err != nil },
			wantWrites: 1,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := NewFake()
			f.SetInterfaces(
				FakeInterface{Index: 7, Name: "vEthernet (Ethernet)", Prefixes: []netip.Prefix{netip.MustParsePrefix("192.168.1.11/24")}},
				FakeInterface{Index: 9, Name: "Ethernet 2", Prefixes: []netip.Prefix{netip.MustParsePrefix("172.16.0.1/24")}},
			)
			err := tc.steps(f)
			if tc.wantErr == nil && err != nil {
				t.Fatalf("unexpected error: %v", err)
			}
			if tc.wantErr != nil && !tc.wantErr(err) {
				t.Fatalf("error = %v, not the expected kind", err)
			}
			routes, _ := f.List(ctx)
			if len(routes) != tc.wantRoutes {
				t.Errorf("routes = %v, want %d", routes, tc.wantRoutes)
			}
			if f.Writes() != tc.wantWrites {
				t.Errorf("writes = %d, want %d", f.Writes(), tc.wantWrites)
			}
		})
	}
}
