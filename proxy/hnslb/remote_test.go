package hnslb

import (
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/nodenet/nodenet/hns"
	"github.com/nodenet/nodenet/proxy"
)

func TestRemoteEndpointCarriesTheOwningNodesProviderAddress(t *testing.T) {
	h := newHost(t, hostOptions{})
	h.addPod(localPodIP(0))
	b := h.backend()
	mustSync(t, b, full(stateOf(svc(1, podEP(2, 0), podEP(3, 0)))))

	eps := h.remoteEndpoints()
	for _, c := range []struct{ ip, pa string }{
		{remotePodIP(2, 0), remoteNodeIP(2)},
		{remotePodIP(3, 0), remoteNodeIP(3)},
		{"10.96.0.2", nodeIP}, // the cluster IP's own, as kube-proxy makes it
	} {
		ep, ok := eps[c.ip]
		if !ok {
			t.Errorf("no remote endpoint for %s:\n%s", c.ip, h.sim.Dump())
			continue
		}
		if got := providerAddress(ep); got != c.pa {
			t.Errorf("remote endpoint %s has provider address %q, want %s", c.ip, got, c.pa)
		}
		if ep.Name != RemoteEndpointName(netip.MustParseAddr(c.ip)) {
			t.Errorf("remote endpoint %s is named %q", c.ip, ep.Name)
		}
	}
	if ep := eps["10.96.0.2"]; ep.MacAddress != hostMAC {
		t.Errorf("cluster-IP endpoint MAC %s, want the host's %s", ep.MacAddress, hostMAC)
	}
	tr := h.trace(hns.FromEndpoint, localPodIP(0), "10.96.0.2", 80)
	want := []string{
		sourceVIP + " -> " + remotePodIP(2, 0) + ":8080 via " + remoteNodeIP(2),
		sourceVIP + " -> " + remotePodIP(3, 0) + ":8080 via " + remoteNodeIP(3),
	}
	if got := seen(tr); !slices.Equal(got, want) {
		t.Errorf("pod -> cluster IP reaches %v, want %v", got, want)
	}
}

