package proxier

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"runtime"
	"runtime/metrics"
	"runtime/pprof"
	"sync/atomic"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	"github.com/nodenet/nodenet/config"
	"github.com/nodenet/nodenet/internal/nsexec"
	"github.com/nodenet/nodenet/internal/testroot"
	"github.com/nodenet/nodenet/proxy/brain"
	"github.com/nodenet/nodenet/proxy/nftables"
)

// benchObjects are services × one EndpointSlice of endpoints each, as
// bench/proxy's cluster creates them (remote endpoints, one port).
func benchObjects(services, endpoints int) ([]*v1.Service, []*discoveryv1.EndpointSlice) {
	addr := func(first netip.Addr, n int) string {
		b := first.As4()
		v := uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3]) + uint32(n)
		return netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)}).String()
	}
	cip, pip := netip.MustParseAddr("10.96.1.0"), netip.MustParseAddr("100.64.0.10")
	svcs := make([]*v1.Service, services)
	slices := make([]*discoveryv1.EndpointSlice, services)
	ready, port, proto, portName := true, int32(8080), v1.ProtocolTCP, "http"
	for i := range services {
		name := fmt.Sprintf("svc-%05d", i)
		svcs[i] = &v1.Service{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "bench", UID: types.UID("u-" + name), ResourceVersion: "1"},
			Spec: v1.ServiceSpec{
				Type: v1.ServiceTypeClusterIP, ClusterIP: addr(cip, i), ClusterIPs: []string{addr(cip, i)},
				IPFamilies: []v1.IPFamily{v1.IPv4Protocol},
				Ports:      []v1.ServicePort{{Name: "http", Protocol: v1.ProtocolTCP, Port: 80}},
			},
		}
		eps := make([]discoveryv1.Endpoint, endpoints)
		for j := range eps {
			node := fmt.Sprintf("node-%d", j)
			eps[j] = discoveryv1.Endpoint{
				Addresses: []string{addr(pip, i*endpoints+j)}, NodeName: &node,
				Conditions: discoveryv1.EndpointConditions{Ready: &ready},
			}
		}
		slices[i] = &discoveryv1.EndpointSlice{
			ObjectMeta: metav1.ObjectMeta{
				Name: name + "-bench", Namespace: "bench", ResourceVersion: "1",
				Labels: map[string]string{discoveryv1.LabelServiceName: name},
			},
			AddressType: discoveryv1.AddressTypeIPv4,
			Endpoints:   eps,
			Ports:       []discoveryv1.EndpointPort{{Name: &portName, Protocol: &proto, Port: &port}},
		}
	}
	return svcs, slices
}

// heapSampler records, every 2 ms, the most heap objects took and the
// highest heap goal the GC set: what a process's RSS follows.
type heapSampler struct {
	peak, goal atomic.Uint64
	done       chan struct{}
	stopped    chan struct{}
	profile    string // written when the objects first pass threshold
	threshold  uint64
}

func startSampler(profile string, threshold uint64) *heapSampler {
	s := &heapSampler{done: make(chan struct{}), stopped: make(chan struct{}), profile: profile, threshold: threshold}
	go func() {
		defer close(s.stopped)
		sample := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}, {Name: "/gc/heap/goal:bytes"}}
		t := time.NewTicker(2 * time.Millisecond)
		defer t.Stop()
		for {
			metrics.Read(sample)
			if v := sample[0].Value.Uint64(); v > s.peak.Load() {
				s.peak.Store(v)
				if s.profile != "" && v > s.threshold {
					if f, err := os.Create(s.profile); err == nil {
						_ = pprof.Lookup("heap").WriteTo(f, 0)
						f.Close()
					}
					s.profile = ""
				}
			}
			if v := sample[1].Value.Uint64(); v > s.goal.Load() {
				s.goal.Store(v)
			}
			select {
			case <-s.done:
				return
			case <-t.C:
			}
		}
	}()
	return s
}

func (s *heapSampler) stop() { close(s.done); <-s.stopped }

func liveHeap() uint64 {
	runtime.GC()
	s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

// BenchmarkFirstSyncMemory10kx10 is the agent's first sync at 10k
// Services × 10 endpoints, brain → nftables backend into a throwaway
// netns, with the objects held as the informer caches hold them. It
// reports the live heap before the sync (objects and brain indexes),
// after it (plus brain and backend state), the most heap objects took
// during it and the highest GC heap goal (what RSS follows). Run with
// -benchtime=1x; NODENET_BENCH_HEAPPROFILE=F writes a heap profile
// (as of the last GC) when the heap first passes 1.5× its live size
// before the sync.
func BenchmarkFirstSyncMemory10kx10(b *testing.B) {
	testroot.Require(b, "a network namespace and nftables")
	cfg := &config.AgentConfiguration{
		ClusterCIDRs: []string{"100.64.0.0/10"}, ServiceCIDRs: []string{"10.96.0.0/12"}, NodeName: "bench-node",
	}
	config.SetDefaults(cfg, config.DefaultingOptions{OS: config.OSLinux})
	node := Node{Name: "bench-node", IPs: []netip.Addr{netip.MustParseAddr("198.18.0.2")}, PodCIDRs: []netip.Prefix{netip.MustParsePrefix("100.64.0.0/24")}}
	for b.Loop() {
		b.StopTimer()
		ns, err := nsexec.New()
		if err != nil {
			b.Fatal(err)
		}
		nftOpts, err := NFTablesOptions(cfg, node)
		if err != nil {
			b.Fatal(err)
		}
		nftOpts.Logger = klog.Background().V(10)
		var be *nftables.Backend
		if err := nsexec.Do(ns, func() error { be, err = nftables.New(nftOpts); return err }); err != nil {
			b.Fatal(err)
		}
		brOpts := BrainOptions(cfg, node)
		brOpts.Logger = klog.Background().V(10)
		br := brain.New(brOpts)
		svcs, slices := benchObjects(10000, 10)
		for i := range svcs {
			br.OnServiceUpdate(nil, svcs[i])
			br.OnEndpointSliceUpdate(nil, slices[i])
		}
		br.OnSynced()
		before := liveHeap()
		s := startSampler(os.Getenv("NODENET_BENCH_HEAPPROFILE"), before*3/2)
		b.StartTimer()
		update, _ := br.Snapshot(false)
		snapPeak := s.peak.Load()
		snapLive := liveHeap()
		err = nsexec.Do(ns, func() error { return be.Sync(context.Background(), update) })
		b.StopTimer()
		s.stop()
		if err != nil {
			b.Fatal(err)
		}
		after := liveHeap()
		if p := os.Getenv("NODENET_BENCH_LIVEPROFILE"); p != "" {
			if f, err := os.Create(p); err == nil {
				_ = pprof.Lookup("heap").WriteTo(f, 0)
				f.Close()
			}
		}
		runtime.KeepAlive(svcs)
		runtime.KeepAlive(slices)
		runtime.KeepAlive(br)
		runtime.KeepAlive(be)
		ns.Close()
		b.ReportMetric(float64(before)/(1<<20), "live-before-MiB")
		b.ReportMetric(float64(after)/(1<<20), "live-after-MiB")
		b.ReportMetric(float64(s.peak.Load())/(1<<20), "peak-heap-MiB")
		b.ReportMetric(float64(snapPeak)/(1<<20), "snapshot-peak-heap-MiB")
		b.ReportMetric(float64(snapLive)/(1<<20), "snapshot-live-MiB")
		b.ReportMetric(float64(s.goal.Load())/(1<<20), "peak-goal-MiB")
		b.StartTimer()
	}
}
