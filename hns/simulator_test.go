package hns

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// Address plan: see fixture_test.go.

// overlayHost is a node with the overlay network, two local pods and a
// remote pod endpoint.
type overlayHost struct {
	sim                 *Simulator
	net                 *Network
	pod5, pod6, remote7 *Endpoint
}

func newOverlayHost(t *testing.T, opts SimulatorOptions) *overlayHost {
	t.Helper()
	s := newTestSimulator(t, opts)
	n := mustNetwork(t, s, overlayNetwork("nodenet"))
	return &overlayHost{
		sim:     s,
		net:     n,
		pod5:    mustEndpoint(t, s, localEndpoint(n.ID, "10.244.1.5")),
		pod6:    mustEndpoint(t, s, localEndpoint(n.ID, "10.244.1.6")),
		remote7: mustEndpoint(t, s, remoteEndpoint(n.ID, "10.244.2.7", remoteNodeIP)),
	}
}

func TestSimulatorEnforcesHNSRules(t *testing.T) {
	cases := []struct {
		name    string
		opts    SimulatorOptions
		do      func(t *testing.T, h *overlayHost) error
		want    ErrorKind
		wantMsg string
	}{
		{
			name: "a second network with the same name is refused",
			do: func(t *testing.T, h *overlayHost) error {
				_, err := h.sim.CreateNetwork(ctx, overlayNetwork("NodeNet"))
				return err
			},
			want: KindAlreadyExists, wantMsg: "a network with this name exists",
		},
		{
			name: "an overlay network without a VSID is refused",
			do: func(t *testing.T, h *overlayHost) error {
				n := overlayNetwork("other")
				n.Ipams[0].Subnets[0].Policies = nil
				_, err := h.sim.CreateNetwork(ctx, n)
				return err
			},
			want: KindInvalid, wantMsg: "no VSID policy",
		},
		{
			name: "an overlay VSID below 4096 is refused",
			do: func(t *testing.T, h *overlayHost) error {
				n := overlayNetwork("other")
				n.Ipams[0].Subnets[0].Policies[0].Isolation.IsolationID = 4095
				_, err := h.sim.CreateNetwork(ctx, n)
				return err
			},
			want: KindInvalid, wantMsg: "VSID 4095 outside 4096",
		},
		{
			name: "a network on an adapter the host lacks is refused",
			do: func(t *testing.T, h *overlayHost) error {
				n := overlayNetwork("other")
				n.Policies[0].NetAdapterName.NetworkAdapterName = "Ethernet 7"
				_, err := h.sim.CreateNetwork(ctx, n)
				return err
			},
			want: KindNotFound, wantMsg: `network adapter "Ethernet 7" not found`,
		},
		{
			name: "a remote subnet route on an L2Bridge network is refused",
			do: func(t *testing.T, h *overlayHost) error {
				n := l2bridgeNetwork("bridge")
				n.Ipams[0].Subnets[0].IpAddressPrefix = "10.245.0.0/24"
				n.Policies = []NetworkPolicy{remoteSubnetRoute()}
				_, err := h.sim.CreateNetwork(ctx, n)
				return err
			},
			want: KindInvalid, wantMsg: "only valid on Overlay",
		},
		{
			name: "a VXLAN port policy below HNS 10.3 is refused",
			opts: SimulatorOptions{Version: Version{10, 2}},
			do: func(t *testing.T, h *overlayHost) error {
				return h.sim.AddNetworkPolicies(ctx, h.net.ID, []NetworkPolicy{{Type: NetworkPolicyVxlanPort, VxlanPort: &VxlanPortPolicy{Port: 8472}}})
			},
			want: KindNotSupported, wantMsg: "VxlanPort needs HNS ≥ 10.3",
		},
		{
			name: "a second remote subnet route for the same prefix is refused",
			do: func(t *testing.T, h *overlayHost) error {
				if err := h.sim.AddNetworkPolicies(ctx, h.net.ID, []NetworkPolicy{remoteSubnetRoute()}); err != nil {
					t.Fatal(err)
				}
				return h.sim.AddNetworkPolicies(ctx, h.net.ID, []NetworkPolicy{remoteSubnetRoute()})
			},
			want: KindAlreadyExists, wantMsg: "remote subnet route for 10.244.2.0/24 exists",
		},
		{
			name: "an endpoint outside the network's subnets is refused",
			do: func(t *testing.T, h *overlayHost) error {
				_, err := h.sim.CreateEndpoint(ctx, localEndpoint(h.net.ID, "10.244.9.5"))
				return err
			},
			want: KindInvalid, wantMsg: "10.244.9.5 is outside the subnets",
		},
		{
			name: "an endpoint address already used on the network is refused",
			do: func(t *testing.T, h *overlayHost) error {
				_, err := h.sim.CreateEndpoint(ctx, localEndpoint(h.net.ID, "10.244.1.5"))
				return err
			},
			want: KindAlreadyExists, wantMsg: "10.244.1.5 is in use by endpoint " + "000000ED",
		},
		// Local and remote endpoints may share an address (kubernetes PR
		// 138000); this case used to expect a refusal, which real HNS does
		// not make.
		{
			name: "a remote endpoint may hold a local pod's address",
			do: func(t *testing.T, h *overlayHost) error {
				_, err := h.sim.CreateEndpoint(ctx, remoteEndpoint(h.net.ID, "10.244.1.6", remoteNodeIP))
				return err
			},
		},
		{
			name: "a local endpoint may take a remote endpoint's address",
			do: func(t *testing.T, h *overlayHost) error {
				mustEndpoint(t, h.sim, remoteEndpoint(h.net.ID, "10.244.1.9", remoteNodeIP))
				_, err := h.sim.CreateEndpoint(ctx, localEndpoint(h.net.ID, "10.244.1.9"))
				return err
			},
		},
		{
			name: "a second remote endpoint with the same address is refused",
			do: func(t *testing.T, h *overlayHost) error {
				_, err := h.sim.CreateEndpoint(ctx, remoteEndpoint(h.net.ID, "10.244.2.7", remoteNodeIP))
				return err
			},
			want: KindAlreadyExists, wantMsg: "10.244.2.7 is in use",
		},
		{
			name: "an endpoint on a network that does not exist is refused",
			do: func(t *testing.T, h *overlayHost) error {
				_, err := h.sim.CreateEndpoint(ctx, localEndpoint("000000E7-0000-4000-8000-0000000000FF", "10.244.1.9"))
				return err
			},
			want: KindNotFound, wantMsg: "network",
		},
		{
			name: "a load balancer with an endpoint that does not exist is refused",
			do: func(t *testing.T, h *overlayHost) error {
				_, err := h.sim.CreateLoadBalancer(ctx, clusterIPLB(clusterIP, 80, 8080, h.pod5.ID, "000000ED-0000-4000-8000-0000000000FF"))
				return err
			},
			want: KindNotFound, wantMsg: "endpoint 000000ED-0000-4000-8000-0000000000FF does not exist",
		},
		{
			name: "a second load balancer on the same VIP, protocol and port is refused",
			do: func(t *testing.T, h *overlayHost) error {
				mustLB(t, h.sim, clusterIPLB(clusterIP, 80, 8080, h.pod5.ID))
				_, err := h.sim.CreateLoadBalancer(ctx, clusterIPLB(clusterIP, 80, 9090, h.pod6.ID))
				return err
			},
			want: KindPortAlreadyExists, wantMsg: "frontend is served by load balancer",
		},
		{
			name: "the same VIP and port with another protocol is accepted",
			do: func(t *testing.T, h *overlayHost) error {
				mustLB(t, h.sim, clusterIPLB(clusterIP, 53, 53, h.pod5.ID))
				udp := clusterIPLB(clusterIP, 53, 53, h.pod5.ID)
				udp.PortMappings[0].Protocol = ProtocolUDP
				_, err := h.sim.CreateLoadBalancer(ctx, udp)
				return err
			},
		},
		{
			name: "two node-port load balancers on the same port are refused",
			do: func(t *testing.T, h *overlayHost) error {
				np := clusterIPLB(clusterIP, 30080, 8080, h.pod5.ID)
				np.FrontendVIPs = nil
				mustLB(t, h.sim, np)
				_, err := h.sim.CreateLoadBalancer(ctx, np)
				return err
			},
			want: KindPortAlreadyExists,
		},
		{
			name: "an update may keep its own frontend",
			opts: SimulatorOptions{Version: Version{15, 5}},
			do: func(t *testing.T, h *overlayHost) error {
				lb := mustLB(t, h.sim, clusterIPLB(clusterIP, 80, 8080, h.pod5.ID))
				_, err := h.sim.UpdateLoadBalancer(ctx, lb.ID, clusterIPLB(clusterIP, 80, 8080, h.pod5.ID, h.pod6.ID))
				return err
			},
		},
		{
			name: "an update onto another load balancer's frontend is refused",
			opts: SimulatorOptions{Version: Version{15, 5}},
			do: func(t *testing.T, h *overlayHost) error {
				mustLB(t, h.sim, clusterIPLB(clusterIP, 80, 8080, h.pod5.ID))
				lb := mustLB(t, h.sim, clusterIPLB(clusterIP, 81, 8080, h.pod5.ID))
				_, err := h.sim.UpdateLoadBalancer(ctx, lb.ID, clusterIPLB(clusterIP, 80, 8080, h.pod5.ID))
				return err
			},
			want: KindPortAlreadyExists,
		},
		{
			name: "DSR on an HNS older than DSR support is refused",
			opts: SimulatorOptions{Version: Version{9, 2}},
			do:   createClusterIPLB(func(lb *LoadBalancer) { lb.Flags = LoadBalancerFlagsDSR }),
			want: KindNotSupported, wantMsg: "DSR needs HNS 9.3–9.x or ≥ 10.2 (host has 9.2)",
		},
		{
			name: "DSR on Windows Server 2019 is accepted",
			opts: SimulatorOptions{Version: VersionWS2019},
			do:   createClusterIPLB(func(lb *LoadBalancer) { lb.Flags = LoadBalancerFlagsDSR }),
		},
		{
			name: "session affinity below HNS 12.0 is refused",
			opts: SimulatorOptions{Version: VersionWS2019},
			do:   createClusterIPLB(func(lb *LoadBalancer) { lb.PortMappings[0].DistributionType = DistributionSourceIP }),
			want: KindNotSupported, wantMsg: "session affinity needs HNS ≥ 12.0 (host has 9.3)",
		},
		{
			name: "session affinity on HNS 12.0 is accepted",
			opts: SimulatorOptions{Version: Version{12, 0}},
			do:   createClusterIPLB(func(lb *LoadBalancer) { lb.PortMappings[0].DistributionType = DistributionSourceIP }),
		},
		{
			name: "an in-place update below HNS 15.4 is refused as hnslib refuses it",
			opts: SimulatorOptions{Version: Version{15, 1}},
			do: func(t *testing.T, h *overlayHost) error {
				lb := mustLB(t, h.sim, clusterIPLB(clusterIP, 80, 8080, h.pod5.ID))
				_, err := h.sim.UpdateLoadBalancer(ctx, lb.ID, clusterIPLB(clusterIP, 80, 8080, h.pod6.ID))
				return err
			},
			want: KindNotSupported, wantMsg: "platform does not support feature ModifyLoadbalancer",
		},
		{
			name: "an SCTP load balancer is refused",
			do:   createClusterIPLB(func(lb *LoadBalancer) { lb.PortMappings[0].Protocol = ProtocolSCTP }),
			want: KindNotSupported, wantMsg: "protocol SCTP",
		},
		{
			name: "an IPv6 VIP without the IPv6 flag is refused",
			do: func(t *testing.T, h *overlayHost) error {
				_, err := h.sim.CreateLoadBalancer(ctx, clusterIPLB("fd00:10:96::10", 80, 8080, h.pod5.ID))
				return err
			},
			want: KindInvalid, wantMsg: "does not match the load balancer's IPv6 flag",
		},
		{
			name: "more backends than the per-load-balancer limit are refused",
			opts: SimulatorOptions{MaxBackendsPerLoadBalancer: 2},
			do: func(t *testing.T, h *overlayHost) error {
				_, err := h.sim.CreateLoadBalancer(ctx, clusterIPLB(clusterIP, 80, 8080, h.pod5.ID, h.pod6.ID, h.remote7.ID))
				return err
			},
			want: KindInvalid, wantMsg: "invalid number of destinations: 3 backends, the host allows 2",
		},
		{
			name: "exactly the per-load-balancer limit is accepted",
			opts: SimulatorOptions{MaxBackendsPerLoadBalancer: 3},
			do: func(t *testing.T, h *overlayHost) error {
				_, err := h.sim.CreateLoadBalancer(ctx, clusterIPLB(clusterIP, 80, 8080, h.pod5.ID, h.pod6.ID, h.remote7.ID))
				return err
			},
		},
		{
			name: "deleting a network that still has endpoints is refused",
			do: func(t *testing.T, h *overlayHost) error {
				return h.sim.DeleteNetwork(ctx, h.net.ID)
			},
			want: KindInUse, wantMsg: "network still has 3 endpoints",
		},
		{
			name: "attaching an endpoint to a second namespace is refused",
			do: func(t *testing.T, h *overlayHost) error {
				a, _ := h.sim.CreateNamespace(ctx, &Namespace{})
				b, _ := h.sim.CreateNamespace(ctx, &Namespace{})
				if err := h.sim.AddNamespaceEndpoint(ctx, a.ID, h.pod5.ID); err != nil {
					t.Fatal(err)
				}
				return h.sim.AddNamespaceEndpoint(ctx, b.ID, h.pod5.ID)
			},
			want: KindAlreadyExists, wantMsg: "attached to namespace",
		},
		{
			name: "a remote endpoint cannot join a namespace",
			do: func(t *testing.T, h *overlayHost) error {
				ns, _ := h.sim.CreateNamespace(ctx, &Namespace{})
				return h.sim.AddNamespaceEndpoint(ctx, ns.ID, h.remote7.ID)
			},
			want: KindInvalid,
		},
		{
			name: "a host port published twice is refused",
			do: func(t *testing.T, h *overlayHost) error {
				hp := EndpointPolicy{Type: EndpointPolicyPortMapping, PortMapping: &PortMappingPolicy{Protocol: ProtocolTCP, InternalPort: 80, ExternalPort: 8080}}
				mustEndpoint(t, h.sim, localEndpoint(h.net.ID, "10.244.1.20", hp))
				_, err := h.sim.CreateEndpoint(ctx, localEndpoint(h.net.ID, "10.244.1.21", hp))
				return err
			},
			want: KindPortAlreadyExists, wantMsg: "host port TCP/8080",
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := newOverlayHost(t, tc.opts)
			err := tc.do(t, h)
			if tc.want == KindUnknown {
				if err != nil {
					t.Fatalf("want success, got %v", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("want a %q error, got success", tc.want)
			}
			if got := KindOf(err); got != tc.want {
				t.Fatalf("error kind = %q, want %q (error: %v)", got, tc.want, err)
			}
			if !strings.Contains(err.Error(), tc.wantMsg) {
				t.Errorf("error %q does not say %q", err, tc.wantMsg)
			}
		})
	}
}

// createClusterIPLB returns a rule case that creates a cluster-IP load
// balancer for pod .5, changed by tweak.
func createClusterIPLB(tweak func(lb *LoadBalancer)) func(t *testing.T, h *overlayHost) error {
	return func(t *testing.T, h *overlayHost) error {
		lb := clusterIPLB(clusterIP, 80, 8080, h.pod5.ID)
		tweak(lb)
		_, err := h.sim.CreateLoadBalancer(ctx, lb)
		return err
	}
}

func TestSimulatorRefusalsChangeNothing(t *testing.T) {
	h := newOverlayHost(t, SimulatorOptions{})
	mustLB(t, h.sim, clusterIPLB(clusterIP, 80, 8080, h.pod5.ID))
	before := h.sim.Dump()
	if _, err := h.sim.CreateLoadBalancer(ctx, clusterIPLB(clusterIP, 80, 8080, h.pod6.ID)); !IsPortAlreadyExists(err) {
		t.Fatalf("want port-already-exists, got %v", err)
	}
	if err := h.sim.DeleteNetwork(ctx, h.net.ID); !IsInUse(err) {
		t.Fatalf("want in-use, got %v", err)
	}
	if diff := cmp.Diff(before, h.sim.Dump()); diff != "" {
		t.Errorf("refused calls changed state (-before +after):\n%s", diff)
	}
}

func TestSimulatorCountsEveryCall(t *testing.T) {
	h := newOverlayHost(t, SimulatorOptions{})
	h.sim.ResetCalls()
	if _, err := h.sim.ListLoadBalancers(ctx); err != nil {
		t.Fatal(err)
	}
	mustLB(t, h.sim, clusterIPLB(clusterIP, 80, 8080, h.pod5.ID))
	_, _ = h.sim.CreateLoadBalancer(ctx, clusterIPLB(clusterIP, 80, 8080, h.pod5.ID)) // refused, still counted
	if _, err := h.sim.GetNetworkByName(ctx, "nodenet"); err != nil {
		t.Fatal(err)
	}
	want := map[Op]int{OpListLoadBalancers: 1, OpCreateLoadBalancer: 2, OpGetNetworkByName: 1}
	if diff := cmp.Diff(want, h.sim.CallCounts()); diff != "" {
		t.Errorf("call counts (-want +got):\n%s", diff)
	}
	if got := h.sim.Writes(); got != 2 {
		t.Errorf("Writes() = %d, want 2 (reads are not writes)", got)
	}
	h.sim.ResetCalls()
	if got := h.sim.Writes(); got != 0 {
		t.Errorf("after ResetCalls Writes() = %d", got)
	}
}

func TestSimulatorInjectsFaults(t *testing.T) {
	boom := errors.New("boom")
	cases := []struct {
		name  string
		fault Fault
		calls []Op
		// want is the kind each call returns; KindUnknown+nil = success.
		wantFail []bool
	}{
		{
			name:     "every second create fails",
			fault:    Fault{Op: OpCreateNamespace, Every: 2},
			calls:    []Op{OpCreateNamespace, OpCreateNamespace, OpCreateNamespace, OpCreateNamespace},
			wantFail: []bool{false, true, false, true},
		},
		{
			name:     "a scripted sequence fails exactly the scripted calls",
			fault:    Fault{Op: OpCreateNamespace, Sequence: []error{nil, boom, nil}},
			calls:    []Op{OpCreateNamespace, OpCreateNamespace, OpCreateNamespace, OpCreateNamespace},
			wantFail: []bool{false, true, false, false},
		},
		{
			name:     "a writes-only fault leaves reads alone",
			fault:    Fault{Writes: true, Every: 1},
			calls:    []Op{OpListNetworks, OpCreateNamespace, OpListLoadBalancers},
			wantFail: []bool{false, true, false},
		},
		{
			name:     "an op-specific fault leaves other ops alone",
			fault:    Fault{Op: OpListNetworks, Every: 1},
			calls:    []Op{OpCreateNamespace, OpListNetworks},
			wantFail: []bool{false, true},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := newTestSimulator(t, SimulatorOptions{})
			s.InjectFault(tc.fault)
			for i, op := range tc.calls {
				err := callOp(s, op)
				if (err != nil) != tc.wantFail[i] {
					t.Fatalf("call %d (%s): err = %v, want failure %t", i, op, err, tc.wantFail[i])
				}
			}
		})
	}
}

