package hnslb

// Tests of how the backend copes with HNS as real Windows hosts behave
// (issue 14); the address plan is fixture_test.go's.

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nodenet/nodenet/config"
	"github.com/nodenet/nodenet/hns"
	"github.com/nodenet/nodenet/proxy"
)

// TestEndpointChangeReachesTheNewPodOnEveryHNS: a service whose endpoints
// change ends with the new backend in HNS on both sides of the
// ModifyLoadBalancer boundary; on 15.4 (kubernetes issue 131466) without
// a single in-place update.
func TestEndpointChangeReachesTheNewPodOnEveryHNS(t *testing.T) {
	for _, tc := range []struct {
		version  hns.Version
		inPlace  bool
		wantCall hns.Op
	}{
		{hnsBrokenModify, false, hns.OpCreateLoadBalancer},
		{hnsFixedModify, true, hns.OpUpdateLoadBalancer},
	} {
		t.Run(fmt.Sprintf("HNS %s updates in place: %t", tc.version, tc.inPlace), func(t *testing.T) {
			h := newHost(t, hostOptions{version: tc.version})
			h.addPod(localPodIP(0))
			h.addPod(localPodIP(1))
			h.addPod(localPodIP(2))
			b := h.backend()
			st := stateOf(svc(1, localEP(1)))
			mustSync(t, b, full(st))
			h.sim.ResetCalls()

			st, changed := with(st, svc(1, localEP(2)))
			mustSync(t, b, partial(st, changed))
			tr := h.trace(hns.FromEndpoint, localPodIP(0), "10.96.0.2", 80)
			if got, want := seen(tr), []string{sourceVIP + " -> " + localPodIP(2) + ":8080"}; !slices.Equal(got, want) {
				t.Errorf("after the change the cluster IP reaches %v, want %v", got, want)
			}
			calls := h.sim.CallCounts()
			if updates := calls[hns.OpUpdateLoadBalancer]; (updates > 0) != tc.inPlace {
				t.Errorf("calls %v: in-place update used %d times, want used: %t", calls, updates, tc.inPlace)
			}
			if !tc.inPlace && (calls[hns.OpDeleteLoadBalancer] != 1 || calls[hns.OpCreateLoadBalancer] != 1) {
				t.Errorf("calls %v, want one delete and one create", calls)
			}
		})
	}
}

// TestLoadBalancerThatKeepsItsOldEndpointsIsReplaced: a host whose
// feature table says in-place updates work while HNS keeps the old
// endpoints (what 15.4 did under hnslib's old range) is caught by the
// answer and served by delete and create from then on.
func TestLoadBalancerThatKeepsItsOldEndpointsIsReplaced(t *testing.T) {
	h := newHost(t, hostOptions{version: hnsBrokenModify})
	h.addPod(localPodIP(0))
	h.addPod(localPodIP(1))
	h.addPod(localPodIP(2))
	b := h.backend()
	st := stateOf(svc(1, localEP(1)), svc(2, localEP(1)))
	mustSync(t, b, full(st))
	b.modifyLB = true // as the old feature table said

	st, changed := with(st, svc(1, localEP(2)), svc(2, localEP(2)))
	h.sim.ResetCalls()
	mustSync(t, b, partial(st, changed))
	for _, vip := range []string{"10.96.0.2", "10.96.0.3"} {
		tr := h.trace(hns.FromEndpoint, localPodIP(0), vip, 80)
		if got, want := seen(tr), []string{sourceVIP + " -> " + localPodIP(2) + ":8080"}; !slices.Equal(got, want) {
			t.Errorf("%s reaches %v, want %v", vip, got, want)
		}
	}
	if n := h.sim.Calls(hns.OpUpdateLoadBalancer); n != 1 {
		t.Errorf("%d in-place updates, want 1 (the one that showed HNS keeps the old endpoints)", n)
	}
}

// manyEndpoints returns n endpoints: remote pods spread over the host's
// remote nodes (fixture: 245 addresses per node).
func manyEndpoints(n, nodes int) []proxy.Endpoint {
	eps := make([]proxy.Endpoint, 0, n)
	for i := range n {
		eps = append(eps, podEP(2+i%nodes, i/nodes))
	}
	return eps
}

