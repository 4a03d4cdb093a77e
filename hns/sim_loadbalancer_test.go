package hns

import (
	"slices"
	"strings"
	"testing"
	"time"
)

// TestModifyLoadBalancerFollowsTheHNSVersion checks UpdateLoadBalancer on
// each side of hnslib's ModifyLoadbalancerVersion boundaries (15.5–15.x
// and ≥ 16.0) and on 15.4, which accepts the call and keeps the old
// endpoints (kubernetes issue 131466).
func TestModifyLoadBalancerFollowsTheHNSVersion(t *testing.T) {
	const (
		refused  = "refused as not supported"
		keepsOld = "succeeds and keeps the old endpoints"
		replaces = "replaces the endpoints"
	)
	for _, tc := range []struct {
		version Version
		want    string
	}{
		{Version{12, 0}, refused},
		{Version{15, 3}, refused},
		{Version{15, 4}, keepsOld},
		{Version{15, 5}, replaces},
		{Version{15, 9}, replaces},
		{Version{16, 0}, replaces},
	} {
		t.Run("HNS "+tc.version.String()+" "+tc.want, func(t *testing.T) {
			h := newOverlayHost(t, SimulatorOptions{Version: tc.version})
			lb := mustLB(t, h.sim, clusterIPLB(clusterIP, 80, 8080, h.pod5.ID))
			got, err := h.sim.UpdateLoadBalancer(ctx, lb.ID, clusterIPLB(clusterIP, 80, 8080, h.pod6.ID))
			if tc.want == refused {
				if !IsNotSupported(err) || !strings.Contains(err.Error(), "platform does not support feature ModifyLoadbalancer") {
					t.Fatalf("UpdateLoadBalancer = %v, want hnslib's not-supported error", err)
				}
			} else if err != nil {
				t.Fatalf("UpdateLoadBalancer: %v", err)
			}
			stored, err := h.sim.GetLoadBalancer(ctx, lb.ID)
			if err != nil {
				t.Fatal(err)
			}
			want := []string{h.pod6.ID}
			if tc.want != replaces {
				want = []string{h.pod5.ID}
			}
			if !slices.Equal(stored.HostComputeEndpoints, want) {
				t.Errorf("endpoints after the update = %v, want %v", stored.HostComputeEndpoints, want)
			}
			if got != nil && !slices.Equal(got.HostComputeEndpoints, want) {
				t.Errorf("the update answered endpoints %v, want what HNS holds (%v)", got.HostComputeEndpoints, want)
			}
			tr, err := h.sim.Trace(FromHost, Packet{Protocol: ProtocolTCP, Src: nodeIP, SrcPort: 40000, Dst: clusterIP, DstPort: 80})
			if err != nil {
				t.Fatal(err)
			}
			wantDst := "10.244.1.6"
			if tc.want != replaces {
				wantDst = "10.244.1.5"
			}
			if len(tr.Deliveries) != 1 || tr.Deliveries[0].Packet.Dst != wantDst {
				t.Errorf("traffic to the cluster IP reaches %v, want only %s", tr.Deliveries, wantDst)
			}
		})
	}
}

// TestOverLimitLoadBalancerIsInvalidArgument checks the backend limit on
// both sides with the code HNS really returns (kubernetes issue 98680).
func TestOverLimitLoadBalancerIsInvalidArgument(t *testing.T) {
	for _, tc := range []struct {
		limit int
		fails bool
	}{{limit: 3}, {limit: 2, fails: true}} {
		h := newOverlayHost(t, SimulatorOptions{MaxBackendsPerLoadBalancer: tc.limit})
		_, err := h.sim.CreateLoadBalancer(ctx, clusterIPLB(clusterIP, 80, 8080, h.pod5.ID, h.pod6.ID, h.remote7.ID))
		if !tc.fails {
			if err != nil {
				t.Errorf("3 backends with a limit of %d: %v", tc.limit, err)
			}
			continue
		}
		if !IsInvalid(err) || CodeOf(err) != CodeInvalidParameter || !strings.Contains(err.Error(), "invalid number of destinations") {
			t.Errorf("3 backends with a limit of %d = %v (code 0x%x), want E_INVALIDARG \"invalid number of destinations\"", tc.limit, err, CodeOf(err))
		}
		if lbs, _ := h.sim.ListLoadBalancers(ctx); len(lbs) != 0 {
			t.Errorf("a refused load balancer was stored: %v", lbs)
		}
	}
}

// persistentHost is an overlay host plus a persistent l2bridge network
// with one endpoint, whose load balancers survive an HNS restart.
func persistentHost(t *testing.T, clock *fakeClock) (*overlayHost, *Endpoint) {
	t.Helper()
	h := newOverlayHost(t, SimulatorOptions{Now: clock.Now})
	n := l2bridgeNetwork("persistent")
	n.Ipams[0].Subnets[0].IpAddressPrefix = "10.245.0.0/24"
	pn := mustNetwork(t, h.sim, n)
	return h, mustEndpoint(t, h.sim, localEndpoint(pn.ID, "10.245.0.5"))
}