func callOp(s *Simulator, op Op) error {
	switch op {
	case OpCreateNamespace:
		_, err := s.CreateNamespace(ctx, &Namespace{})
		return err
	case OpListNetworks:
		_, err := s.ListNetworks(ctx)
		return err
	case OpListLoadBalancers:
		_, err := s.ListLoadBalancers(ctx)
		return err
	}
	panic("callOp: unsupported op " + op)
}

func TestSimulatorFaultDetails(t *testing.T) {
	t.Run("an injected fault is transient by default and names the op", func(t *testing.T) {
		s := newTestSimulator(t, SimulatorOptions{})
		s.InjectFault(Fault{Op: OpListNetworks, Every: 1})
		_, err := s.ListNetworks(ctx)
		if !IsTransient(err) || !strings.Contains(err.Error(), "ListNetworks") {
			t.Fatalf("got %v, want a transient ListNetworks error", err)
		}
	})
	t.Run("a custom error keeps its chain", func(t *testing.T) {
		s := newTestSimulator(t, SimulatorOptions{})
		boom := errors.New("boom")
		s.InjectFault(Fault{Op: OpListNetworks, Every: 1, Err: boom})
		_, err := s.ListNetworks(ctx)
		if !errors.Is(err, boom) {
			t.Fatalf("got %v, want it to wrap boom", err)
		}
	})
	t.Run("a fault after apply leaves the object behind", func(t *testing.T) {
		h := newOverlayHost(t, SimulatorOptions{})
		h.sim.InjectFault(Fault{Op: OpCreateLoadBalancer, Every: 1, AfterApply: true})
		if _, err := h.sim.CreateLoadBalancer(ctx, clusterIPLB(clusterIP, 80, 8080, h.pod5.ID)); !IsTransient(err) {
			t.Fatalf("want transient error, got %v", err)
		}
		h.sim.ClearFaults()
		lbs, _ := h.sim.ListLoadBalancers(ctx)
		if len(lbs) != 1 {
			t.Fatalf("want the load balancer created despite the error, have %d", len(lbs))
		}
		if _, err := h.sim.CreateLoadBalancer(ctx, clusterIPLB(clusterIP, 80, 8080, h.pod5.ID)); !IsPortAlreadyExists(err) {
			t.Fatalf("a retry must meet port-already-exists, got %v", err)
		}
	})
	t.Run("removing a fault stops it", func(t *testing.T) {
		s := newTestSimulator(t, SimulatorOptions{})
		remove := s.InjectFault(Fault{Op: OpListNetworks, Every: 1})
		remove()
		if _, err := s.ListNetworks(ctx); err != nil {
			t.Fatalf("after remove: %v", err)
		}
	})
	t.Run("rate faults are reproducible for a seed", func(t *testing.T) {
		pattern := func(seed int64) string {
			s := newTestSimulator(t, SimulatorOptions{Seed: seed})
			s.InjectFault(Fault{Op: OpListNetworks, Rate: 0.3})
			var b strings.Builder
			for range 200 {
				if _, err := s.ListNetworks(ctx); err != nil {
					b.WriteByte('x')
				} else {
					b.WriteByte('.')
				}
			}
			return b.String()
		}
		a, b := pattern(7), pattern(7)
		if a != b {
			t.Fatalf("same seed, different failures:\n%s\n%s", a, b)
		}
		fails := strings.Count(a, "x")
		if fails < 30 || fails > 90 {
			t.Errorf("rate 0.3 over 200 calls failed %d times", fails)
		}
		if pattern(8) == a {
			t.Errorf("another seed gave the identical pattern")
		}
	})
}