// TestBackendLimitFollowsTheHost: with the host's limit (64 on old
// Windows Server 2019 builds, 1024 since 17763.2746; kubernetes issue
// 98680) the proxy never sends HNS more backends than it takes, and says
// so on the Service once.
func TestBackendLimitFollowsTheHost(t *testing.T) {
	for _, tc := range []struct {
		limit, endpoints int
		wantEvent        bool
	}{
		{64, 64, false},
		{64, 65, true},
		{1024, 1024, false},
		{1024, 1030, true},
	} {
		t.Run(fmt.Sprintf("%d endpoints on a host that takes %d", tc.endpoints, tc.limit), func(t *testing.T) {
			h := newHost(t, hostOptions{remotes: 5, maxBackends: tc.limit})
			ev, obs := newEvents(), &observed{}
			b := h.backend(func(o *Options) { o.MaxBackendsPerLoadBalancer, o.Recorder, o.Observe = tc.limit, ev, obs.observe })
			st := stateOf(svc(1, manyEndpoints(tc.endpoints, 5)...))
			mustSync(t, b, full(st)) // HNS refuses an over-limit one with E_INVALIDARG
			lb := h.lbFor("10.96.0.2", 80)
			if lb == nil {
				t.Fatal("no load balancer")
			}
			if want := min(tc.limit, tc.endpoints); len(lb.HostComputeEndpoints) != want {
				t.Errorf("%d backends, want %d", len(lb.HostComputeEndpoints), want)
			}
			evs := ev.drain()
			if got := slices.ContainsFunc(evs, func(e string) bool { return strings.Contains(e, reasonBackendLimit) }); got != tc.wantEvent {
				t.Errorf("events %q, want a %s event: %t", evs, reasonBackendLimit, tc.wantEvent)
			}
			if got := obs.count(OpBackendLimit) == 1; got != tc.wantEvent {
				t.Errorf("%s observed %d times, want once: %t", OpBackendLimit, obs.count(OpBackendLimit), tc.wantEvent)
			}
			// One more endpoint through a partial sync: still within the limit.
			st, changed := with(st, svc(1, manyEndpoints(tc.endpoints+1, 5)...))
			mustSync(t, b, partial(st, changed))
			if lb := h.lbFor("10.96.0.2", 80); lb == nil || len(lb.HostComputeEndpoints) != tc.limit {
				t.Errorf("after a partial sync: %v, want %d backends", lb, tc.limit)
			}
		})
	}
}

// TestZeroEndpointsDeletesTheLoadBalancers (kubernetes PR 137530): a
// service dropping to zero endpoints loses its load balancers at once,
// so nothing holds the port when its endpoints come back.
func TestZeroEndpointsDeletesTheLoadBalancers(t *testing.T) {
	for _, fullSync := range []bool{false, true} {
		t.Run(fmt.Sprintf("full sync: %t", fullSync), func(t *testing.T) {
			h := newHost(t, hostOptions{})
			h.addPod(localPodIP(1))
			b := h.backend()
			st := stateOf(nodePort(svc(1, localEP(1), podEP(2, 0)), 30001, false))
			mustSync(t, b, full(st))
			h.sim.ResetCalls()
			st, changed := with(st, nodePort(svc(1), 30001, false))
			mustSync(t, b, proxy.Update{State: st, Changed: changed, Full: fullSync})
			if n := h.sim.Calls(hns.OpDeleteLoadBalancer); n != 2 {
				t.Errorf("%d load balancers deleted, want the cluster IP's and the node port's", n)
			}
			if lbs := h.loadBalancers(); len(lbs) != 0 {
				t.Errorf("load balancers left at zero endpoints: %v", lbs)
			}
			h.sim.ResetCalls()
			st, changed = with(st, nodePort(svc(1, localEP(1)), 30001, false))
			mustSync(t, b, partial(st, changed))
			if calls := h.sim.CallCounts(); calls[hns.OpCreateLoadBalancer] != 2 {
				t.Errorf("coming back cost %v, want two creates and no conflict", calls)
			}
		})
	}
}

