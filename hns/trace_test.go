package hns

import (
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// Address plan: see fixture_test.go.

func tcp(src string, sport uint16, dst string, dport uint16) Packet {
	return Packet{Protocol: ProtocolTCP, Src: src, SrcPort: sport, Dst: dst, DstPort: dport}
}

func mustTrace(t *testing.T, s *Simulator, from Entry, p Packet) *Trace {
	t.Helper()
	tr, err := s.Trace(from, p)
	if err != nil {
		t.Fatalf("trace %s: %v", p, err)
	}
	return tr
}

func TestTraceLoadBalancers(t *testing.T) {
	type want struct {
		lb         bool
		deliveries []Delivery
		dropped    string
	}
	cases := []struct {
		name  string
		setup func(t *testing.T, h *overlayHost) *LoadBalancer
		from  Entry
		pkt   Packet
		want  func(h *overlayHost) want
	}{
		{
			name: "a ClusterIP reached from a local pod is DNATed to every backend and SNATed to the source VIP",
			setup: func(t *testing.T, h *overlayHost) *LoadBalancer {
				return mustLB(t, h.sim, clusterIPLB(clusterIP, 80, 8080, h.pod6.ID, h.remote7.ID))
			},
			from: FromEndpoint, pkt: tcp("10.244.1.5", 40000, clusterIP, 80),
			want: func(h *overlayHost) want {
				return want{lb: true, deliveries: []Delivery{
					{Target: TargetLocalEndpoint, EndpointID: h.pod6.ID, Packet: tcp(sourceVIP, 40000, "10.244.1.6", 8080)},
					{Target: TargetRemoteEndpoint, EndpointID: h.remote7.ID, Packet: tcp(sourceVIP, 40000, "10.244.2.7", 8080),
						Encap: &Encapsulation{ProviderAddress: remoteNodeIP, VSID: 4096}},
				}}
			},
		},
		{
			name: "with DSR the backend sees the client's address and replies directly",
			setup: func(t *testing.T, h *overlayHost) *LoadBalancer {
				lb := clusterIPLB(clusterIP, 80, 8080, h.pod6.ID, h.remote7.ID)
				lb.Flags = LoadBalancerFlagsDSR
				return mustLB(t, h.sim, lb)
			},
			from: FromEndpoint, pkt: tcp("10.244.1.5", 40000, clusterIP, 80),
			want: func(h *overlayHost) want {
				return want{lb: true, deliveries: []Delivery{
					{Target: TargetLocalEndpoint, EndpointID: h.pod6.ID, DSR: true, Packet: tcp("10.244.1.5", 40000, "10.244.1.6", 8080)},
					{Target: TargetRemoteEndpoint, EndpointID: h.remote7.ID, DSR: true, Packet: tcp("10.244.1.5", 40000, "10.244.2.7", 8080),
						Encap: &Encapsulation{ProviderAddress: remoteNodeIP, VSID: 4096}},
				}}
			},
		},
		{
			name: "PreserveDIP delivers with the VIP as destination",
			setup: func(t *testing.T, h *overlayHost) *LoadBalancer {
				lb := clusterIPLB("198.51.100.20", 443, 443, h.pod6.ID)
				lb.Flags = LoadBalancerFlagsDSR
				lb.PortMappings[0].Flags = PortMappingFlagsVipExternalIP | PortMappingFlagsUseMux | PortMappingFlagsPreserveDIP
				return mustLB(t, h.sim, lb)
			},
			from: FromExternal, pkt: tcp(outsideIP, 50000, "198.51.100.20", 443),
			want: func(h *overlayHost) want {
				return want{lb: true, deliveries: []Delivery{
					{Target: TargetLocalEndpoint, EndpointID: h.pod6.ID, DSR: true, Packet: tcp(outsideIP, 50000, "198.51.100.20", 443)},
				}}
			},
		},
		{
			name: "without DSR an external client is SNATed to the source VIP",
			setup: func(t *testing.T, h *overlayHost) *LoadBalancer {
				lb := clusterIPLB("198.51.100.20", 80, 8080, h.remote7.ID)
				lb.PortMappings[0].Flags = PortMappingFlagsVipExternalIP
				return mustLB(t, h.sim, lb)
			},
			from: FromExternal, pkt: tcp(outsideIP, 50000, "198.51.100.20", 80),
			want: func(h *overlayHost) want {
				return want{lb: true, deliveries: []Delivery{
					{Target: TargetRemoteEndpoint, EndpointID: h.remote7.ID, Packet: tcp(sourceVIP, 50000, "10.244.2.7", 8080),
						Encap: &Encapsulation{ProviderAddress: remoteNodeIP, VSID: 4096}},
				}}
			},
		},
		{
			name: "a node port from outside reaches the backends on the node's address",
			setup: func(t *testing.T, h *overlayHost) *LoadBalancer {
				lb := clusterIPLB(clusterIP, 30080, 8080, h.pod6.ID)
				lb.FrontendVIPs = nil
				lb.PortMappings[0].Flags = PortMappingFlagsVipExternalIP | PortMappingFlagsLocalRoutedVIP
				return mustLB(t, h.sim, lb)
			},
			from: FromExternal, pkt: tcp(outsideIP, 50000, nodeIP, 30080),
			want: func(h *overlayHost) want {
				return want{lb: true, deliveries: []Delivery{
					{Target: TargetLocalEndpoint, EndpointID: h.pod6.ID, Packet: tcp(sourceVIP, 50000, "10.244.1.6", 8080)},
				}}
			},
		},
		{
			name: "a node port is reachable from the host itself only with LocalRoutedVIP",
			setup: func(t *testing.T, h *overlayHost) *LoadBalancer {
				lb := clusterIPLB(clusterIP, 30080, 8080, h.pod6.ID)
				lb.FrontendVIPs = nil
				lb.PortMappings[0].Flags = PortMappingFlagsVipExternalIP
				return mustLB(t, h.sim, lb)
			},
			from: FromHost, pkt: tcp(nodeIP, 50000, nodeIP, 30080),
			want: func(h *overlayHost) want {
				return want{deliveries: []Delivery{{Target: TargetHost, Packet: tcp(nodeIP, 50000, nodeIP, 30080)}}}
			},
		},
		{
			name: "a ClusterIP is not load balanced for traffic from outside the node",
			setup: func(t *testing.T, h *overlayHost) *LoadBalancer {
				return mustLB(t, h.sim, clusterIPLB(clusterIP, 80, 8080, h.pod6.ID))
			},
			from: FromExternal, pkt: tcp(outsideIP, 50000, clusterIP, 80),
			want: func(h *overlayHost) want {
				return want{dropped: "no endpoint, route or load balancer for 10.96.0.10"}
			},
		},
		{
			name: "an ILB frontend ignores external traffic even with VipExternalIP",
			setup: func(t *testing.T, h *overlayHost) *LoadBalancer {
				lb := clusterIPLB(clusterIP, 80, 8080, h.pod6.ID)
				lb.PortMappings[0].Flags = PortMappingFlagsILB | PortMappingFlagsVipExternalIP
				return mustLB(t, h.sim, lb)
			},
			from: FromExternal, pkt: tcp(outsideIP, 50000, clusterIP, 80),
			want: func(h *overlayHost) want {
				return want{dropped: "no endpoint, route or load balancer for 10.96.0.10"}
			},
		},
		{
			name: "a load balancer whose remote backend has no provider address drops",
			setup: func(t *testing.T, h *overlayHost) *LoadBalancer {
				lost := mustEndpoint(t, h.sim, remoteEndpoint(h.net.ID, "10.244.3.9", ""))
				return mustLB(t, h.sim, clusterIPLB(clusterIP, 80, 8080, lost.ID))
			},
			from: FromEndpoint, pkt: tcp("10.244.1.5", 40000, clusterIP, 80),
			want: func(h *overlayHost) want {
				return want{lb: true, dropped: "no backend is reachable"}
			},
		},
		{
			name: "a remote backend without a provider address uses the covering remote subnet route",
			setup: func(t *testing.T, h *overlayHost) *LoadBalancer {
				if err := h.sim.AddNetworkPolicies(ctx, h.net.ID, []NetworkPolicy{remoteSubnetRoute()}); err != nil {
					t.Fatal(err)
				}
				bare := mustEndpoint(t, h.sim, remoteEndpoint(h.net.ID, "10.244.2.9", ""))
				return mustLB(t, h.sim, clusterIPLB(clusterIP, 80, 8080, bare.ID))
			},
			from: FromEndpoint, pkt: tcp("10.244.1.5", 40000, clusterIP, 80),
			want: func(h *overlayHost) want {
				eps, _ := h.sim.ListEndpoints(ctx, h.net.ID)
				bare := eps[len(eps)-1].ID
				return want{lb: true, deliveries: []Delivery{
					{Target: TargetRemoteEndpoint, EndpointID: bare, Packet: tcp(sourceVIP, 40000, "10.244.2.9", 8080),
						Encap: &Encapsulation{ProviderAddress: remoteNodeIP, VSID: 4096}},
				}}
			},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := newOverlayHost(t, SimulatorOptions{})
			lb := tc.setup(t, h)
			w := tc.want(h)
			h.sim.ResetCalls()
			tr := mustTrace(t, h.sim, tc.from, tc.pkt)
			if gotLB := tr.LoadBalancerID != ""; gotLB != w.lb {
				t.Fatalf("load balancer matched = %t, want %t\n%s", gotLB, w.lb, tr)
			}
			if w.lb && tr.LoadBalancerID != lb.ID {
				t.Errorf("matched load balancer %s, want %s", tr.LoadBalancerID, lb.ID)
			}
			if diff := cmp.Diff(w.deliveries, tr.Deliveries); diff != "" {
				t.Errorf("deliveries (-want +got):\n%s\ntrace:\n%s", diff, tr)
			}
			if tr.Dropped != w.dropped {
				t.Errorf("dropped = %q, want %q\n%s", tr.Dropped, w.dropped, tr)
			}
			if n := len(h.sim.CallCounts()); n != 0 {
				t.Errorf("tracing made HNS calls: %v", h.sim.CallCounts())
			}
		})
	}
}

