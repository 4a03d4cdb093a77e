package hnslb

// The version matrix: the proxy's key scenarios on a simulated host of
// every Windows Server release hns models (hns.Releases: 2019 as shipped
// and patched, 2022, 2025 on 15.4 and patched), asserting which HNS
// features nodenet uses on each (in-place update, DSR, session affinity,
// dual-stack, the backend limit) and that the packet traces are right on
// all. Addresses: fixture_test.go's plan; the service is 10.96.0.2:80,
// its node port 30001.

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

// matrixRow is a modelled release and what nodenet must use on it, written
// out here rather than derived from hns.FeaturesFor, so a change of the
// version table shows up as a failing row.
type matrixRow struct {
	release     hns.Release
	inPlace     bool // endpoint changes update load balancers in place
	dsr         bool
	affinity    bool // session affinity ClientIP
	dualStack   bool
	maxBackends int
}

func versionMatrix(t *testing.T) []matrixRow {
	t.Helper()
	byVersion := func(v hns.Version) hns.Release {
		for _, r := range hns.Releases {
			if r.Version == v {
				return r
			}
		}
		t.Fatalf("no modelled release has HNS %s", v)
		return hns.Release{}
	}
	rows := []matrixRow{
		{release: byVersion(hns.Version{Major: 9, Minor: 3}), dsr: true, maxBackends: 64},
		{release: byVersion(hns.Version{Major: 9, Minor: 5}), dsr: true, maxBackends: 1024},
		{release: byVersion(hns.VersionWS2022), dsr: true, affinity: true, dualStack: true, maxBackends: 1024},
		{release: byVersion(hns.Version{Major: 15, Minor: 4}), dsr: true, affinity: true, dualStack: true, maxBackends: 1024},
		{release: byVersion(hns.Version{Major: 15, Minor: 5}), inPlace: true, dsr: true, affinity: true, dualStack: true, maxBackends: 1024},
	}
	if len(rows) != len(hns.Releases) {
		t.Fatalf("the matrix has %d rows, hns models %d releases", len(rows), len(hns.Releases))
	}
	return rows
}

func (r matrixRow) name() string { return r.release.Name + " (HNS " + r.release.Version.String() + ")" }

// host is an overlay host of the row's release with local pods 0..pods-1.
func (r matrixRow) host(t *testing.T, pods int) *host {
	h := newHost(t, hostOptions{version: r.release.Version})
	for i := range pods {
		h.addPod(localPodIP(i))
	}
	return h
}

func TestVersionMatrixFeatures(t *testing.T) {
	for _, row := range versionMatrix(t) {
		t.Run(row.name(), func(t *testing.T) {
			f := hns.FeaturesFor(row.release.Version)
			got := matrixRow{release: row.release, inPlace: f.ModifyLoadbalancer, dsr: f.DSR, affinity: f.SessionAffinity,
				dualStack: f.IPv6DualStack, maxBackends: hns.MaxBackendsPerLoadBalancer(row.release.Build)}
			if got != row {
				t.Errorf("HNS %s on build %s gives %+v, want %+v", row.release.Version, row.release.Build, got, row)
			}
		})
	}
}

// The same services trace the same on every release: DSR from a pod to
// the cluster IP (the remote backend through the overlay) and to an eTP
// Local node port from outside, the client's address kept.
func TestVersionMatrixTraces(t *testing.T) {
	for _, row := range versionMatrix(t) {
		t.Run(row.name(), func(t *testing.T) {
			h := row.host(t, 2)
			mustSync(t, h.backend(withDSR), full(stateOf(nodePort(svc(1, localEP(1), podEP(2, 0)), 30001, true))))

			for _, c := range []struct {
				from     hns.Entry
				src, dst string
				port     uint16
				want     []string
			}{
				{hns.FromEndpoint, localPodIP(0), "10.96.0.2", 80, []string{
					localPodIP(0) + " -> " + localPodIP(1) + ":8080 dsr",
					localPodIP(0) + " -> " + remotePodIP(2, 0) + ":8080 dsr via " + remoteNodeIP(2),
				}},
				{hns.FromExternal, client, nodeIP, 30001, []string{client + " -> " + localPodIP(1) + ":8080 dsr"}},
			} {
				tr := h.trace(c.from, c.src, c.dst, c.port)
				if got := seen(tr); !slices.Equal(got, c.want) {
					t.Errorf("%s %s -> %s:%d reaches %v, want %v\n%s", c.from, c.src, c.dst, c.port, got, c.want, tr)
				}
			}
			for _, lb := range h.loadBalancers() {
				if lb.Flags&hns.LoadBalancerFlagsDSR == 0 {
					t.Errorf("load balancer %v:%d without DSR", lb.FrontendVIPs, lb.PortMappings[0].ExternalPort)
				}
			}
		})
	}
}

