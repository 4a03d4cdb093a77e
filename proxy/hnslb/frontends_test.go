package hnslb

import (
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nodenet/nodenet/config"
	"github.com/nodenet/nodenet/hns"
	"github.com/nodenet/nodenet/proxy"
)

func TestPodToClusterIP(t *testing.T) {
	for _, tc := range []struct {
		name string
		dsr  bool
		want []string
	}{
		{"without DSR the backends see the source VIP", false, []string{
			"10.244.1.2 -> 10.244.1.11:8080",
			"10.244.1.2 -> 10.244.2.10:8080 via 192.168.2.2",
		}},
		{"with DSR the backends see the pod and reply to it directly", true, []string{
			"10.244.1.10 -> 10.244.1.11:8080 dsr",
			"10.244.1.10 -> 10.244.2.10:8080 dsr via 192.168.2.2",
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHost(t, hostOptions{})
			h.addPod(localPodIP(0))
			h.addPod(localPodIP(1))
			b := h.backend(func(o *Options) { o.EnableDSR = tc.dsr })
			mustSync(t, b, full(stateOf(svc(1, localEP(1), podEP(2, 0)))))

			tr := h.trace(hns.FromEndpoint, localPodIP(0), "10.96.0.2", 80)
			if got := seen(tr); !slices.Equal(got, tc.want) {
				t.Errorf("pod -> 10.96.0.2:80 reaches\n%v\nwant\n%v\n%s", got, tc.want, tr)
			}
			lb := h.lbFor("10.96.0.2", 80)
			if lb == nil || lb.PortMappings[0].Flags != 0 {
				t.Errorf("cluster IP load balancer = %+v, want one with no port flags", lb)
			}
			if tr := h.trace(hns.FromExternal, client, "10.96.0.2", 80); len(tr.Deliveries) != 0 {
				t.Errorf("a cluster IP is reachable from outside the node:\n%s", tr)
			}
		})
	}
}

func TestNodePortFromOutside(t *testing.T) {
	for _, tc := range []struct {
		name     string
		etpLocal bool
		want     []string
	}{
		{"with eTP Cluster every endpoint is reached, SNATed to the source VIP", false, []string{
			"10.244.1.2 -> 10.244.1.11:8080",
			"10.244.1.2 -> 10.244.2.10:8080 via 192.168.2.2",
		}},
		{"with eTP Local only local endpoints, by DSR, see the client", true, []string{
			client + " -> 10.244.1.11:8080 dsr",
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHost(t, hostOptions{})
			h.addPod(localPodIP(1))
			b := h.backend()
			sp := nodePort(svc(1, localEP(1), podEP(2, 0)), 30080, tc.etpLocal)
			mustSync(t, b, full(stateOf(sp)))

			tr := h.trace(hns.FromExternal, client, nodeIP, 30080)
			if got := seen(tr); !slices.Equal(got, tc.want) {
				t.Errorf("client -> node:30080 reaches\n%v\nwant\n%v\n%s", got, tc.want, tr)
			}
			lb := h.lbFor("", 30080)
			if lb == nil {
				t.Fatalf("no node-port load balancer:\n%s", h.sim.Dump())
			}
			if want := hns.PortMappingFlagsLocalRoutedVIP | hns.PortMappingFlagsVipExternalIP; lb.PortMappings[0].Flags != want {
				t.Errorf("node-port flags = %d, want LocalRoutedVIP|VipExternalIP", lb.PortMappings[0].Flags)
			}
			if tr := h.trace(hns.FromHost, nodeIP, nodeIP, 30080); len(tr.Deliveries) == 0 {
				t.Errorf("the node cannot reach its own node port:\n%s", tr)
			}
		})
	}
}