// TestHNSRestartFailsEveryCallThenRestoresLoadBalancers is kubernetes
// issue 139519 on the simulator: during the restart every call fails
// transiently (never "not found"), afterwards the load balancers are back
// under their IDs and creating one again fails with 0xb7.
func TestHNSRestartFailsEveryCallThenRestoresLoadBalancers(t *testing.T) {
	clock := &fakeClock{now: time.Unix(1_800_000_000, 0)}
	h, pep := persistentHost(t, clock)
	lb := mustLB(t, h.sim, clusterIPLB("10.96.0.11", 80, 8080, pep.ID))

	h.sim.SimulateRestart(RestartOptions{Duration: 30 * time.Second})
	clock.Advance(10 * time.Second)
	calls := map[string]func() error{
		"Version":           func() error { _, err := h.sim.Version(ctx); return err },
		"Features":          func() error { _, err := h.sim.Features(ctx); return err },
		"GetLoadBalancer":   func() error { _, err := h.sim.GetLoadBalancer(ctx, lb.ID); return err },
		"ListLoadBalancers": func() error { _, err := h.sim.ListLoadBalancers(ctx); return err },
		"GetNetworkByName":  func() error { _, err := h.sim.GetNetworkByName(ctx, "persistent"); return err },
		"ListEndpoints":     func() error { _, err := h.sim.ListEndpoints(ctx, ""); return err },
		"CreateLoadBalancer": func() error {
			_, err := h.sim.CreateLoadBalancer(ctx, clusterIPLB("10.96.0.12", 80, 8080, pep.ID))
			return err
		},
		"DeleteLoadBalancer": func() error { return h.sim.DeleteLoadBalancer(ctx, lb.ID) },
	}
	for name, call := range calls {
		if err := call(); !IsTransient(err) || IsNotFound(err) || CodeOf(err) != CodeServerUnavailable {
			t.Errorf("%s during the restart = %v, want a transient RPC_S_SERVER_UNAVAILABLE", name, err)
		}
	}

	clock.Advance(21 * time.Second)
	got, err := h.sim.GetLoadBalancer(ctx, lb.ID)
	if err != nil || !slices.Equal(got.HostComputeEndpoints, []string{pep.ID}) {
		t.Fatalf("after the restart GetLoadBalancer(%s) = %v, %v; want it restored with its endpoint", lb.ID, got, err)
	}
	_, err = h.sim.CreateLoadBalancer(ctx, clusterIPLB("10.96.0.11", 80, 8080, pep.ID))
	if !IsAlreadyExists(err) || CodeOf(err) != CodeAlreadyExists {
		t.Fatalf("creating a restored load balancer again = %v, want ERROR_ALREADY_EXISTS (0xb7)", err)
	}
	if lbs, _ := h.sim.ListLoadBalancers(ctx); len(lbs) != 1 {
		t.Errorf("load balancers = %d, want the restored one only", len(lbs))
	}
}

// TestTakenFrontendErrorCodes: a frontend held by an ordinary load
// balancer is HCN_E_PORT_ALREADY_EXISTS (PR 137530), by a restored one
// ERROR_ALREADY_EXISTS (issue 139519) until it is updated or deleted.
func TestTakenFrontendErrorCodes(t *testing.T) {
	clock := &fakeClock{now: time.Unix(1_800_000_000, 0)}
	h, pep := persistentHost(t, clock)
	again := func() error {
		_, err := h.sim.CreateLoadBalancer(ctx, clusterIPLB("10.96.0.11", 80, 9090, pep.ID))
		return err
	}
	lb := mustLB(t, h.sim, clusterIPLB("10.96.0.11", 80, 8080, pep.ID))
	if err := again(); !IsPortAlreadyExists(err) || CodeOf(err) != CodePortAlreadyExists {
		t.Errorf("before any restart: %v, want 0x803b0013", err)
	}
	h.sim.SimulateRestart(RestartOptions{})
	if err := again(); !IsAlreadyExists(err) || CodeOf(err) != CodeAlreadyExists {
		t.Errorf("after a restart: %v, want 0xb7", err)
	}
	if err := h.sim.DeleteLoadBalancer(ctx, lb.ID); err != nil {
		t.Fatal(err)
	}
	if err := again(); err != nil {
		t.Errorf("after deleting the restored load balancer: %v", err)
	}
	if err := again(); !IsPortAlreadyExists(err) {
		t.Errorf("a load balancer created after the restart is not restored: %v, want port already exists", err)
	}
}