// An endpoint change is an in-place update only where hnslib's range has
// it (15.5 on); everywhere else, 15.4 included, a delete and a create.
// The trace after the change proves the new backends are programmed: on
// 15.4 an in-place update would have left the old ones (kubernetes issue
// 131466).
func TestVersionMatrixEndpointChange(t *testing.T) {
	for _, row := range versionMatrix(t) {
		t.Run(row.name(), func(t *testing.T) {
			h := row.host(t, 3)
			b := h.backend(withDSR)
			st := stateOf(svc(1, localEP(1)))
			mustSync(t, b, full(st))

			h.sim.ResetCalls()
			st, changed := with(st, svc(1, localEP(2), podEP(3, 0)))
			mustSync(t, b, partial(st, changed))
			want := map[hns.Op]int{hns.OpDeleteLoadBalancer: 1, hns.OpCreateLoadBalancer: 1}
			if row.inPlace {
				want = map[hns.Op]int{hns.OpUpdateLoadBalancer: 1}
			}
			for _, op := range []hns.Op{hns.OpUpdateLoadBalancer, hns.OpDeleteLoadBalancer, hns.OpCreateLoadBalancer} {
				if got := h.sim.Calls(op); got != want[op] {
					t.Errorf("%s called %d times, want %d (all calls %v)", op, got, want[op], h.sim.CallCounts())
				}
			}
			tr := h.trace(hns.FromEndpoint, localPodIP(0), "10.96.0.2", 80)
			wantSeen := []string{
				localPodIP(0) + " -> " + localPodIP(2) + ":8080 dsr",
				localPodIP(0) + " -> " + remotePodIP(3, 0) + ":8080 dsr via " + remoteNodeIP(3),
			}
			if got := seen(tr); !slices.Equal(got, wantSeen) {
				t.Errorf("after the change the cluster IP reaches %v, want %v\n%s", got, wantSeen, tr)
			}
		})
	}
}

// Session affinity ClientIP pins a client to one backend where HNS has it
// (12.0 on); elsewhere the service is spread, with an event.
func TestVersionMatrixSessionAffinity(t *testing.T) {
	for _, row := range versionMatrix(t) {
		t.Run(row.name(), func(t *testing.T) {
			h := row.host(t, 3)
			ev := newEvents()
			b := h.backend(func(o *Options) { o.Recorder = ev })
			sp := svc(1, localEP(1), localEP(2))
			sp.SessionAffinity = 3 * time.Hour
			mustSync(t, b, full(stateOf(sp)))

			wantDist, wantReached := hns.DistributionNone, 2
			if row.affinity {
				wantDist, wantReached = hns.DistributionSourceIP, 1
			}
			lb := h.lbFor("10.96.0.2", 80)
			if lb == nil || lb.PortMappings[0].DistributionType != wantDist {
				t.Fatalf("load balancer %+v, want distribution %d", lb, wantDist)
			}
			if tr := h.trace(hns.FromEndpoint, localPodIP(0), "10.96.0.2", 80); len(tr.Deliveries) != wantReached {
				t.Errorf("a client reaches %v, want %d backends\n%s", seen(tr), wantReached, tr)
			}
			evs := ev.drain()
			hasEvent := slices.ContainsFunc(evs, func(e string) bool {
				return strings.Contains(e, reasonAffinity) && strings.Contains(e, "HNS ≥ 12.0")
			})
			if hasEvent == row.affinity {
				t.Errorf("events %q: an affinity event naming HNS ≥ 12.0 is wanted only where HNS lacks affinity", evs)
			}
		})
	}
}

