package hnslb

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nodenet/nodenet/hns"
	"github.com/nodenet/nodenet/proxy"
)

// richState has one of each kind of frontend and backend.
func richState(h *host) *proxy.State {
	for i := range 3 {
		h.addPod(localPodIP(i))
	}
	lb := svc(3, localEP(1), podEP(3, 0))
	lb.Type = proxy.LoadBalancer
	lb.ExternalIPs = []netip.Addr{netip.MustParseAddr("203.0.113.50")}
	lb.LoadBalancerIPs = []netip.Addr{netip.MustParseAddr("203.0.113.60")}
	nodePort(lb, 30003, true)
	sticky := svc(4, localEP(2), podEP(2, 1))
	sticky.SessionAffinity = time.Hour
	return stateOf(
		svc(1, localEP(1), podEP(2, 0), podEP(3, 0)),
		nodePort(svc(2, localEP(2), podEP(2, 0), ep("203.0.113.80", 8080, false)), 30002, false),
		lb, sticky,
	)
}

// fresh builds st on a new host from nothing: what a host must look like.
func fresh(t *testing.T, o hostOptions, st *proxy.State, pods int, mod ...func(*Options)) []string {
	t.Helper()
	h := newHost(t, o)
	for i := range pods {
		h.addPod(localPodIP(i))
	}
	mustSync(t, h.backend(mod...), full(st))
	return h.canon()
}

