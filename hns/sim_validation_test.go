package hns

import (
	"strings"
	"testing"
)

// Network definitions hcn itself refuses before HNS sees them (hnslib
// hcn/hcnnetwork.go Create) are refused by the simulator too.
func TestSubnetsNeedAGatewayAndADefaultRoute(t *testing.T) {
	for _, tc := range []struct {
		name    string
		routes  []Route
		wantMsg string // "" = accepted
	}{
		{name: "a default route with a next hop is accepted", routes: []Route{{NextHop: "10.244.1.1", DestinationPrefix: "0.0.0.0/0"}}},
		{name: "a subnet without routes has no default gateway", wantMsg: "no default gateway"},
		{name: "a route without a next hop is refused", routes: []Route{{DestinationPrefix: "0.0.0.0/0"}}, wantMsg: "no gateway specified"},
		{name: "only a non-default route is refused", routes: []Route{{NextHop: "10.244.1.1", DestinationPrefix: "10.0.0.0/8"}}, wantMsg: "no default gateway"},
		{name: "a non-default route beside the default one is accepted", routes: []Route{
			{NextHop: "10.244.1.1", DestinationPrefix: "10.0.0.0/8"}, {NextHop: "10.244.1.1", DestinationPrefix: "0.0.0.0/0"}}},
	} {
		for _, mk := range []func(string) *Network{overlayNetwork, l2bridgeNetwork} {
			n := mk("nodenet")
			t.Run(string(n.Type)+": "+tc.name, func(t *testing.T) {
				s := newTestSimulator(t, SimulatorOptions{})
				n.Ipams[0].Subnets[0].Routes = tc.routes
				_, err := s.CreateNetwork(ctx, n)
				if tc.wantMsg == "" {
					if err != nil {
						t.Fatalf("want success, got %v", err)
					}
					return
				}
				if KindOf(err) != KindInvalid || !strings.Contains(err.Error(), tc.wantMsg) {
					t.Fatalf("error %v, want an invalid-kind error saying %q", err, tc.wantMsg)
				}
				if nets, _ := s.ListNetworks(ctx); len(nets) != 0 {
					t.Errorf("a refused network exists: %+v", nets)
				}
			})
		}
	}
}