// Dual-stack (l2bridge): where HNS has IPv6 (11.10 on) an IPv6 service
// gets its own IPv6 load balancer and traces to the pod's IPv6 address;
// where it has not, the proxy serves IPv4 only and programs nothing IPv6
// (the network part cannot make an IPv6 subnet there: see
// overlay/hnsnet's matrix).
func TestVersionMatrixDualStack(t *testing.T) {
	for _, row := range versionMatrix(t) {
		t.Run(row.name(), func(t *testing.T) {
			h := newHost(t, hostOptions{mode: config.NetworkModeL2Bridge, dualStack: row.dualStack, version: row.release.Version})
			if !row.dualStack {
				// The node has an IPv6 address; HNS cannot use it.
				local := *h.net.Local()
				local.NodeIPv6 = netip.MustParseAddr(nodeIPv6)
				h.net.set(&local, h.net.Remotes())
			}
			h.addPod(localPodIP(1))
			v4 := svc(1, localEP(1))
			v6 := svc(1, ep(v6Of(localPodIP(1)), 8080, true))
			v6.Key.Family, v6.ClusterIP = proxy.IPv6, netip.MustParseAddr("fd00:96::2")
			mustSync(t, h.backend(), full(stateOf(v4, v6)))

			if tr := h.trace(hns.FromHost, nodeIP, "10.96.0.2", 80); !slices.Equal(seen(tr), []string{nodeIP + " -> " + localPodIP(1) + ":8080"}) {
				t.Errorf("IPv4 cluster IP reaches %v\n%s", seen(tr), tr)
			}
			lb6 := h.lbFor("fd00:96::2", 80)
			if !row.dualStack {
				if lb6 != nil {
					t.Errorf("an IPv6 load balancer on an HNS without IPv6: %+v", lb6)
				}
				return
			}
			if lb6 == nil || lb6.Flags&hns.LoadBalancerFlagsIPv6 == 0 {
				t.Fatalf("IPv6 load balancer %+v, want one with the IPv6 flag", lb6)
			}
			want := []string{nodeIPv6 + " -> " + v6Of(localPodIP(1)) + ":8080"}
			if tr := h.trace(hns.FromHost, nodeIPv6, "fd00:96::2", 80); !slices.Equal(seen(tr), want) {
				t.Errorf("IPv6 cluster IP reaches %v, want %v\n%s", seen(tr), want, tr)
			}
		})
	}
}

// The backend limit follows the release's build: 70 ready endpoints are
// cut to 64 on Windows Server 2019 before 17763.2746 and programmed whole
// on every later host.
func TestVersionMatrixBackendLimit(t *testing.T) {
	for _, row := range versionMatrix(t) {
		t.Run(row.name(), func(t *testing.T) {
			h := row.host(t, 0)
			var eps []proxy.Endpoint
			for j := range 70 {
				eps = append(eps, podEP(2+j%3, j/3))
			}
			ev := newEvents()
			mustSync(t, h.backend(func(o *Options) { o.Recorder = ev }), full(stateOf(svc(1, eps...))))
			want := min(70, row.maxBackends)
			lb := h.lbFor("10.96.0.2", 80)
			if lb == nil || len(lb.HostComputeEndpoints) != want {
				t.Fatalf("load balancer %v, want %d backends", lb, want)
			}
			cut := slices.ContainsFunc(ev.drain(), func(e string) bool { return strings.Contains(e, reasonBackendLimit) })
			if cut != (want < 70) {
				t.Errorf("a %s event: %v, want %v", reasonBackendLimit, cut, want < 70)
			}
		})
	}
}