func TestSimulatorLatencyHonorsTheCallersContext(t *testing.T) {
	s := newTestSimulator(t, SimulatorOptions{})
	s.SetLatency(OpListNetworks, time.Hour)
	cctx, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
	defer cancel()
	_, err := s.ListNetworks(cctx)
	if !IsTransient(err) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("got %v, want a transient error wrapping the deadline", err)
	}
	if _, err := s.ListLoadBalancers(ctx); err != nil {
		t.Fatalf("latency on one op must not delay others: %v", err)
	}
}

func TestSimulatorRestart(t *testing.T) {
	clock := &fakeClock{now: time.Unix(1_800_000_000, 0)}
	h := newOverlayHost(t, SimulatorOptions{Now: clock.Now})
	persistent := l2bridgeNetwork("persistent")
	persistent.Ipams[0].Subnets[0].IpAddressPrefix = "10.245.0.0/24"
	pn := mustNetwork(t, h.sim, persistent)
	pep := mustEndpoint(t, h.sim, localEndpoint(pn.ID, "10.245.0.5"))
	mustLB(t, h.sim, clusterIPLB(clusterIP, 80, 8080, h.pod5.ID, h.remote7.ID))
	mustLB(t, h.sim, clusterIPLB("10.96.0.11", 80, 8080, pep.ID))

	h.sim.SimulateRestart(RestartOptions{Duration: 30 * time.Second})
	clock.Advance(10 * time.Second)
	if _, err := h.sim.ListNetworks(ctx); !IsTransient(err) {
		t.Fatalf("during the restart: want transient, got %v", err)
	}
	if _, err := h.sim.GetNetworkByName(ctx, "nodenet"); IsNotFound(err) || !IsTransient(err) {
		t.Fatalf("during the restart a lookup must be transient, never not-found: %v", err)
	}
	clock.Advance(21 * time.Second)
	nets, err := h.sim.ListNetworks(ctx)
	if err != nil {
		t.Fatalf("after the restart: %v", err)
	}
	if len(nets) != 1 || nets[0].Name != "persistent" {
		t.Errorf("after restart networks = %v, want only the persistent one", names(nets))
	}
	eps, _ := h.sim.ListEndpoints(ctx, "")
	if len(eps) != 1 || eps[0].ID != pep.ID {
		t.Errorf("after restart endpoints = %d, want only the persistent network's", len(eps))
	}
	lbs, _ := h.sim.ListLoadBalancers(ctx)
	if len(lbs) != 1 || lbs[0].FrontendVIPs[0] != "10.96.0.11" {
		t.Errorf("after restart load balancers = %v, want only the one on persistent endpoints", lbs)
	}
}