// orphan is a load balancer an earlier agent run left on the cluster IP of
// svc(1) (kubernetes PR 137530): stale backends, or another shape.
func orphan(t *testing.T, h *host, ports ...uint16) *hns.LoadBalancer {
	t.Helper()
	ep := h.addPod(localPodIP(9))
	lb := &hns.LoadBalancer{HostComputeEndpoints: []string{ep}, FrontendVIPs: []string{"10.96.0.2"}, SourceVIP: sourceVIP}
	for _, p := range ports {
		lb.PortMappings = append(lb.PortMappings, hns.PortMapping{Protocol: hns.ProtocolTCP, InternalPort: 8080, ExternalPort: p})
	}
	out, err := h.sim.CreateLoadBalancer(ctx, lb)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestALoadBalancerHoldingThePortIsTakenOver: an orphan holding a
// service's frontend, found by the first full sync or met by a create
// (0x803b0013) between syncs, is adopted and corrected when it has our
// shape, deleted otherwise, in the same sync and without a retry loop.
func TestALoadBalancerHoldingThePortIsTakenOver(t *testing.T) {
	for _, tc := range []struct {
		name        string
		ports       []uint16
		atStart     bool
		wantCreates int
	}{
		{"an orphan of our shape found at start is adopted and corrected", []uint16{80}, true, 0},
		{"an orphan with more port mappings found at start is replaced", []uint16{80, 81}, true, 1},
		{"an orphan of our shape met by a create is adopted and corrected", []uint16{80}, false, 1},
		{"an orphan with more port mappings met by a create is replaced", []uint16{80, 81}, false, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHost(t, hostOptions{version: hnsFixedModify})
			h.addPod(localPodIP(0))
			h.addPod(localPodIP(1))
			b := h.backend()
			st := stateOf(svc(2, localEP(1)))
			mustSync(t, b, full(st))
			orphan(t, h, tc.ports...)
			h.sim.ResetCalls()
			st, changed := with(st, svc(1, localEP(1)))
			if tc.atStart {
				b = h.backend() // an agent (re)start finds it in its first listing
				mustSync(t, b, full(st))
			} else {
				mustSync(t, b, partial(st, changed)) // no listing: the create conflicts
			}
			if n := h.sim.Calls(hns.OpCreateLoadBalancer); n != tc.wantCreates {
				t.Errorf("%d creates (%v), want %d", n, h.sim.CallCounts(), tc.wantCreates)
			}
			tr := h.trace(hns.FromEndpoint, localPodIP(0), "10.96.0.2", 80)
			if got, want := seen(tr), []string{sourceVIP + " -> " + localPodIP(1) + ":8080"}; !slices.Equal(got, want) {
				t.Errorf("the cluster IP reaches %v, want %v", got, want)
			}
			if lbs := h.loadBalancers(); len(lbs) != 2 {
				t.Errorf("%d load balancers, want svc-1's and svc-2's", len(lbs))
			}
			h.sim.ResetCalls()
			mustSync(t, b, full(st))
			if w := h.sim.Writes(); w != 0 {
				t.Errorf("the next full sync wrote %v", h.sim.CallCounts())
			}
		})
	}
}

// TestHNSRestart (kubernetes issue 139519): while HNS restarts every call
// fails; the syncs fail transiently, nothing is taken for absent, a
// failed feature probe is not kept; afterwards the load balancers HNS
// restored are adopted, not created again (which would fail with 0xb7).
func TestHNSRestart(t *testing.T) {
	var now = time.Unix(1_800_000_000, 0)
	clock := func() time.Time { return now }
	h := newHost(t, hostOptions{mode: config.NetworkModeL2Bridge, version: hnsFixedModify, now: clock})
	for i := range 3 {
		h.addPod(localPodIP(i))
	}
	b := h.backend(withDSR)
	st := stateOf(svc(1, localEP(1)), nodePort(svc(2, localEP(1), podEP(2, 0)), 30002, false))
	mustSync(t, b, full(st))
	before := h.loadBalancers()

	h.sim.SimulateRestart(hns.RestartOptions{Duration: time.Minute})
	fresh := h.backend(withDSR) // an agent started while HNS restarts
	st2, changed := with(st, svc(1, localEP(2)))
	for _, u := range []proxy.Update{partial(st2, changed), full(st2)} {
		if err := b.Sync(ctx, u); !hns.IsTransient(err) {
			t.Errorf("Sync (full: %t) during the restart = %v, want a transient error", u.Full, err)
		}
	}
	if err := fresh.Sync(ctx, full(st2)); !hns.IsTransient(err) {
		t.Errorf("first Sync of an agent started during the restart = %v, want transient", err)
	}
	now = now.Add(2 * time.Minute)
	h.sim.ResetCalls()
	for name, bk := range map[string]*Backend{"running": b, "started during the restart": fresh} {
		if err := bk.Sync(ctx, full(st2)); err != nil {
			t.Fatalf("%s agent after the restart: %v (a failed feature probe must not stick)", name, err)
		}
	}
	if n := h.sim.Calls(hns.OpCreateLoadBalancer); n != 0 {
		t.Errorf("%d load balancers created after the restart, want the restored ones adopted", n)
	}
	after := h.loadBalancers()
	if len(after) != len(before) {
		t.Errorf("%d load balancers after the restart, want %d", len(after), len(before))
	}
	tr := h.trace(hns.FromEndpoint, localPodIP(0), "10.96.0.2", 80)
	if got, want := seen(tr), []string{localPodIP(0) + " -> " + localPodIP(2) + ":8080 dsr"}; !slices.Equal(got, want) {
		t.Errorf("the changed service reaches %v, want %v", got, want)
	}
}