func TestRemoteEndpointFollowsItsNodesNewAddress(t *testing.T) {
	h := newHost(t, hostOptions{})
	h.addPod(localPodIP(0))
	b := h.backend()
	st := stateOf(svc(1, podEP(2, 0)), svc(2, podEP(2, 0), podEP(3, 0)))
	mustSync(t, b, full(st))

	h.remotes[0].NodeIP = netip.MustParseAddr("192.168.2.200")
	h.ensureNetwork()
	h.sim.ResetCalls()
	// Nothing changed in the services: the network facts did.
	mustSync(t, b, partial(st, nil))

	ep := h.remoteEndpoints()[remotePodIP(2, 0)]
	if got := providerAddress(ep); got != "192.168.2.200" {
		t.Errorf("remote endpoint provider address %q, want the node's new 192.168.2.200", got)
	}
	for _, vip := range []string{"10.96.0.2", "10.96.0.3"} {
		tr := h.trace(hns.FromEndpoint, localPodIP(0), vip, 80)
		if got := seen(tr); !slices.Contains(got, sourceVIP+" -> "+remotePodIP(2, 0)+":8080 via 192.168.2.200") {
			t.Errorf("pod -> %s reaches %v, want the pod on node-2 through its new address", vip, got)
		}
	}
	if n := h.sim.Calls(hns.OpCreateEndpoint); n != 1 {
		t.Errorf("%d endpoints created, want 1 (only node-2's pod's)", n)
	}
	fresh := newHost(t, hostOptions{})
	fresh.remotes[0].NodeIP = netip.MustParseAddr("192.168.2.200")
	fresh.ensureNetwork()
	fresh.addPod(localPodIP(0))
	mustSync(t, fresh.backend(), full(st))
	if got, want := h.canon(), fresh.canon(); !slices.Equal(got, want) {
		t.Errorf("HNS after the change:\n%s\nwant as built fresh:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func TestRemoteEndpointIsSharedAndGoesWithItsLastUser(t *testing.T) {
	h := newHost(t, hostOptions{})
	b := h.backend()
	s1, s2 := svc(1, podEP(2, 0)), svc(2, podEP(2, 0))
	st := stateOf(s1, s2)
	h.sim.ResetCalls()
	mustSync(t, b, full(st))
	if n := h.sim.Calls(hns.OpCreateEndpoint); n != 3 {
		t.Fatalf("%d endpoints created, want 3 (the shared pod's, two cluster IPs')", n)
	}

	st, changed := without(st, s1.Key)
	mustSync(t, b, partial(st, changed))
	if _, ok := h.remoteEndpoints()[remotePodIP(2, 0)]; !ok {
		t.Fatalf("shared remote endpoint deleted while svc-2 still uses it")
	}
	st, changed = without(st, s2.Key)
	mustSync(t, b, partial(st, changed))
	if eps := h.remoteEndpoints(); len(eps) != 0 {
		t.Errorf("remote endpoints left: %v", eps)
	}
	if n := len(h.loadBalancers()); n != 0 {
		t.Errorf("%d load balancers left", n)
	}
}

// A pod moving to this node: the remote endpoint of ours that held its
// address (left from when the address belonged to another node) is
// removed before anything else, which lets CNI create the pod's endpoint;
// the load balancer then uses the local endpoint.
func TestRemoteEndpointFollowsAPodMovingToThisNode(t *testing.T) {
	h := newHost(t, hostOptions{})
	b := h.backend()
	moved := localPodIP(1)
	stale, err := h.sim.CreateEndpoint(ctx, remoteSpec{ip: netip.MustParseAddr(moved), pa: netip.MustParseAddr(remoteNodeIP(2))}.endpoint(h.networkID(), ""))
	if err != nil {
		t.Fatal(err)
	}
	// The slice still says node-2: the address is in this node's pod
	// CIDR, so it must not become (or stay) a remote endpoint.
	st := stateOf(svc(1, ep(moved, 8080, false), podEP(2, 0)))
	mustSync(t, b, full(st))
	if _, err := h.sim.GetEndpointByID(ctx, stale.ID); !hns.IsNotFound(err) {
		t.Fatalf("the remote endpoint on this node's pod address is still there (%v)", err)
	}
	if _, ok := h.remoteEndpoints()[moved]; ok {
		t.Fatalf("a remote endpoint holds %s, a local pod address", moved)
	}

	local := h.addPod(moved) // CNI can create it now
	st, changed := with(st, svc(1, localEP(1), podEP(2, 0)))
	mustSync(t, b, partial(st, changed))
	lb := h.lbFor("10.96.0.2", 80)
	if lb == nil || !slices.Contains(lb.HostComputeEndpoints, local) {
		t.Fatalf("cluster IP load balancer %+v does not use the local endpoint %s", lb, local)
	}
	h.addPod(localPodIP(0))
	tr := h.trace(hns.FromEndpoint, localPodIP(0), "10.96.0.2", 80)
	if got := seen(tr); !slices.Contains(got, sourceVIP+" -> "+moved+":8080") {
		t.Errorf("pod -> cluster IP reaches %v, want the moved pod locally", got)
	}
}

func TestRemoteEndpointOfSomeoneElseIsUsedAsItIs(t *testing.T) {
	h := newHost(t, hostOptions{})
	b := h.backend()
	// kube-proxy's remote endpoints have no name.
	theirs, err := h.sim.CreateEndpoint(ctx, &hns.Endpoint{
		HostComputeNetwork: h.networkID(),
		IpConfigurations:   []hns.IPConfig{{IpAddress: remotePodIP(2, 0)}},
		Flags:              hns.EndpointFlagsRemoteEndpoint,
		Policies:           []hns.EndpointPolicy{{Type: hns.EndpointPolicyProviderAddress, ProviderAddress: &hns.ProviderAddressPolicy{ProviderAddress: remoteNodeIP(2)}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	st := stateOf(svc(1, podEP(2, 0)))
	mustSync(t, b, full(st))
	if lb := h.lbFor("10.96.0.2", 80); lb == nil || !slices.Equal(lb.HostComputeEndpoints, []string{theirs.ID}) {
		t.Fatalf("load balancer %+v, want it on the existing endpoint %s", lb, theirs.ID)
	}
	st2, changed := without(st, svc(1).Key)
	mustSync(t, b, partial(st2, changed))
	if _, err := h.sim.GetEndpointByID(ctx, theirs.ID); err != nil {
		t.Errorf("someone else's remote endpoint was deleted: %v", err)
	}
}

func TestEndpointsAreKeptApartByFamilyAndProtocol(t *testing.T) {
	h := newHost(t, hostOptions{})
	h.addPod(localPodIP(1))
	b := h.backend()
	tcp := svc(1, localEP(1))
	udp := svc(1, localEP(1))
	udp.Key.Protocol, udp.Key.Port = proxy.UDP, "dns"
	mustSync(t, b, full(stateOf(tcp, udp)))
	lbs := h.loadBalancers()
	if len(lbs) != 2 {
		t.Fatalf("%d load balancers, want TCP and UDP on the same cluster IP and port", len(lbs))
	}
	if n := len(h.remoteEndpoints()); n != 1 {
		t.Errorf("%d remote endpoints, want the cluster IP's one, shared", n)
	}
}