func names(ns []Network) []string {
	var out []string
	for _, n := range ns {
		out = append(out, n.Name)
	}
	return out
}

func TestSimulatorReturnsCopies(t *testing.T) {
	h := newOverlayHost(t, SimulatorOptions{})
	lb := mustLB(t, h.sim, clusterIPLB(clusterIP, 80, 8080, h.pod5.ID))
	lb.HostComputeEndpoints[0] = "mutated"
	lb.PortMappings[0].InternalPort = 1
	h.net.Policies[0].NetAdapterName.NetworkAdapterName = "mutated"
	got, _ := h.sim.GetLoadBalancer(ctx, lb.ID)
	if got.HostComputeEndpoints[0] != h.pod5.ID || got.PortMappings[0].InternalPort != 8080 {
		t.Errorf("mutating a returned load balancer changed the simulator: %+v", got)
	}
	n, _ := h.sim.GetNetworkByID(ctx, h.net.ID)
	if n.Policies[0].NetAdapterName.NetworkAdapterName != "Ethernet" {
		t.Errorf("mutating a returned network changed the simulator")
	}
}

func TestSimulatorIsSafeForConcurrentUse(t *testing.T) {
	s := newTestSimulator(t, SimulatorOptions{})
	n := mustNetwork(t, s, overlayNetwork("nodenet"))
	var wg sync.WaitGroup
	errs := make(chan error, 200)
	for i := range 200 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ip := fmt.Sprintf("10.244.1.%d", 10+i%100)
			if _, err := s.CreateEndpoint(ctx, localEndpoint(n.ID, ip)); err != nil && !IsAlreadyExists(err) {
				errs <- err
			}
			if _, err := s.ListEndpoints(ctx, n.ID); err != nil {
				errs <- err
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	eps, _ := s.ListEndpoints(ctx, n.ID)
	if len(eps) != 100 {
		t.Fatalf("200 racing creates of 100 addresses made %d endpoints, want 100", len(eps))
	}
	seen := map[string]bool{}
	for _, ep := range eps {
		if seen[ep.ID] || seen[ep.MacAddress] {
			t.Fatalf("duplicate ID or MAC: %s %s", ep.ID, ep.MacAddress)
		}
		seen[ep.ID], seen[ep.MacAddress] = true, true
	}
	if got := s.Calls(OpCreateEndpoint); got != 200 {
		t.Errorf("Calls(CreateEndpoint) = %d, want 200", got)
	}
}

func TestSimulatorNamespaces(t *testing.T) {
	h := newOverlayHost(t, SimulatorOptions{})
	ns, err := h.sim.CreateNamespace(ctx, &Namespace{})
	if err != nil {
		t.Fatal(err)
	}
	if err := h.sim.AddNamespaceEndpoint(ctx, ns.ID, h.pod5.ID); err != nil {
		t.Fatal(err)
	}
	got, _ := h.sim.GetNamespace(ctx, ns.ID)
	if diff := cmp.Diff([]string{h.pod5.ID}, got.EndpointIDs); diff != "" {
		t.Errorf("attached endpoints (-want +got):\n%s", diff)
	}
	ep, _ := h.sim.GetEndpointByID(ctx, h.pod5.ID)
	if ep.HostComputeNamespace != ns.ID {
		t.Errorf("endpoint namespace = %q, want %q", ep.HostComputeNamespace, ns.ID)
	}
	if err := h.sim.RemoveNamespaceEndpoint(ctx, ns.ID, h.pod5.ID); err != nil {
		t.Fatal(err)
	}
	if err := h.sim.RemoveNamespaceEndpoint(ctx, ns.ID, h.pod5.ID); !IsNotFound(err) {
		t.Errorf("detaching twice: want not-found, got %v", err)
	}
	if err := h.sim.DeleteNamespace(ctx, ns.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := h.sim.GetNamespace(ctx, ns.ID); !IsNotFound(err) {
		t.Errorf("deleted namespace: want not-found, got %v", err)
	}
}

func TestSimulatorNetworkPolicies(t *testing.T) {
	h := newOverlayHost(t, SimulatorOptions{})
	if err := h.sim.AddNetworkPolicies(ctx, h.net.ID, []NetworkPolicy{remoteSubnetRoute()}); err != nil {
		t.Fatal(err)
	}
	n, _ := h.sim.GetNetworkByID(ctx, h.net.ID)
	if findRemoteSubnetRoute(n, remotePodNet) == nil {
		t.Fatalf("remote subnet route not stored: %+v", n.Policies)
	}
	other := remoteSubnetRoute()
	other.RemoteSubnetRoute.ProviderAddress = "10.0.0.99"
	if err := h.sim.RemoveNetworkPolicies(ctx, h.net.ID, []NetworkPolicy{other}); !IsNotFound(err) {
		t.Errorf("removing a policy that differs: want not-found, got %v", err)
	}
	if err := h.sim.RemoveNetworkPolicies(ctx, h.net.ID, []NetworkPolicy{remoteSubnetRoute()}); err != nil {
		t.Fatal(err)
	}
	n, _ = h.sim.GetNetworkByID(ctx, h.net.ID)
	if findRemoteSubnetRoute(n, remotePodNet) != nil {
		t.Errorf("remote subnet route still present after removal")
	}
}

func TestSimulatorDump(t *testing.T) {
	h := newOverlayHost(t, SimulatorOptions{})
	if err := h.sim.AddNetworkPolicies(ctx, h.net.ID, []NetworkPolicy{remoteSubnetRoute()}); err != nil {
		t.Fatal(err)
	}
	lb := clusterIPLB(clusterIP, 80, 8080, h.pod5.ID, h.remote7.ID)
	lb.Flags = LoadBalancerFlagsDSR
	lb.PortMappings[0].DistributionType = DistributionSourceIP
	mustLB(t, h.sim, lb)
	ns, _ := h.sim.CreateNamespace(ctx, &Namespace{})
	_ = h.sim.AddNamespaceEndpoint(ctx, ns.ID, h.pod6.ID)
	want := `HNS 15.5  features: DSR SessionAffinity IPv6DualStack RemoteSubnet HostRoute VxlanPort ModifyLoadbalancer
Networks:
  000000E7-0000-4000-8000-000000000001  nodenet  Overlay  flags=EnableNonPersistent
    subnet 10.244.1.0/24  VSID=4096  route 0.0.0.0/0 via 10.244.1.1
    policy NetAdapterName Ethernet
    policy ProviderAddress 10.0.0.4
    policy DrMacAddress 00-15-5D-E7-00-01
    policy RemoteSubnetRoute 10.244.2.0/24 -> PA 10.0.0.5  DRMAC 02-11-22-33-44-55  VSID 4096
Endpoints:
  000000ED-0000-4000-8000-000000000002  nodenet  10.244.1.5  00-15-5D-00-00-01  local
  000000ED-0000-4000-8000-000000000003  nodenet  10.244.1.6  00-15-5D-00-00-02  local  namespace=0000005E-0000-4000-8000-000000000006
  000000ED-0000-4000-8000-000000000004  nodenet  10.244.2.7  00-15-5D-00-00-03  remote
    policy ProviderAddress 10.0.0.5
Namespaces:
  0000005E-0000-4000-8000-000000000000  HostDefault  endpoints: none
  0000005E-0000-4000-8000-000000000006  Host  endpoints: 000000ED-0000-4000-8000-000000000003
LoadBalancers:
  0000001B-0000-4000-8000-000000000005  10.96.0.10:80/TCP -> 8080  distribution=SourceIP  portFlags=none  flags=DSR  sourceVIP=10.244.1.2
    backend 000000ED-0000-4000-8000-000000000002 (10.244.1.5 local)
    backend 000000ED-0000-4000-8000-000000000004 (10.244.2.7 remote)
`
	if diff := cmp.Diff(want, h.sim.Dump()); diff != "" {
		t.Errorf("Dump() (-want +got):\n%s", diff)
	}
}

func TestSimulatorAssignsOverlayDRMAC(t *testing.T) {
	for _, tc := range []struct {
		name string
		net  *Network
		want string
	}{
		{"an overlay network without a DR MAC gets one from HNS", overlayNetwork("a"), "00-15-5D-E7-00-01"},
		{"an overlay network keeps the DR MAC it was created with", func() *Network {
			n := overlayNetwork("b")
			n.Policies = append(n.Policies, NetworkPolicy{Type: NetworkPolicyDrMacAddress, DrMacAddress: &DrMacAddressPolicy{Address: "0E-2A-00-00-00-01"}})
			return n
		}(), "0E-2A-00-00-00-01"},
		{"an l2bridge network gets no DR MAC", l2bridgeNetwork("c"), ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newTestSimulator(t, SimulatorOptions{})
			n := mustNetwork(t, s, tc.net)
			got, n2 := "", 0
			for _, p := range n.Policies {
				if p.Type == NetworkPolicyDrMacAddress {
					got = p.DrMacAddress.Address
					n2++
				}
			}
			if got != tc.want || n2 > 1 {
				t.Errorf("DR MAC = %q (%d policies), want %q", got, n2, tc.want)
			}
		})
	}
}

// HNS deletes an endpoint a load balancer still uses and leaves the load
// balancer degraded (microsoft/wcnscripts PR 21; kubernetes issue 76316):
// it keeps listing the endpoint, and only the backends that still exist
// get traffic; with none left the traffic is lost.
func TestDeletingAnEndpointALoadBalancerUsesDegradesIt(t *testing.T) {
	h := newOverlayHost(t, SimulatorOptions{})
	lb := mustLB(t, h.sim, clusterIPLB(clusterIP, 80, 8080, h.pod5.ID, h.pod6.ID))
	trace := func() *Trace {
		t.Helper()
		tr, err := h.sim.Trace(FromHost, Packet{Protocol: ProtocolTCP, Src: nodeIP, SrcPort: 40000, Dst: clusterIP, DstPort: 80})
		if err != nil {
			t.Fatal(err)
		}
		return tr
	}
	if err := h.sim.DeleteEndpoint(ctx, h.pod5.ID); err != nil {
		t.Fatalf("DeleteEndpoint of a backend: %v, want success as HNS", err)
	}
	got, err := h.sim.GetLoadBalancer(ctx, lb.ID)
	if err != nil {
		t.Fatalf("the load balancer went with its endpoint: %v", err)
	}
	if want := []string{h.pod5.ID, h.pod6.ID}; !slices.Equal(got.HostComputeEndpoints, want) {
		t.Errorf("backends = %v, want %v (the deleted one still listed)", got.HostComputeEndpoints, want)
	}
	if d := h.sim.Dump(); !strings.Contains(d, h.pod5.ID+" (missing: degraded)") {
		t.Errorf("dump does not show the missing backend:\n%s", d)
	}
	if b := trace().Backends(); !slices.Equal(b, []string{h.pod6.ID}) {
		t.Errorf("backends reached = %v, want only %s", b, h.pod6.ID)
	}
	if err := h.sim.DeleteEndpoint(ctx, h.pod6.ID); err != nil {
		t.Fatal(err)
	}
	if tr := trace(); tr.Dropped == "" || len(tr.Deliveries) != 0 {
		t.Errorf("trace = %+v, want dropped: no backend left", tr)
	}
}
