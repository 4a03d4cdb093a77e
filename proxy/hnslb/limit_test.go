package hnslb

import (
	"slices"
	"strings"
	"testing"

	"github.com/nodenet/nodenet/hns"
	"github.com/nodenet/nodenet/proxy"
)

func TestBackendLimit(t *testing.T) {
	for _, tc := range []struct {
		name    string
		version hns.Version // its build sets the host's limit
		limit   int
		want    int
	}{
		{"the host's limit (64 on Windows Server 2019 before 17763.2746) keeps ready and local endpoints first", hns.VersionWS2019, 0, 64},
		{"a configured limit is honored", hns.Version{}, 10, 10},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHost(t, hostOptions{version: tc.version})
			var eps []proxy.Endpoint
			var locals []string
			for i := range 5 {
				h.addPod(localPodIP(i))
				locals = append(locals, localPodIP(i))
				eps = append(eps, localEP(i))
			}
			for j := range 60 {
				eps = append(eps, podEP(2+j%3, j/3))
			}
			for j := range 5 { // terminating fallbacks: serving, not ready
				e := podEP(2, 100+j)
				e.Ready, e.Terminating = false, true
				eps = append(eps, e)
			}
			ev, obs := newEvents(), &observed{}
			b := h.backend(func(o *Options) { o.MaxBackendsPerLoadBalancer, o.Recorder, o.Observe = tc.limit, ev, obs.observe })
			mustSync(t, b, full(stateOf(svc(1, eps...))))

			lb := h.lbFor("10.96.0.2", 80)
			if lb == nil {
				t.Fatalf("no load balancer (HNS refused it?):\n%s", h.sim.Dump())
			}
			if n := len(lb.HostComputeEndpoints); n != tc.want {
				t.Errorf("%d backends, want %d", n, tc.want)
			}
			got := map[string]bool{}
			for _, d := range h.trace(hns.FromEndpoint, localPodIP(0), "10.96.0.2", 80).Deliveries {
				got[d.Packet.Dst] = true
			}
			for i, ip := range locals {
				if i < tc.want && !got[ip] {
					t.Errorf("local endpoint %s left out", ip)
				}
			}
			for j := range 5 {
				if got[remotePodIP(2, 100+j)] {
					t.Errorf("not-ready endpoint %s kept over ready ones", remotePodIP(2, 100+j))
				}
			}
			if evs := ev.drain(); len(evs) != 1 || !strings.Contains(evs[0], reasonBackendLimit) {
				t.Errorf("events = %q, want one %s", evs, reasonBackendLimit)
			}
			if obs.count(OpBackendLimit) != 1 {
				t.Errorf("%s observed %d times, want 1", OpBackendLimit, obs.count(OpBackendLimit))
			}
			if n := len(h.remoteEndpoints()); n != tc.want-5+1 {
				t.Errorf("%d remote endpoints, want only the programmed backends' and the cluster IP's (%d)", n, tc.want-5+1)
			}
		})
	}
}

func TestEndpointsWithAnotherTargetPortAreLeftOutWithAnEvent(t *testing.T) {
	h := newHost(t, hostOptions{})
	h.addPod(localPodIP(0))
	h.addPod(localPodIP(1))
	ev := newEvents()
	b := h.backend(func(o *Options) { o.Recorder = ev })
	other := podEP(2, 0)
	other.Port = 9090
	mustSync(t, b, full(stateOf(svc(1, localEP(1), other))))

	tr := h.trace(hns.FromEndpoint, localPodIP(0), "10.96.0.2", 80)
	if got, want := seen(tr), []string{sourceVIP + " -> " + localPodIP(1) + ":8080"}; !slices.Equal(got, want) {
		t.Errorf("pod -> cluster IP reaches %v, want %v", got, want)
	}
	if evs := ev.drain(); len(evs) != 1 || !strings.Contains(evs[0], reasonMixedPorts) {
		t.Errorf("events = %q, want one %s", evs, reasonMixedPorts)
	}
}

// Unset, the limit follows the host's build (hns.MaxBackendsPerLoadBalancer):
// 64 on Windows Server 2019 before 17763.2746, 1024 from that build on.
func TestBackendLimitFollowsTheHostBuild(t *testing.T) {
	for _, tc := range []struct {
		name  string
		build hns.OSBuild
		want  int
	}{
		{"is 64 on 17763.2745", hns.OSBuild{Number: 17763, Revision: 2745}, 64},
		{"is 1024 on 17763.2746", hns.BuildWS2019BackendFix, 1024},
		{"is 1024 on Windows Server 2025", hns.BuildWS2025, 1024},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sim := hns.NewSimulator(hns.SimulatorOptions{Version: hns.VersionWS2019, OSBuild: tc.build})
			b, err := New(Options{HNS: sim, Network: &testNetwork{}})
			if err != nil {
				t.Fatal(err)
			}
			if b.opts.MaxBackendsPerLoadBalancer != tc.want {
				t.Errorf("limit %d, want %d", b.opts.MaxBackendsPerLoadBalancer, tc.want)
			}
		})
	}
}