func TestExternalAndIngressIPsGetOneLoadBalancerEach(t *testing.T) {
	h := newHost(t, hostOptions{})
	h.addPod(localPodIP(1))
	b := h.backend()
	sp := svc(1, localEP(1))
	sp.Type = proxy.LoadBalancer
	sp.ExternalIPs = []netip.Addr{netip.MustParseAddr("203.0.113.50")}
	sp.LoadBalancerIPs = []netip.Addr{netip.MustParseAddr("203.0.113.60"), netip.MustParseAddr("203.0.113.61")}
	nodePort(sp, 30080, false)
	mustSync(t, b, full(stateOf(sp)))

	if n := len(h.loadBalancers()); n != 5 {
		t.Errorf("%d load balancers, want 5 (cluster IP, node port, external IP, two ingress IPs):\n%s", n, h.sim.Dump())
	}
	for _, vip := range []string{"203.0.113.50", "203.0.113.60", "203.0.113.61"} {
		tr := h.trace(hns.FromExternal, client, vip, 80)
		if got, want := seen(tr), []string{"10.244.1.2 -> 10.244.1.11:8080"}; !slices.Equal(got, want) {
			t.Errorf("client -> %s:80 reaches %v, want %v\n%s", vip, got, want, tr)
		}
		if lb := h.lbFor(vip, 80); lb.PortMappings[0].Flags != hns.PortMappingFlagsVipExternalIP {
			t.Errorf("%s port flags = %d, want VipExternalIP", vip, lb.PortMappings[0].Flags)
		}
	}
}

func TestPreserveDestinationKeepsTheVIPAsDestination(t *testing.T) {
	h := newHost(t, hostOptions{})
	h.addPod(localPodIP(1))
	b := h.backend()
	sp := svc(1, localEP(1), podEP(2, 0))
	sp.Type = proxy.LoadBalancer
	sp.PreserveDestination = true
	sp.LoadBalancerIPs = []netip.Addr{netip.MustParseAddr("203.0.113.60")}
	nodePort(sp, 30080, false)
	mustSync(t, b, full(stateOf(sp)))

	tr := h.trace(hns.FromExternal, client, "203.0.113.60", 80)
	if got, want := seen(tr), []string{client + " -> 203.0.113.60:8080 dsr"}; !slices.Equal(got, want) {
		t.Errorf("client -> ingress reaches %v, want %v (local backend only, VIP kept)\n%s", got, want, tr)
	}
	lb := h.lbFor("203.0.113.60", 80)
	want := hns.PortMappingFlagsVipExternalIP | hns.PortMappingFlagsUseMux | hns.PortMappingFlagsPreserveDIP
	if lb.PortMappings[0].Flags != want || lb.Flags&hns.LoadBalancerFlagsDSR == 0 {
		t.Errorf("ingress load balancer flags = %d/%d, want DSR and VipExternalIP|UseMux|PreserveDIP", lb.Flags, lb.PortMappings[0].Flags)
	}
	if tr := h.trace(hns.FromExternal, client, nodeIP, 30080); len(tr.Deliveries) != 1 {
		t.Errorf("node port with preserve-destination reaches %v, want the local backend only", seen(tr))
	}
}

func TestSCTPIsSkippedWithAnEvent(t *testing.T) {
	h := newHost(t, hostOptions{})
	h.addPod(localPodIP(1))
	ev := newEvents()
	obs := &observed{}
	b := h.backend(func(o *Options) { o.Recorder, o.Observe = ev, obs.observe })
	sp := svc(1, localEP(1))
	sp.Key.Protocol = proxy.SCTP
	mustSync(t, b, full(stateOf(sp, svc(2, localEP(1)))))

	if n := len(h.loadBalancers()); n != 1 {
		t.Errorf("%d load balancers, want 1 (the TCP service only)", n)
	}
	if got := ev.drain(); len(got) != 1 || !strings.Contains(got[0], reasonSCTP) {
		t.Errorf("events = %q, want one %s", got, reasonSCTP)
	}
	mustSync(t, b, full(stateOf(sp, svc(2, localEP(1)))))
	if got := ev.drain(); len(got) != 0 || obs.count(OpSCTPUnsupported) != 1 {
		t.Errorf("a resync reported again: events %q, count %d", got, obs.count(OpSCTPUnsupported))
	}
}

