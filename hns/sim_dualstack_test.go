package hns

import "testing"

// Dual-stack node ports are one host-address load balancer per family
// (kube-proxy winkernel runs one proxier per family, the IPv6 one with
// LoadBalancerFlagsIPv6): HNS keeps them apart by that flag.
func TestSimulatorDualStackNodePorts(t *testing.T) {
	h := newOverlayHost(t, SimulatorOptions{HostAdapters: []HostAdapter{{Name: "Ethernet", IPs: []string{nodeIP, "fd00::4"}}}})
	nodePort := func(ipv6 bool) *LoadBalancer {
		lb := clusterIPLB(clusterIP, 30080, 8080, h.pod5.ID)
		lb.FrontendVIPs = nil
		if ipv6 {
			lb.Flags, lb.SourceVIP = LoadBalancerFlagsIPv6, ""
		}
		return lb
	}
	v4 := mustLB(t, h.sim, nodePort(false))
	v6, err := h.sim.CreateLoadBalancer(ctx, nodePort(true))
	if err != nil {
		t.Fatalf("an IPv6 node port beside the IPv4 one on the same port: %v", err)
	}
	if _, err := h.sim.CreateLoadBalancer(ctx, nodePort(true)); !IsPortAlreadyExists(err) {
		t.Errorf("a second IPv6 node port on the same port: %v, want port already exists", err)
	}
	for _, c := range []struct{ src, dst, want string }{
		{"203.0.113.7", nodeIP, v4.ID},
		{"2001:db8::7", "fd00::4", v6.ID},
	} {
		tr := mustTrace(t, h.sim, FromExternal, tcp(c.src, 40000, c.dst, 30080))
		if tr.LoadBalancerID != c.want {
			t.Errorf("a packet to %s:30080 matched load balancer %q, want %s\n%s", c.dst, tr.LoadBalancerID, c.want, tr)
		}
	}
}
