package hnslb

import (
	"testing"
	"time"

	"github.com/nodenet/nodenet/hns"
	"github.com/nodenet/nodenet/proxy"
)

// The size of kubernetes PR 109124's measurement: 2,000 ClusterIP services
// on a node with ~5,000 remote endpoints and 15 local pods, where
// kube-proxy winkernel took 10 minutes on Windows Server 2022 (1 minute
// with the OS update that shipped later).
const (
	benchServices    = 2000
	benchRemoteNodes = 50
	benchPodsPerNode = 100 // 50 × 100 = 5,000 remote pods
	benchLocalPods   = 15
	benchEPsPerSvc   = 5
)

// hnsCallLatency is a realistic per-call HNS latency: PR 109124's
// patched Windows Server 2022 created that workload's ~9,000 objects
// (2,000 load balancers, 5,000 remote endpoints, 2,000 cluster-IP
// endpoints) in 1 minute, about 6.7 ms a call; before the OS update it
// took 10 minutes, about 67 ms a call.
const hnsCallLatency = 7 * time.Millisecond

func benchState() *proxy.State {
	sps := make([]*proxy.ServicePort, 0, benchServices)
	remote := benchRemoteNodes * benchPodsPerNode
	for s := range benchServices {
		var eps []proxy.Endpoint
		for k := range benchEPsPerSvc {
			i := (s*benchEPsPerSvc + k) % remote
			eps = append(eps, podEP(2+i/benchPodsPerNode, i%benchPodsPerNode))
		}
		if s%3 == 0 {
			eps = append(eps, localEP(s%benchLocalPods))
		}
		sps = append(sps, svc(s, eps...))
	}
	return stateOf(sps...)
}

func benchHost(b *testing.B) *host {
	h := newHost(b, hostOptions{remotes: benchRemoteNodes})
	for i := range benchLocalPods {
		h.addPod(localPodIP(i))
	}
	h.sim.ResetCalls()
	return h
}

func benchBackend(h *host) *Backend { return h.backend() }

func reportCalls(b *testing.B, sim *hns.Simulator, n int) {
	per := func(ops ...hns.Op) float64 { return float64(callsOf(sim, ops...)) / float64(n) }
	total := 0
	for _, c := range sim.CallCounts() {
		total += c
	}
	b.ReportMetric(float64(total)/float64(n), "hns-calls/op")
	b.ReportMetric(float64(sim.Writes())/float64(n), "hns-writes/op")
	b.ReportMetric(per(hns.OpCreateLoadBalancer), "lb-creates/op")
	b.ReportMetric(per(hns.OpUpdateLoadBalancer), "lb-updates/op")
	b.ReportMetric(per(hns.OpCreateEndpoint), "ep-creates/op")
	b.ReportMetric(per(listOps...), "lists/op")
}

func coldSync(b *testing.B, latency time.Duration) {
	st := benchState()
	calls := map[hns.Op]int{}
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		b.StopTimer()
		h := benchHost(b)
		h.sim.SetLatency("", latency)
		be := benchBackend(h)
		b.StartTimer()
		mustSync(b, be, full(st))
		b.StopTimer()
		for op, n := range h.sim.CallCounts() {
			calls[op] += n
		}
		b.StartTimer()
	}
	reportCallsFrom(b, calls)
}

// reportCallsFrom reports summed call counts over b.N iterations.
func reportCallsFrom(b *testing.B, calls map[hns.Op]int) {
	n := float64(b.N)
	total, writes := 0, 0
	for op, c := range calls {
		total += c
		if op.IsWrite() {
			writes += c
		}
	}
	b.ReportMetric(float64(total)/n, "hns-calls/op")
	b.ReportMetric(float64(writes)/n, "hns-writes/op")
	b.ReportMetric(float64(calls[hns.OpCreateLoadBalancer])/n, "lb-creates/op")
	b.ReportMetric(float64(calls[hns.OpCreateEndpoint])/n, "ep-creates/op")
	b.ReportMetric(float64(calls[hns.OpListEndpoints]+calls[hns.OpListLoadBalancers])/n, "lists/op")
}

// BenchmarkColdSync2000Services5000RemoteEndpoints is the first sync on
// a node with nothing programmed.
func BenchmarkColdSync2000Services5000RemoteEndpoints(b *testing.B) { coldSync(b, 0) }

// BenchmarkColdSync2000Services5000RemoteEndpointsWithHNSLatency adds
// hnsCallLatency to every HNS call: the projected wall time on Windows.
func BenchmarkColdSync2000Services5000RemoteEndpointsWithHNSLatency(b *testing.B) {
	coldSync(b, hnsCallLatency)
}

func restart(b *testing.B, latency time.Duration) {
	st := benchState()
	h := benchHost(b)
	mustSync(b, benchBackend(h), full(st))
	h.sim.SetLatency("", latency)
	h.sim.ResetCalls()
	b.ReportAllocs()
	for b.Loop() {
		mustSync(b, benchBackend(h), full(st))
	}
	reportCalls(b, h.sim, b.N)
	if h.sim.Writes() != 0 {
		b.Fatalf("restart wrote: %v", h.sim.CallCounts())
	}
}

// BenchmarkRestartAt2000 is an agent restart on a node that is already
// right at that size: goal 0 writes.
func BenchmarkRestartAt2000(b *testing.B) { restart(b, 0) }

// BenchmarkRestartAt2000WithHNSLatency is the same with hnsCallLatency.
func BenchmarkRestartAt2000WithHNSLatency(b *testing.B) { restart(b, hnsCallLatency) }

func oneEndpointChange(b *testing.B, latency time.Duration) {
	st := benchState()
	h := benchHost(b)
	be := benchBackend(h)
	mustSync(b, be, full(st))
	// svc-1's endpoints with one more: a pod svc-2 already uses, so no
	// remote endpoint is created or deleted, only the load balancer.
	base := st.ServicePorts[svc(1).Key]
	grown := svc(1, append(append([]proxy.Endpoint(nil), base.InternalEndpoints...), st.ServicePorts[svc(2).Key].InternalEndpoints[0])...)
	versions := [2]*proxy.ServicePort{grown, base}
	h.sim.SetLatency("", latency)
	h.sim.ResetCalls()
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		next, changed := with(st, versions[i%2])
		i++
		mustSync(b, be, partial(next, changed))
		st = next
	}
	reportCalls(b, h.sim, b.N)
	if got := h.sim.CallCounts(); got[hns.OpUpdateLoadBalancer] != b.N || h.sim.Writes() != b.N {
		b.Fatalf("calls %v over %d changes, want one update each", got, b.N)
	}
}

// BenchmarkOneEndpointChange is one endpoint added to or removed from a
// service at that size: goal 1 update.
func BenchmarkOneEndpointChange(b *testing.B) { oneEndpointChange(b, 0) }

// BenchmarkOneEndpointChangeWithHNSLatency is the same with hnsCallLatency.
func BenchmarkOneEndpointChangeWithHNSLatency(b *testing.B) { oneEndpointChange(b, hnsCallLatency) }
