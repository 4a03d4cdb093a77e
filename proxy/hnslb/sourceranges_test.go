package hnslb

import (
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/nodenet/nodenet/hns"
	"github.com/nodenet/nodenet/proxy"
)

// lbWithRanges is a LoadBalancer service with one ingress IP, a local
// backend and the given loadBalancerSourceRanges.
func lbWithRanges(ranges ...string) *proxy.ServicePort {
	sp := svc(1, localEP(1))
	sp.Type = proxy.LoadBalancer
	sp.LoadBalancerIPs = []netip.Addr{mustAddr("203.0.113.60")}
	for _, r := range ranges {
		sp.LoadBalancerSourceRanges = append(sp.LoadBalancerSourceRanges, netip.MustParsePrefix(r))
	}
	setEndpoints(sp, sp.ClusterEndpoints...)
	return sp
}

// TestSourceRangesAreReportedNotEnforced: no HNS version can limit a load
// balancer frontend to loadBalancerSourceRanges (see the package doc), so
// on every modelled release a port with ranges gets a warning event and
// one metric count, and its load balancers are programmed unchanged: a
// client outside the ranges still reaches the backend through the
// load-balancer IP, which the event says. Ports without ranges, or
// without load-balancer IPs, get neither.
func TestSourceRangesAreReportedNotEnforced(t *testing.T) {
	const inRange, outside = "198.51.100.7", client
	for _, rel := range hns.Releases {
		for _, tc := range []struct {
			name      string
			sp        *proxy.ServicePort
			wantEvent bool
		}{
			{"ranges on an ingress IP", lbWithRanges("198.51.100.0/24"), true},
			{"no ranges", lbWithRanges(), false},
			{"ranges but no ingress IP yet", func() *proxy.ServicePort {
				sp := lbWithRanges("198.51.100.0/24")
				sp.LoadBalancerIPs = nil
				return sp
			}(), false},
		} {
			t.Run(rel.Name+"/"+tc.name, func(t *testing.T) {
				h := newHost(t, hostOptions{version: rel.Version})
				h.addPod(localPodIP(1))
				ev, obs := newEvents(), &observed{}
				b := h.backend(func(o *Options) { o.Recorder, o.Observe = ev, obs.observe })
				mustSync(t, b, full(stateOf(tc.sp)))

				got := ev.drain()
				hasEvent := len(got) == 1 && strings.Contains(got[0], reasonSourceRanges) &&
					strings.Contains(got[0], "198.51.100.0/24") && strings.Contains(got[0], "203.0.113.60")
				if hasEvent != tc.wantEvent || len(got) > 1 {
					t.Errorf("events = %q, want one %s event: %t", got, reasonSourceRanges, tc.wantEvent)
				}
				if n := obs.count(OpSourceRangesUnsupported); (n == 1) != tc.wantEvent || n > 1 {
					t.Errorf("%s observed %d times, want an observation: %t", OpSourceRangesUnsupported, n, tc.wantEvent)
				}
				if len(tc.sp.LoadBalancerIPs) == 0 {
					return
				}
				// Unchanged behaviour, as the event says: both clients reach
				// the backend.
				for _, src := range []string{inRange, outside} {
					tr := h.trace(hns.FromExternal, src, "203.0.113.60", 80)
					if b := tr.Backends(); len(b) != 1 {
						t.Errorf("%s -> 203.0.113.60:80 reaches %v, want the backend\n%s", src, seen(tr), tr)
					}
				}
				mustSync(t, b, full(stateOf(tc.sp)))
				if got := ev.drain(); len(got) != 0 || obs.count(OpSourceRangesUnsupported) > 1 {
					t.Errorf("a full resync reported again: events %q, count %d", got, obs.count(OpSourceRangesUnsupported))
				}
			})
		}
	}
}

// TestSourceRangesChangeIsReportedAgain: a port whose ranges change gets
// a new event naming the new ranges; one whose ranges are removed is no
// longer reported.
func TestSourceRangesChangeIsReportedAgain(t *testing.T) {
	h := newHost(t, hostOptions{})
	h.addPod(localPodIP(1))
	ev, obs := newEvents(), &observed{}
	b := h.backend(func(o *Options) { o.Recorder, o.Observe = ev, obs.observe })
	steps := []struct {
		ranges    []string
		wantEvent string // "" for none
	}{
		{[]string{"198.51.100.0/24"}, "198.51.100.0/24"},
		{[]string{"198.51.100.0/24", "192.0.2.0/24"}, "192.0.2.0/24"},
		{nil, ""},
		{[]string{"192.0.2.0/24"}, "192.0.2.0/24"},
	}
	for i, s := range steps {
		mustSync(t, b, full(stateOf(lbWithRanges(s.ranges...))))
		got := ev.drain()
		if s.wantEvent == "" {
			if len(got) != 0 {
				t.Errorf("step %d: events %q, want none", i, got)
			}
			continue
		}
		if len(got) != 1 || !strings.Contains(got[0], s.wantEvent) {
			t.Errorf("step %d: events %q, want one naming %s", i, got, s.wantEvent)
		}
	}
	if n := obs.count(OpSourceRangesUnsupported); n != 3 {
		t.Errorf("%s observed %d times, want 3", OpSourceRangesUnsupported, n)
	}
	if lbs := h.loadBalancers(); !slices.ContainsFunc(lbs, func(lb hns.LoadBalancer) bool {
		return slices.Contains(lb.FrontendVIPs, "203.0.113.60")
	}) {
		t.Errorf("no load balancer for the ingress IP:\n%s", h.sim.Dump())
	}
}