func TestTraceSessionAffinityPinsAClientToOneBackend(t *testing.T) {
	h := newOverlayHost(t, SimulatorOptions{})
	pod8 := mustEndpoint(t, h.sim, localEndpoint(h.net.ID, "10.244.1.8"))
	lb := clusterIPLB(clusterIP, 80, 8080, h.pod6.ID, pod8.ID, h.remote7.ID)
	lb.PortMappings[0].DistributionType = DistributionSourceIP
	mustLB(t, h.sim, lb)

	first := mustTrace(t, h.sim, FromEndpoint, tcp("10.244.1.5", 40000, clusterIP, 80))
	if len(first.Deliveries) != 1 {
		t.Fatalf("affinity must pick one backend, got %d\n%s", len(first.Deliveries), first)
	}
	for port := uint16(40001); port < 40020; port++ {
		again := mustTrace(t, h.sim, FromEndpoint, tcp("10.244.1.5", port, clusterIP, 80))
		if diff := cmp.Diff(first.Backends(), again.Backends()); diff != "" {
			t.Fatalf("same client, new connection, other backend (-first +again):\n%s", diff)
		}
	}
	// Different clients spread over the backends.
	seen := map[string]bool{}
	for i := range 40 {
		src := fmt.Sprintf("10.244.1.%d", 100+i)
		mustEndpoint(t, h.sim, localEndpoint(h.net.ID, src))
		seen[mustTrace(t, h.sim, FromEndpoint, tcp(src, 40000, clusterIP, 80)).Backends()[0]] = true
	}
	if len(seen) != 3 {
		t.Errorf("40 clients reached %d of 3 backends", len(seen))
	}
}