func diffCanon(t *testing.T, what string, got, want []string) {
	t.Helper()
	if !slices.Equal(got, want) {
		t.Errorf("%s: HNS holds\n%s\nwant (as built from nothing)\n%s", what, strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func TestRestartOnACorrectNodeMakesZeroWrites(t *testing.T) {
	h := newHost(t, hostOptions{version: hnsFixedModify})
	st := richState(h)
	mustSync(t, h.backend(withDSR), full(st))
	before := h.canon()

	h.sim.ResetCalls()
	b := h.backend(withDSR) // the agent restarted
	mustSync(t, b, full(st))
	if w := h.sim.Writes(); w != 0 {
		t.Errorf("restart made %d writes (%v), want 0", w, h.sim.CallCounts())
	}
	if n := callsOf(h.sim, listOps...); n != 2 {
		t.Errorf("restart listed %d times, want 2 (endpoints, load balancers)", n)
	}
	diffCanon(t, "after restart", h.canon(), before)

	// And it carries on from what it adopted: a change is one update.
	h.sim.ResetCalls()
	st2, changed := with(st, svc(1, localEP(1), podEP(2, 0)))
	mustSync(t, b, partial(st2, changed))
	if got := h.sim.CallCounts(); got[hns.OpUpdateLoadBalancer] != 1 || h.sim.Writes() != 1 {
		t.Errorf("a change after restart cost %v, want one update", got)
	}
}

func TestStartDeletesOnlyStaleObjectsOfOurs(t *testing.T) {
	h := newHost(t, hostOptions{})
	pod := h.addPod(localPodIP(1))
	mk := func(vips []string, port uint16, eps ...string) string {
		lb, err := h.sim.CreateLoadBalancer(ctx, &hns.LoadBalancer{FrontendVIPs: vips, HostComputeEndpoints: eps,
			PortMappings: []hns.PortMapping{{Protocol: hns.ProtocolTCP, InternalPort: 8080, ExternalPort: port}}})
		if err != nil {
			t.Fatal(err)
		}
		return lb.ID
	}
	mkRemote := func(name, ip string) string {
		ep, err := h.sim.CreateEndpoint(ctx, &hns.Endpoint{Name: name, HostComputeNetwork: h.networkID(), Flags: hns.EndpointFlagsRemoteEndpoint,
			IpConfigurations: []hns.IPConfig{{IpAddress: ip}}})
		if err != nil {
			t.Fatal(err)
		}
		return ep.ID
	}
	staleVIP := mk([]string{"10.96.9.9"}, 80, pod) // a deleted service's cluster IP
	staleNodePort := mk(nil, 30999, pod)           // a deleted service's node port
	foreign := mk([]string{"172.16.0.5"}, 80, pod) // not a frontend of ours
	wrong := mk([]string{"10.96.0.2"}, 80, pod)    // ours, with the wrong backends
	staleRemote := mkRemote(RemoteEndpointName(netip.MustParseAddr(remotePodIP(3, 9))), remotePodIP(3, 9))
	foreignRemote := mkRemote("", remotePodIP(4, 9))
	usesOurs := mk([]string{"172.16.0.6"}, 80, mkRemote(RemoteEndpointName(netip.MustParseAddr(remotePodIP(4, 8))), remotePodIP(4, 8)))

	b := h.backend()
	mustSync(t, b, full(stateOf(svc(1, podEP(2, 0)))))

	for _, c := range []struct {
		what, id string
		gone     bool
	}{
		{"stale cluster-IP load balancer", staleVIP, true},
		{"stale node-port load balancer", staleNodePort, true},
		{"someone else's load balancer", foreign, false},
		{"load balancer using our remote endpoint", usesOurs, true},
	} {
		_, err := h.sim.GetLoadBalancer(ctx, c.id)
		if gone := hns.IsNotFound(err); gone != c.gone {
			t.Errorf("%s: deleted %t, want %t", c.what, gone, c.gone)
		}
	}
	for _, c := range []struct {
		what, id string
		gone     bool
	}{
		{"our unused remote endpoint", staleRemote, true},
		{"someone else's remote endpoint", foreignRemote, false},
	} {
		_, err := h.sim.GetEndpointByID(ctx, c.id)
		if gone := hns.IsNotFound(err); gone != c.gone {
			t.Errorf("%s: deleted %t, want %t", c.what, gone, c.gone)
		}
	}
	lb := h.lbFor("10.96.0.2", 80)
	if lb == nil || slices.Contains(lb.HostComputeEndpoints, pod) {
		t.Errorf("the load balancer on our frontend %s was not corrected: %+v", wrong, lb)
	}
}

func TestOutOfBandDeletionsAreRepairedByOneResync(t *testing.T) {
	h := newHost(t, hostOptions{})
	st := richState(h)
	b := h.backend()
	mustSync(t, b, full(st))
	want := h.canon()

	// Someone deletes a load balancer, and another one with its remote
	// endpoint.
	gone := h.lbFor("10.96.0.2", 80)
	if err := h.sim.DeleteLoadBalancer(ctx, gone.ID); err != nil {
		t.Fatal(err)
	}
	np := h.lbFor("", 30002)
	if err := h.sim.DeleteLoadBalancer(ctx, np.ID); err != nil {
		t.Fatal(err)
	}
	outside := h.remoteEndpoints()["203.0.113.80"]
	if err := h.sim.DeleteLoadBalancer(ctx, h.lbFor("10.96.0.3", 80).ID); err != nil {
		t.Fatal(err)
	}
	if err := h.sim.DeleteEndpoint(ctx, outside.ID); err != nil {
		t.Fatal(err)
	}
	h.sim.ResetCalls()
	mustSync(t, b, full(st))
	diffCanon(t, "after one resync", h.canon(), want)
	if w, c := h.sim.Writes(), h.sim.Calls(hns.OpCreateLoadBalancer)+h.sim.Calls(hns.OpCreateEndpoint); w != 4 || c != 4 {
		t.Errorf("repair cost %v, want 3 load balancers and 1 endpoint created", h.sim.CallCounts())
	}
}

func TestAPartialSyncRecreatesALoadBalancerDeletedOutOfBand(t *testing.T) {
	h := newHost(t, hostOptions{})
	h.addPod(localPodIP(1))
	b := h.backend()
	st := stateOf(svc(1, localEP(1)))
	mustSync(t, b, full(st))
	if err := h.sim.DeleteLoadBalancer(ctx, h.lbFor("10.96.0.2", 80).ID); err != nil {
		t.Fatal(err)
	}
	st, changed := with(st, svc(1, localEP(1), podEP(2, 0)))
	mustSync(t, b, partial(st, changed))
	diffCanon(t, "after the partial sync", h.canon(), fresh(t, hostOptions{}, st, 2))
}

func TestEndpointOnlyChange(t *testing.T) {
	for _, tc := range []struct {
		name    string
		version hns.Version
		want    map[hns.Op]int
	}{
		{"is one in-place update per frontend where HNS supports it", hnsFixedModify,
			map[hns.Op]int{hns.OpUpdateLoadBalancer: 2}},
		{"is one in-place update per frontend on HNS 16.0", hns.Version{Major: 16, Minor: 0},
			map[hns.Op]int{hns.OpUpdateLoadBalancer: 2}},
		// HNS 15.4 accepts an update and keeps the old endpoints
		// (kubernetes issue 131466): never updated in place.
		{"is a delete and a create per frontend on HNS 15.4", hnsBrokenModify,
			map[hns.Op]int{hns.OpDeleteLoadBalancer: 2, hns.OpCreateLoadBalancer: 2}},
		{"is a delete and a create per frontend on HNS 15.3", hns.Version{Major: 15, Minor: 3},
			map[hns.Op]int{hns.OpDeleteLoadBalancer: 2, hns.OpCreateLoadBalancer: 2}},
		{"is a delete and a create per frontend on older HNS", hns.Version{Major: 9, Minor: 3},
			map[hns.Op]int{hns.OpDeleteLoadBalancer: 2, hns.OpCreateLoadBalancer: 2}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHost(t, hostOptions{version: tc.version})
			h.addPod(localPodIP(1))
			h.addPod(localPodIP(2))
			b := h.backend()
			st := stateOf(nodePort(svc(1, localEP(1), podEP(2, 0)), 30001, false), svc(2, podEP(2, 0), podEP(3, 0)))
			mustSync(t, b, full(st))

			h.sim.ResetCalls()
			// A ready local pod and a pod another service already uses.
			st2, changed := with(st, nodePort(svc(1, localEP(1), localEP(2), podEP(2, 0), podEP(3, 0)), 30001, false))
			mustSync(t, b, partial(st2, changed))
			if got := h.sim.CallCounts(); !mapsEqual(got, tc.want) {
				t.Errorf("calls %v, want %v (no listing, no endpoint write)", got, tc.want)
			}
			diffCanon(t, "after the change", h.canon(), fresh(t, hostOptions{version: tc.version}, st2, 3))
		})
	}
}

func mapsEqual(a, b map[hns.Op]int) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

func TestANewPodCostsOneEndpointListing(t *testing.T) {
	h := newHost(t, hostOptions{version: hnsFixedModify})
	h.addPod(localPodIP(1))
	b := h.backend()
	st := stateOf(svc(1, localEP(1)))
	mustSync(t, b, full(st))
	h.addPod(localPodIP(2)) // since the last listing
	h.sim.ResetCalls()
	st2, changed := with(st, svc(1, localEP(1), localEP(2)))
	mustSync(t, b, partial(st2, changed))
	if got, want := h.sim.CallCounts(), map[hns.Op]int{hns.OpListEndpoints: 1, hns.OpUpdateLoadBalancer: 1}; !mapsEqual(got, want) {
		t.Errorf("calls %v, want %v", got, want)
	}
}

func TestRefusedInPlaceUpdateFallsBackToDeleteAndCreate(t *testing.T) {
	h := newHost(t, hostOptions{version: hnsFixedModify})
	h.addPod(localPodIP(1))
	b := h.backend()
	st := stateOf(svc(1, localEP(1)))
	mustSync(t, b, full(st))
	h.sim.InjectFault(hns.Fault{Op: hns.OpUpdateLoadBalancer, Every: 1,
		Err: &hns.Error{Op: hns.OpUpdateLoadBalancer, Kind: hns.KindNotSupported, Msg: "E_NOTIMPL"}})

	for i, eps := range [][]proxy.Endpoint{{localEP(1), podEP(2, 0)}, {localEP(1), podEP(2, 1)}} {
		h.sim.ResetCalls()
		var changed map[proxy.ServicePortKey]struct{}
		st, changed = with(st, svc(1, eps...))
		mustSync(t, b, partial(st, changed))
		wantUpdates := 0
		if i == 0 {
			wantUpdates = 1 // tried once, then never again
		}
		if got := h.sim.CallCounts(); got[hns.OpUpdateLoadBalancer] != wantUpdates || got[hns.OpDeleteLoadBalancer] != 1 || got[hns.OpCreateLoadBalancer] != 1 {
			t.Errorf("change %d: calls %v, want %d update, then delete and create", i, got, wantUpdates)
		}
	}
	diffCanon(t, "after the changes", h.canon(), fresh(t, hostOptions{}, st, 2))
}

func TestTransientErrors(t *testing.T) {
	transient := &hns.Error{Kind: hns.KindTransient, Msg: "RPC server unavailable"}
	t.Run("a failed listing fails the sync and is never taken for absence", func(t *testing.T) {
		h := newHost(t, hostOptions{})
		st := richState(h)
		mustSync(t, h.backend(), full(st))
		for _, op := range []hns.Op{hns.OpGetNetworkByID, hns.OpListEndpoints, hns.OpListLoadBalancers} {
			h.sim.ResetCalls()
			h.sim.InjectFault(hns.Fault{Op: op, Sequence: []error{transient}})
			b := h.backend()
			if err := b.Sync(ctx, full(st)); err == nil {
				t.Errorf("%s failed and the sync did not", op)
			}
			if w := h.sim.Writes(); w != 0 {
				t.Errorf("%s failed and the sync wrote %d times: %v", op, w, h.sim.CallCounts())
			}
			mustSync(t, b, full(st))
			if w := h.sim.Writes(); w != 0 {
				t.Errorf("after %s recovered: %d writes, want 0", op, w)
			}
		}
	})
	t.Run("a failed write fails the sync, the rest is done, and the retry finishes", func(t *testing.T) {
		h := newHost(t, hostOptions{})
		st := richState(h)
		b := h.backend()
		h.sim.InjectFault(hns.Fault{Op: hns.OpCreateLoadBalancer, Sequence: []error{nil, transient}})
		if err := b.Sync(ctx, full(st)); err == nil || !hns.IsTransient(err) {
			t.Fatalf("Sync = %v, want the transient error", err)
		}
		if n := len(h.loadBalancers()); n != 7 {
			t.Errorf("%d load balancers after one failed create, want the other 7", n)
		}
		h.sim.ResetCalls()
		mustSync(t, b, proxy.Update{State: st, Full: true})
		if got := h.sim.CallCounts(); got[hns.OpCreateLoadBalancer] != 1 || h.sim.Writes() != 1 {
			t.Errorf("retry cost %v, want the one missing create", got)
		}
		diffCanon(t, "after the retry", h.canon(), fresh(t, hostOptions{}, st, 3))
	})
	t.Run("after a failed partial sync the next one is full", func(t *testing.T) {
		h := newHost(t, hostOptions{version: hnsFixedModify})
		st := richState(h)
		b := h.backend()
		mustSync(t, b, full(st))
		h.sim.InjectFault(hns.Fault{Op: hns.OpUpdateLoadBalancer, Sequence: []error{transient}})
		st2, changed := with(st, svc(1, localEP(1)))
		if err := b.Sync(ctx, partial(st2, changed)); err == nil {
			t.Fatal("partial sync succeeded despite the failed update")
		}
		h.sim.ResetCalls()
		mustSync(t, b, partial(st2, nil)) // the runner would ask for Full; it is full anyway
		if n := h.sim.Calls(hns.OpListLoadBalancers); n != 1 {
			t.Errorf("the sync after a failure listed load balancers %d times, want 1 (a full sync)", n)
		}
		diffCanon(t, "after the retry", h.canon(), fresh(t, hostOptions{}, st2, 3))
	})
}

func TestAlreadyExists(t *testing.T) {
	t.Run("a create whose answer was lost is adopted by the next sync", func(t *testing.T) {
		h := newHost(t, hostOptions{})
		st := richState(h)
		b := h.backend()
		h.sim.InjectFault(hns.Fault{Writes: true, Every: 3, AfterApply: true})
		if err := b.Sync(ctx, full(st)); err == nil {
			t.Fatal("no error reported")
		}
		h.sim.ClearFaults()
		mustSync(t, b, full(st))
		diffCanon(t, "after the retry", h.canon(), fresh(t, hostOptions{}, st, 3))
	})
	t.Run("a load balancer already on the frontend is adopted when right and replaced when not", func(t *testing.T) {
		h := newHost(t, hostOptions{version: hnsFixedModify})
		h.addPod(localPodIP(1))
		b := h.backend()
		st := stateOf(svc(1, localEP(1)))
		mustSync(t, b, full(st))
		// Someone (a previous agent, a lost answer) made svc-2's and
		// svc-3's load balancers: svc-2's right, svc-3's wrong.
		right := hnsLB(frontend{vip: netip.MustParseAddr("10.96.0.3"), proto: hns.ProtocolTCP, port: 80},
			&lbSpec{targetPort: 8080, sourceVIP: netip.MustParseAddr(sourceVIP)}, []string{b.eps.local[netip.MustParseAddr(localPodIP(1))]})
		wrong := *right
		wrong.FrontendVIPs, wrong.SourceVIP = []string{"10.96.0.4"}, nodeIP
		for _, lb := range []*hns.LoadBalancer{right, &wrong} {
			if _, err := h.sim.CreateLoadBalancer(ctx, lb); err != nil {
				t.Fatal(err)
			}
		}
		h.sim.ResetCalls()
		st2, changed := with(st, svc(2, localEP(1)), svc(3, localEP(1)))
		mustSync(t, b, partial(st2, changed))
		if got := h.sim.CallCounts(); got[hns.OpCreateLoadBalancer] != 2 || got[hns.OpUpdateLoadBalancer] != 1 || got[hns.OpListLoadBalancers] != 1 {
			t.Errorf("calls %v, want 2 tried creates, 1 listing, 1 update (svc-3's)", got)
		}
		diffCanon(t, "after the sync", h.canon(), fresh(t, hostOptions{}, st2, 2))
	})
	t.Run("a remote endpoint already there is adopted", func(t *testing.T) {
		h := newHost(t, hostOptions{})
		b := h.backend()
		st := stateOf(svc(1, podEP(2, 0)))
		mustSync(t, b, full(st))
		want := remoteSpec{ip: netip.MustParseAddr(remotePodIP(3, 0)), pa: netip.MustParseAddr(remoteNodeIP(3))}
		existing, err := h.sim.CreateEndpoint(ctx, want.endpoint(h.networkID(), ""))
		if err != nil {
			t.Fatal(err)
		}
		st2, changed := with(st, svc(1, podEP(2, 0), podEP(3, 0)))
		mustSync(t, b, partial(st2, changed))
		if lb := h.lbFor("10.96.0.2", 80); lb == nil || !slices.Contains(lb.HostComputeEndpoints, existing.ID) {
			t.Errorf("load balancer %+v does not use the existing endpoint %s", lb, existing.ID)
		}
		diffCanon(t, "after the sync", h.canon(), fresh(t, hostOptions{}, st2, 0))
	})
}

func TestZeroEndpointsAndBackLeavesNoOrphan(t *testing.T) {
	h := newHost(t, hostOptions{})
	h.addPod(localPodIP(1))
	b := h.backend()
	with3 := nodePort(svc(1, localEP(1), podEP(2, 0), podEP(3, 0)), 30001, false)
	st := stateOf(with3, svc(2, podEP(4, 0)))
	mustSync(t, b, full(st))
	want := h.canon()

	st, changed := with(st, nodePort(svc(1), 30001, false))
	mustSync(t, b, partial(st, changed))
	if h.lbFor("10.96.0.2", 80) != nil || h.lbFor("", 30001) != nil {
		t.Errorf("load balancers left for a service without endpoints:\n%s", h.sim.Dump())
	}
	for _, ip := range []string{remotePodIP(2, 0), remotePodIP(3, 0), "10.96.0.2"} {
		if _, ok := h.remoteEndpoints()[ip]; ok {
			t.Errorf("remote endpoint %s left for a service without endpoints", ip)
		}
	}
	st, changed = with(st, with3)
	mustSync(t, b, partial(st, changed))
	diffCanon(t, "after the endpoints came back", h.canon(), want)
}

func TestSimulatedHNSRestartConvergesWithoutLeaks(t *testing.T) {
	var mu sync.Mutex
	now := time.Unix(1_700_000_000, 0)
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	advance := func(d time.Duration) { mu.Lock(); now = now.Add(d); mu.Unlock() }
	o := hostOptions{now: clock}
	h := newHost(t, o)
	st := richState(h)
	b := h.backend()
	mustSync(t, b, full(st))
	oldNetwork := h.networkID()

	h.sim.SimulateRestart(hns.RestartOptions{Duration: time.Minute})
	h.sim.ResetCalls()
	if err := b.Sync(ctx, full(st)); err == nil || !hns.IsTransient(err) {
		t.Fatalf("Sync during the restart = %v, want a transient error", err)
	}
	if n := h.sim.Calls(hns.OpCreateLoadBalancer) + h.sim.Calls(hns.OpDeleteLoadBalancer); n != 0 {
		t.Errorf("%d load balancer writes while HNS could not even be read", n)
	}
	advance(2 * time.Minute)
	// The network was non-persistent: gone with its endpoints and load
	// balancers. The network part and CNI rebuild theirs.
	h.ensureNetwork()
	for i := range 3 {
		h.addPod(localPodIP(i))
	}
	if h.networkID() == oldNetwork {
		t.Fatalf("the network survived the restart")
	}
	var err error
	for range 5 {
		if err = b.Sync(ctx, full(st)); err == nil {
			break
		}
	}
	if err != nil {
		t.Fatalf("no convergence: %v", err)
	}
	diffCanon(t, "after the restart", h.canon(), fresh(t, o, st, 3))
	for _, ep := range h.endpoints() {
		if !strings.EqualFold(ep.HostComputeNetwork, h.networkID()) {
			t.Errorf("endpoint %s is on the old network", ep.ID)
		}
	}
}

func TestInjectedWriteErrorsConvergeWithoutLeaks(t *testing.T) {
	for _, tc := range []struct {
		afterApply bool
		seed       int64
	}{{false, 1}, {true, 2}, {false, 3}, {true, 4}} {
		afterApply := tc.afterApply
		t.Run(fmt.Sprintf("errors after HNS applied the write: %t, seed %d", afterApply, tc.seed), func(t *testing.T) {
			h := newHost(t, hostOptions{remotes: 6, seed: tc.seed})
			b := h.backend(withDSR)
			for i := range 8 {
				h.addPod(localPodIP(i))
			}
			round := func(gen int) *proxy.State {
				var sps []*proxy.ServicePort
				for n := range 40 {
					var eps []proxy.Endpoint
					for k := range 4 {
						if (n+k+gen)%5 == 0 {
							continue
						}
						eps = append(eps, podEP(2+(n+k)%6, (n*k+gen)%7))
					}
					if (n+gen)%3 == 0 {
						eps = append(eps, localEP((n+gen)%8))
					}
					sp := svc(n, eps...)
					if n%4 == 0 {
						nodePort(sp, uint16(30000+n), n%8 == 0)
					}
					sps = append(sps, sp)
				}
				return stateOf(sps...)
			}
			h.sim.InjectFault(hns.Fault{Writes: true, Rate: 0.1, AfterApply: afterApply})
			var prev *proxy.State
			var last *proxy.State
			for gen := range 4 {
				st := round(gen)
				u := proxy.Update{State: st, Full: prev == nil}
				if prev != nil {
					u.Changed = map[proxy.ServicePortKey]struct{}{}
					for k, sp := range st.ServicePorts {
						if p := prev.ServicePorts[k]; p == nil || !p.Equal(sp) {
							u.Changed[k] = struct{}{}
						}
					}
				}
				var err error
				for range 30 {
					if err = b.Sync(ctx, u); err == nil {
						break
					}
					u.Full = true // what the runner does after a failure
				}
				if err != nil {
					t.Fatalf("generation %d did not converge: %v", gen, err)
				}
				prev, last = st, st
			}
			h.sim.ClearFaults()
			diffCanon(t, "after converging", h.canon(), fresh(t, hostOptions{remotes: 6}, last, 8, withDSR))
		})
	}
}