// TestAlreadyExistsAfterARestartIsAdopted: a create HNS answers with
// 0xb7 (the load balancer exists, restored from its backup) is resolved
// by adopting it.
func TestAlreadyExistsAfterARestartIsAdopted(t *testing.T) {
	h := newHost(t, hostOptions{version: hnsFixedModify})
	h.addPod(localPodIP(0))
	h.addPod(localPodIP(1))
	b := h.backend()
	st := stateOf(svc(2, localEP(1)))
	mustSync(t, b, full(st))
	exists := &hns.Error{Op: hns.OpCreateLoadBalancer, Kind: hns.KindAlreadyExists, Code: hns.CodeAlreadyExists}
	h.sim.InjectFault(hns.Fault{Op: hns.OpCreateLoadBalancer, Sequence: []error{exists}, AfterApply: true})
	st, changed := with(st, svc(1, localEP(1)))
	mustSync(t, b, partial(st, changed))
	if n := len(h.loadBalancers()); n != 2 {
		t.Errorf("%d load balancers, want 2", n)
	}
	h.sim.ResetCalls()
	mustSync(t, b, full(st))
	if w := h.sim.Writes(); w != 0 {
		t.Errorf("the adopted load balancer was written again: %v", h.sim.CallCounts())
	}
}

// TestOwnNodeIPBackendHasNoRemoteEndpoint: a hostNetwork pod on this node
// (its address is the node's) gets no remote endpoint; its load balancer
// sends it to the host's endpoint, and on overlay with the source VIP
// (KEP-5100 rule c).
func TestOwnNodeIPBackendHasNoRemoteEndpoint(t *testing.T) {
	for _, tc := range []struct {
		mode    config.NetworkMode
		wantSrc string
	}{
		{config.NetworkModeOverlay, sourceVIP},
		{config.NetworkModeL2Bridge, nodeIP},
	} {
		t.Run(string(tc.mode), func(t *testing.T) {
			h := newHost(t, hostOptions{mode: tc.mode})
			h.addPod(localPodIP(0))
			// What an earlier version made: ours, for this node's address.
			stale, err := h.sim.CreateEndpoint(ctx, remoteSpec{ip: mustAddr(nodeIP), pa: mustAddr(nodeIP)}.endpoint(h.networkID(), ""))
			if err != nil {
				t.Fatal(err)
			}
			b := h.backend()
			mustSync(t, b, full(stateOf(svc(1, ep(nodeIP, 8080, true)))))
			if _, ok := h.remoteEndpoints()[nodeIP]; ok {
				t.Errorf("a remote endpoint for this node's own IP exists (stale one %s not removed?)", stale.ID)
			}
			tr := h.trace(hns.FromEndpoint, localPodIP(0), "10.96.0.2", 80)
			if len(tr.Deliveries) != 1 {
				t.Fatalf("pod -> cluster IP reaches %v, want the host\n%s", seen(tr), tr)
			}
			d := tr.Deliveries[0]
			if d.Target == hns.TargetRemoteEndpoint || d.Packet.Src != tc.wantSrc || d.Packet.DstPort != 8080 {
				t.Errorf("delivery %+v, want the host's endpoint seeing %s on port 8080", d, tc.wantSrc)
			}
			if !strings.EqualFold(d.EndpointID, h.net.Local().SourceVIPEndpointID) && tc.mode == config.NetworkModeOverlay {
				t.Errorf("delivered to %s, want the source-VIP endpoint %s", d.EndpointID, h.net.Local().SourceVIPEndpointID)
			}
		})
	}
}