func TestSessionAffinity(t *testing.T) {
	for _, tc := range []struct {
		name      string
		version   hns.Version
		wantDist  hns.Distribution
		wantEvent bool
	}{
		{"pins a client to one backend on HNS 12 and newer", hns.VersionWS2022, hns.DistributionSourceIP, false},
		{"is left out, with an event and a metric, on older HNS", hns.VersionWS2019, hns.DistributionNone, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHost(t, hostOptions{version: tc.version})
			h.addPod(localPodIP(0))
			h.addPod(localPodIP(1))
			h.addPod(localPodIP(2))
			ev, obs := newEvents(), &observed{}
			b := h.backend(func(o *Options) { o.Recorder, o.Observe = ev, obs.observe })
			sp := svc(1, localEP(1), localEP(2))
			sp.SessionAffinity = 3 * time.Hour
			mustSync(t, b, full(stateOf(sp)))

			lb := h.lbFor("10.96.0.2", 80)
			if lb == nil || lb.PortMappings[0].DistributionType != tc.wantDist {
				t.Fatalf("load balancer %+v, want distribution %d", lb, tc.wantDist)
			}
			tr := h.trace(hns.FromEndpoint, localPodIP(0), "10.96.0.2", 80)
			if pinned := len(tr.Deliveries) == 1; pinned != (tc.wantDist == hns.DistributionSourceIP) {
				t.Errorf("client reaches %v", seen(tr))
			}
			got := ev.drain()
			if hasEvent := len(got) == 1 && strings.Contains(got[0], reasonAffinity); hasEvent != tc.wantEvent {
				t.Errorf("events = %q, want an affinity event: %t", got, tc.wantEvent)
			}
			if n := obs.count(OpAffinityUnsupported); (n == 1) != tc.wantEvent {
				t.Errorf("%s observed %d times", OpAffinityUnsupported, n)
			}
		})
	}
}

func TestDSR(t *testing.T) {
	t.Run("enabled on a host without DSR fails every sync with a clear error", func(t *testing.T) {
		h := newHost(t, hostOptions{version: hns.Version{Major: 10, Minor: 0}})
		b := h.backend(withDSR)
		err := b.Sync(ctx, full(stateOf(svc(1, podEP(2, 0)))))
		if err == nil || !strings.Contains(err.Error(), "enableDSR") {
			t.Errorf("Sync = %v, want an error naming proxy.enableDSR", err)
		}
		if w := h.sim.Calls(hns.OpCreateLoadBalancer); w != 0 {
			t.Errorf("%d load balancers created", w)
		}
	})
	t.Run("is on every load balancer create and update when enabled", func(t *testing.T) {
		h := newHost(t, hostOptions{version: hnsFixedModify})
		h.addPod(localPodIP(1))
		b := h.backend(withDSR)
		st := stateOf(svc(1, localEP(1)))
		mustSync(t, b, full(st))
		st2, changed := with(st, svc(1, localEP(1), podEP(2, 0)))
		mustSync(t, b, partial(st2, changed))
		if h.sim.Calls(hns.OpUpdateLoadBalancer) != 1 {
			t.Fatalf("no update: %v", h.sim.CallCounts())
		}
		if lb := h.lbFor("10.96.0.2", 80); lb.Flags&hns.LoadBalancerFlagsDSR == 0 {
			t.Errorf("updated load balancer lost the DSR flag: %+v", lb)
		}
	})
	t.Run("eTP Local on a host without DSR is an event", func(t *testing.T) {
		h := newHost(t, hostOptions{version: hns.Version{Major: 10, Minor: 0}})
		h.addPod(localPodIP(1))
		ev := newEvents()
		b := h.backend(func(o *Options) { o.Recorder = ev })
		mustSync(t, b, full(stateOf(nodePort(svc(1, localEP(1)), 30080, true))))
		if got := ev.drain(); len(got) != 1 || !strings.Contains(got[0], reasonNoDSR) {
			t.Errorf("events = %q, want one %s", got, reasonNoDSR)
		}
		if tr := h.trace(hns.FromExternal, client, nodeIP, 30080); len(tr.Deliveries) != 1 || tr.Deliveries[0].DSR {
			t.Errorf("node port reaches %v, want the local endpoint without DSR", seen(tr))
		}
	})
}

