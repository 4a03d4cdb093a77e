package brain

import (
	"fmt"
	"maps"
	"runtime"
	"testing"

	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	"github.com/nodenet/nodenet/proxy"
)

// benchService returns service i (cluster IP in 10.96.0.0/16 and beyond)
// and its slice of n ready endpoints spread over 100 nodes, one in ten on
// this node.
func benchService(i, n int) (*v1.Service, *discoveryv1.EndpointSlice) {
	name := fmt.Sprintf("svc-%d", i)
	ip := fmt.Sprintf("10.%d.%d.%d", 96+i>>16, i>>8&255, i&255)
	svc := &v1.Service{}
	svc.Namespace, svc.Name, svc.UID, svc.ResourceVersion = testNS, name, types.UID("u"+name), "1"
	svc.Spec = v1.ServiceSpec{
		Type: v1.ServiceTypeClusterIP, ClusterIP: ip, ClusterIPs: []string{ip}, IPFamilies: []v1.IPFamily{v1.IPv4Protocol},
		Ports: []v1.ServicePort{{Name: "http", Protocol: v1.ProtocolTCP, Port: 80}},
	}
	eps := make([]discoveryv1.Endpoint, n)
	for j := range eps {
		node := fmt.Sprintf("node-%d", (i+j)%100)
		if (i+j)%10 == 0 {
			node = thisNode
		}
		eps[j] = ep(fmt.Sprintf("10.%d.%d.%d", 128+(i*n+j)>>16, (i*n+j)>>8&255, (i*n+j)&255), node, readyCond)
	}
	return svc, epSlice(name, name+"-1", httpPort(8080), eps...)
}

func benchBrain(b *testing.B, services int) *Brain {
	br := New(Options{NodeName: thisNode, Families: []proxy.IPFamily{proxy.IPv4}, Logger: klog.Background().V(10)})
	for i := range services {
		svc, slice := benchService(i, 10)
		br.OnServiceUpdate(nil, svc)
		br.OnEndpointSliceUpdate(nil, slice)
	}
	if u, _ := br.Snapshot(true); len(u.State.ServicePorts) != services {
		b.Fatalf("%d service ports for %d services", len(u.State.ServicePorts), services)
	}
	return br
}

// BenchmarkFullSnapshot10kx10 recomputes 10,000 services of 10 endpoints
// each (goal: well under 1 s).
func BenchmarkFullSnapshot10kx10(b *testing.B) {
	b.Run("first", func(b *testing.B) {
		for b.Loop() {
			b.StopTimer()
			br := New(Options{NodeName: thisNode, Families: []proxy.IPFamily{proxy.IPv4}})
			for i := range 10000 {
				svc, slice := benchService(i, 10)
				br.OnServiceUpdate(nil, svc)
				br.OnEndpointSliceUpdate(nil, slice)
			}
			b.StartTimer()
			if u, _ := br.Snapshot(true); len(u.Changed) != 10000 {
				b.Fatalf("%d changed", len(u.Changed))
			}
		}
	})
	b.Run("resync", func(b *testing.B) {
		br := benchBrain(b, 10000)
		for b.Loop() {
			if u, _ := br.Snapshot(true); len(u.Changed) != 0 {
				b.Fatalf("%d changed", len(u.Changed))
			}
		}
	})
}

// BenchmarkAddOneServiceAt10k adds one service (and its slice) to 10,000
// and takes a partial Snapshot (goal: ≤ 5 ms).
func BenchmarkAddOneServiceAt10k(b *testing.B) {
	br := benchBrain(b, 10000)
	i := 10000
	for b.Loop() {
		svc, slice := benchService(i, 10)
		i++
		br.OnServiceUpdate(nil, svc)
		br.OnEndpointSliceUpdate(nil, slice)
		if u, _ := br.Snapshot(false); len(u.Changed) != 1 {
			b.Fatalf("%d changed", len(u.Changed))
		}
	}
}

// BenchmarkCloneState10k isolates the one O(services) step of a partial
// Snapshot: copying the previous state's top-level map.
func BenchmarkCloneState10k(b *testing.B) {
	br := benchBrain(b, 10000)
	for b.Loop() {
		if m := maps.Clone(br.state); len(m) != 10000 {
			b.Fatal(len(m))
		}
	}
}

// BenchmarkRetainedBytes10kx10 measures the heap the brain keeps for
// 10,000 services of 10 endpoints: its input objects (as handed over,
// not trimmed) and, after a full Snapshot, its state. Run with
// -benchtime=1x.
func BenchmarkRetainedBytes10kx10(b *testing.B) {
	for range b.N {
		base := heapInUse()
		br := New(Options{NodeName: thisNode, Families: []proxy.IPFamily{proxy.IPv4}})
		for i := range 10000 {
			svc, slice := benchService(i, 10)
			br.OnServiceUpdate(nil, svc)
			br.OnEndpointSliceUpdate(nil, slice)
		}
		objects := heapInUse()
		var before runtime.MemStats
		runtime.ReadMemStats(&before)
		u, _ := br.Snapshot(true)
		var after runtime.MemStats
		runtime.ReadMemStats(&after)
		state := heapInUse()
		runtime.KeepAlive(u)
		runtime.KeepAlive(br)
		b.ReportMetric(float64(objects-base)/(1<<20), "MiB-objects")
		b.ReportMetric(float64(state-objects)/(1<<20), "MiB-state")
		b.ReportMetric(float64(after.TotalAlloc-before.TotalAlloc)/(1<<20), "MiB-snapshot-alloc")
	}
}

func heapInUse() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}