// TestRemoteEndpointsWaitForTheNodeTable: the proxy's first sync runs
// before the remote node table is filled; a remote pod's endpoint must
// not be created with this node's provider address, and the table's
// arrival (which makes the next sync full) programs it right.
func TestRemoteEndpointsWaitForTheNodeTable(t *testing.T) {
	h := newHost(t, hostOptions{})
	h.addPod(localPodIP(0))
	h.addPod(localPodIP(1))
	table := h.net.Remotes()
	h.net.set(h.net.Local(), nil) // the network part has not read the Nodes yet
	b := h.backend()
	st := stateOf(svc(1, localEP(1), podEP(2, 0)), svc(2, podEP(3, 0)))
	mustSync(t, b, full(st))
	for ip, ep := range h.remoteEndpoints() {
		if providerAddress(ep) == nodeIP && ip != "10.96.0.2" && ip != "10.96.0.3" {
			t.Errorf("remote endpoint %s tunnels to this node (%s) before its node is known", ip, nodeIP)
		}
	}
	if lb := h.lbFor("10.96.0.3", 80); lb != nil {
		t.Errorf("a load balancer for a service whose only backend's node is unknown: %+v", lb)
	}

	h.net.set(h.net.Local(), table) // the table arrives; the agent asks for a sync
	mustSync(t, b, partial(st, nil))
	eps := h.remoteEndpoints()
	for _, ip := range []string{remotePodIP(2, 0), remotePodIP(3, 0)} {
		node := remoteNodeIP(2)
		if ip == remotePodIP(3, 0) {
			node = remoteNodeIP(3)
		}
		if got := providerAddress(eps[ip]); got != node {
			t.Errorf("remote endpoint %s has provider address %q, want %s", ip, got, node)
		}
	}
	tr := h.trace(hns.FromEndpoint, localPodIP(0), "10.96.0.3", 80)
	if got, want := seen(tr), []string{sourceVIP + " -> " + remotePodIP(3, 0) + ":8080 via " + remoteNodeIP(3)}; !slices.Equal(got, want) {
		t.Errorf("svc-2 reaches %v, want %v", got, want)
	}
	diffCanon(t, "after the table arrived", h.canon(), fresh(t, hostOptions{}, st, 2))
}

// TestAffinityTimeoutIsReported: HNS load balancers have no affinity
// timeout, so a timeoutSeconds other than the default is reported where
// unsupported affinity is (event and metric), on both sides of the
// default.
func TestAffinityTimeoutIsReported(t *testing.T) {
	for _, tc := range []struct {
		timeout   time.Duration
		wantEvent bool
	}{
		{DefaultAffinityTimeout, false},
		{DefaultAffinityTimeout - time.Second, true},
		{60 * time.Second, true},
	} {
		t.Run(fmt.Sprintf("timeoutSeconds %d", int(tc.timeout/time.Second)), func(t *testing.T) {
			h := newHost(t, hostOptions{})
			h.addPod(localPodIP(1))
			ev, obs := newEvents(), &observed{}
			b := h.backend(func(o *Options) { o.Recorder, o.Observe = ev, obs.observe })
			sp := svc(1, localEP(1))
			sp.SessionAffinity = tc.timeout
			mustSync(t, b, full(stateOf(sp)))
			if lb := h.lbFor("10.96.0.2", 80); lb == nil || lb.PortMappings[0].DistributionType != hns.DistributionSourceIP {
				t.Fatalf("load balancer %+v, want source-IP affinity", lb)
			}
			evs := ev.drain()
			got := len(evs) == 1 && strings.Contains(evs[0], reasonAffinity) && strings.Contains(evs[0], "timeout")
			if got != tc.wantEvent || (obs.count(OpAffinityUnsupported) == 1) != tc.wantEvent {
				t.Errorf("events %q, %s observed %d times; want an event: %t", evs, OpAffinityUnsupported, obs.count(OpAffinityUnsupported), tc.wantEvent)
			}
		})
	}
}