func TestTraceRouting(t *testing.T) {
	cases := []struct {
		name string
		from Entry
		pkt  Packet
		want Delivery
		// dsrFirst puts a loopback-DSR OutBoundNAT (Destinations: the pod
		// itself) before the exceptions policy.
		dsrFirst bool
	}{
		{
			name: "pod to outside is NATed to the node IP",
			from: FromEndpoint, pkt: tcp("10.244.1.5", 40000, "203.0.113.7", 443),
			want: Delivery{Target: TargetExternal, Packet: tcp(nodeIP, 40000, "203.0.113.7", 443)},
		},
		{
			name: "pod to the service CIDR without a load balancer is not NATed",
			from: FromEndpoint, pkt: tcp("10.244.1.5", 40000, "10.96.0.99", 80),
			want: Delivery{Target: TargetExternal, Packet: tcp("10.244.1.5", 40000, "10.96.0.99", 80)},
		},
		{
			name: "pod to a remote pod is encapsulated to the remote node's provider address",
			from: FromEndpoint, pkt: tcp("10.244.1.5", 40000, "10.244.2.33", 8080),
			want: Delivery{Target: TargetRemoteEndpoint, Packet: tcp("10.244.1.5", 40000, "10.244.2.33", 8080),
				Encap: &Encapsulation{ProviderAddress: remoteNodeIP, VSID: 4096}},
		},
		{
			name: "a loopback-DSR policy listed first does not stop outside traffic being NATed",
			from: FromEndpoint, pkt: tcp("10.244.1.5", 40000, "203.0.113.7", 443), dsrFirst: true,
			want: Delivery{Target: TargetExternal, Packet: tcp(nodeIP, 40000, "203.0.113.7", 443)},
		},
		{
			name: "the host reaches a local pod directly",
			from: FromHost, pkt: tcp(nodeIP, 40000, "10.244.1.6", 8080),
			want: Delivery{Target: TargetLocalEndpoint, Packet: tcp(nodeIP, 40000, "10.244.1.6", 8080)},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := newOverlayHost(t, SimulatorOptions{})
			if err := h.sim.AddNetworkPolicies(ctx, h.net.ID, []NetworkPolicy{remoteSubnetRoute()}); err != nil {
				t.Fatal(err)
			}
			nat := EndpointPolicy{Type: EndpointPolicyOutBoundNAT, OutboundNAT: &OutboundNATPolicy{
				Exceptions: []string{"10.244.0.0/16", "10.96.0.0/12", "10.0.0.0/24"}}}
			// Re-create pod .5 with its outbound NAT policy.
			if err := h.sim.DeleteEndpoint(ctx, h.pod5.ID); err != nil {
				t.Fatal(err)
			}
			policies := []EndpointPolicy{nat}
			if tc.dsrFirst {
				dsr := EndpointPolicy{Type: EndpointPolicyOutBoundNAT, OutboundNAT: &OutboundNATPolicy{Destinations: []string{"10.244.1.5"}}}
				policies = []EndpointPolicy{dsr, nat}
			}
			mustEndpoint(t, h.sim, localEndpoint(h.net.ID, "10.244.1.5", policies...))
			tr := mustTrace(t, h.sim, tc.from, tc.pkt)
			if len(tr.Deliveries) != 1 {
				t.Fatalf("want one delivery, got %d\n%s", len(tr.Deliveries), tr)
			}
			got := tr.Deliveries[0]
			got.EndpointID = "" // routing targets are asserted by address
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("delivery (-want +got):\n%s\n%s", diff, tr)
			}
		})
	}
}

func TestTraceRejectsMalformedQuestions(t *testing.T) {
	h := newOverlayHost(t, SimulatorOptions{})
	for name, tc := range map[string]struct {
		from Entry
		pkt  Packet
		want string
	}{
		"a source that is not an address":      {FromHost, tcp("nope", 1, clusterIP, 80), "source"},
		"a destination that is not an address": {FromHost, tcp(nodeIP, 1, "10.96.0.300", 80), "destination"},
		"a pod source no local endpoint holds": {FromEndpoint, tcp("10.244.1.77", 1, clusterIP, 80), "no local endpoint"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := h.sim.Trace(tc.from, tc.pkt)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want an error about %q", err, tc.want)
			}
		})
	}
}