func TestHealthCheckForwarding(t *testing.T) {
	h := newHost(t, hostOptions{})
	h.addPod(localPodIP(1))
	b := h.backend(func(o *Options) { o.ForwardHealthCheckVIP, o.HealthzPort = true, 10256 })
	sp := svc(1, localEP(1))
	sp.Type = proxy.LoadBalancer
	sp.LoadBalancerIPs = []netip.Addr{netip.MustParseAddr("203.0.113.60")}
	sp.HealthCheckNodePort = 31000
	nodePort(sp, 30080, true)
	udp := svc(1, localEP(1))
	udp.Key.Protocol, udp.Key.Port = proxy.UDP, "dns"
	udp.Type, udp.LoadBalancerIPs, udp.HealthCheckNodePort = proxy.LoadBalancer, sp.LoadBalancerIPs, 31000
	nodePort(udp, 30053, true)
	st := stateOf(sp, udp)
	mustSync(t, b, full(st))

	lb := h.lbFor("203.0.113.60", 31000)
	if lb == nil {
		t.Fatalf("no health-check load balancer:\n%s", h.sim.Dump())
	}
	host := h.net.Local().SourceVIPEndpointID
	if pm := lb.PortMappings[0]; pm.Protocol != hns.ProtocolTCP || pm.InternalPort != 31000 || !slices.Equal(lb.HostComputeEndpoints, []string{host}) || lb.Flags != 0 {
		t.Errorf("health check = %+v, want TCP 31000 -> the host endpoint %s without DSR", lb, host)
	}
	// The two ports share it: removing one keeps it.
	st2, changed := without(st, udp.Key)
	mustSync(t, b, partial(st2, changed))
	if h.lbFor("203.0.113.60", 31000) == nil {
		t.Errorf("health-check load balancer gone with one of the service's two ports")
	}
	st3, changed := without(st2, sp.Key)
	mustSync(t, b, partial(st3, changed))
	if n := len(h.loadBalancers()); n != 0 {
		t.Errorf("%d load balancers left after the service went:\n%s", n, h.sim.Dump())
	}
}

func TestDualStackL2BridgeServesEachFamilyOnItsOwn(t *testing.T) {
	h := newHost(t, hostOptions{mode: config.NetworkModeL2Bridge, dualStack: true})
	h.addPod(localPodIP(1))
	b := h.backend()
	v4 := nodePort(svc(1, localEP(1)), 30080, false)
	v6 := svc(1, ep(v6Of(localPodIP(1)), 8080, true))
	v6.Key.Family, v6.ClusterIP = proxy.IPv6, netip.MustParseAddr("fd00:96::2")
	nodePort(v6, 30080, false)
	mustSync(t, b, full(stateOf(v4, v6)))

	for _, c := range []struct{ src, dst, want string }{
		{client, nodeIP, nodeIP + " -> " + localPodIP(1) + ":8080"},
		{"2001:db8::7", nodeIPv6, nodeIPv6 + " -> " + v6Of(localPodIP(1)) + ":8080"},
	} {
		tr := h.trace(hns.FromExternal, c.src, c.dst, 30080)
		if got := seen(tr); !slices.Equal(got, []string{c.want}) {
			t.Errorf("client -> %s:30080 reaches %v, want %s\n%s", c.dst, got, c.want, tr)
		}
	}
	if lb := h.lbFor("fd00:96::2", 80); lb == nil || lb.Flags&hns.LoadBalancerFlagsIPv6 == 0 || lb.SourceVIP != nodeIPv6 {
		t.Errorf("IPv6 cluster-IP load balancer = %+v, want the IPv6 flag and the node's IPv6 address as source VIP", lb)
	}
}
