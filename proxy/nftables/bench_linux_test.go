package nftables

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"runtime"
	"runtime/metrics"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/vishvananda/netns"
	"k8s.io/klog/v2"
	"sigs.k8s.io/knftables"

	"github.com/nodenet/nodenet/internal/nsexec"
	"github.com/nodenet/nodenet/proxy"
)

// bigState is n ClusterIP services with e endpoints each, on other nodes
// (kube-proxy's 10k × 10 scale test, and the size BENCHMARKS.md reports).
func bigState(n, e int) *proxy.State {
	s := state()
	for i := range n {
		s.ServicePorts[benchPort(i, e).Key] = benchPort(i, e)
	}
	return s
}

func benchPort(i, e int) *proxy.ServicePort {
	list := make([]proxy.Endpoint, e)
	for j := range list {
		n := i*e + j
		list[j] = proxy.Endpoint{
			IP:   netip.AddrFrom4([4]byte{10, byte(128 + n>>16), byte(n >> 8), byte(n)}),
			Port: 8080, Ready: true, Serving: true,
		}
	}
	cip := netip.AddrFrom4([4]byte{10, 96 + byte(i>>16), byte(i >> 8), byte(i)}).String()
	return port("ns"+strconv.Itoa(i%100)+"/service-"+strconv.Itoa(i)+":http/TCP", cip, 80, list)
}

// encodeOnly is the netlink transport without the kernel: it encodes
// each transaction into its batch and drops it, so benchmarks measure
// the Go side of a sync (planning, diffing, encoding). list reports the
// objects in listed, or no table.
type encodeOnly struct {
	netlinkTransport
	listed      map[string][]string
	bytes, msgs int
}

func (e *encodeOnly) run(_ context.Context, tx *txn) error {
	msgs, bytes, err := tx.Discard()
	if err != nil {
		return err
	}
	e.bytes, e.msgs = bytes, msgs
	return nil
}

func (e *encodeOnly) list(context.Context) (map[string][]string, error) {
	if e.listed == nil {
		return nil, syscall.ENOENT
	}
	return e.listed, nil
}

// newEncodeOnly returns a backend on an encodeOnly transport.
func newEncodeOnly(b *testing.B, listed map[string][]string) (*Backend, *encodeOnly) {
	be, err := New(benchOptions(nil))
	if err != nil {
		b.Fatal(err)
	}
	e := &encodeOnly{netlinkTransport: be.tr.(netlinkTransport), listed: listed}
	be.tr = e
	return be, e
}

// peakHeap runs f and returns the most heap its objects took above what
// they took before, sampled every millisecond (runtime/metrics, which
// does not stop the world).
func peakHeap(f func()) uint64 {
	runtime.GC()
	sample := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	read := func() uint64 { metrics.Read(sample); return sample[0].Value.Uint64() }
	base := read()
	var peak atomic.Uint64
	done := make(chan struct{})
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		t := time.NewTicker(time.Millisecond)
		defer t.Stop()
		for {
			if v := read(); v > peak.Load() {
				peak.Store(v)
			}
			select {
			case <-done:
				return
			case <-t.C:
			}
		}
	}()
	f()
	close(done)
	<-stopped
	if v := read(); v > peak.Load() {
		peak.Store(v)
	}
	if p := peak.Load(); p > base {
		return p - base
	}
	return 0
}

func benchOptions(nft knftables.Interface) Options {
	o := testOptions(nft)
	o.Logger = klog.Background().V(10) // quiet
	return o
}

func BenchmarkGoSideFullSync10kx10(b *testing.B) {
	s := bigState(10000, 10)
	var e *encodeOnly
	b.ReportAllocs()
	for b.Loop() {
		var be *Backend
		be, e = newEncodeOnly(b, nil)
		if err := be.Sync(context.Background(), proxy.Update{State: s, Full: true}); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(e.bytes)/(1<<20), "batch-MiB")
	b.ReportMetric(float64(e.msgs), "messages")
}

func BenchmarkGoSideAddOneServiceAt10k(b *testing.B) {
	s := bigState(10000, 10)
	be, nft := newEncodeOnly(b, nil)
	if err := be.Sync(context.Background(), proxy.Update{State: s, Full: true}); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	i := 10000
	for b.Loop() {
		sp := benchPort(i, 10)
		i++
		s.ServicePorts[sp.Key] = sp
		if err := be.Sync(context.Background(), proxy.Update{State: s, Changed: changed(sp)}); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(nft.bytes), "batch-bytes")
}

// BenchmarkGoSidePeriodicFullSyncAt10k is the periodic full sync when
// nothing changed but the brain handed over new ServicePort pointers.
func BenchmarkGoSidePeriodicFullSyncAt10k(b *testing.B) {
	s := bigState(10000, 10)
	be, nft := newEncodeOnly(b, nil)
	if err := be.Sync(context.Background(), proxy.Update{State: s, Full: true}); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		b.StopTimer()
		next := state()
		for k, sp := range s.ServicePorts {
			cp := *sp
			next.ServicePorts[k] = &cp
		}
		s = next
		b.StartTimer()
		if err := be.Sync(context.Background(), proxy.Update{State: s, Full: true}); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(nft.bytes), "batch-bytes")
}

// BenchmarkKernelFullSync10kx10 loads 10k services × 10 endpoints into an
// empty table of a new network namespace over netlink: planning,
// encoding and the kernel's commit of the one batch. peak-heap-MiB is
// the most heap the sync's objects took at once (the state excluded);
// child-cpu-s/op stays 0: no nft runs. user-cpu-s/op is this
// process's user time in the sync (the Go side), sys-cpu-s/op its
// system time (the kernel checking and committing the batch, which it
// does in the sendmsg): on a loaded machine they say more than ns/op.
func BenchmarkKernelFullSync10kx10(b *testing.B) {
	s := bigState(10000, 10)
	before := childCPU()
	var peak uint64
	var user, sys time.Duration
	for b.Loop() {
		b.StopTimer()
		ns := newNetns(b)
		b.StartTimer()
		be, err := newKernelBackend(ns, benchOptions)
		if err == nil {
			u0, s0 := selfCPU()
			peak = max(peak, peakHeap(func() {
				err = nsexec.Do(ns, func() error { return be.Sync(context.Background(), proxy.Update{State: s, Full: true}) })
			}))
			u1, s1 := selfCPU()
			user, sys = user+u1-u0, sys+s1-s0
		}
		if err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		ns.Close()
		b.StartTimer()
	}
	b.ReportMetric(float64(peak)/(1<<20), "peak-heap-MiB")
	b.ReportMetric((childCPU()-before).Seconds()/float64(b.N), "child-cpu-s/op")
	b.ReportMetric(user.Seconds()/float64(b.N), "user-cpu-s/op")
	b.ReportMetric(sys.Seconds()/float64(b.N), "sys-cpu-s/op")
	reportRSS(b)
}

// selfCPU is this process's user and system time so far.
func selfCPU() (user, sys time.Duration) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0, 0
	}
	return time.Duration(ru.Utime.Nano()), time.Duration(ru.Stime.Nano())
}

// reportCPU reports, when the returned func runs, the user and system
// CPU per op since reportCPU ran.
func reportCPU(b *testing.B) func() {
	u0, s0 := selfCPU()
	return func() {
		u1, s1 := selfCPU()
		b.ReportMetric((u1-u0).Seconds()/float64(b.N), "user-cpu-s/op")
		b.ReportMetric((s1-s0).Seconds()/float64(b.N), "sys-cpu-s/op")
	}
}

// childCPU is the user and system time of the children waited for.
func childCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_CHILDREN, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// kernelTable10k returns a namespace whose table holds 10k services × 10
// endpoints, and the backend that wrote it.
func kernelTable10k(b *testing.B) (netns.NsHandle, *Backend, *proxy.State) {
	s := bigState(10000, 10)
	ns := newNetns(b)
	be, err := newKernelBackend(ns, benchOptions)
	if err == nil {
		err = nsexec.Do(ns, func() error { return be.Sync(context.Background(), proxy.Update{State: s, Full: true}) })
	}
	if err != nil {
		b.Fatal(err)
	}
	return ns, be, s
}

// BenchmarkKernelAddOneServiceAt10k adds one service to a table of 10k
// services × 10 endpoints: a partial sync.
func BenchmarkKernelAddOneServiceAt10k(b *testing.B) {
	ns, be, s := kernelTable10k(b)
	defer reportCPU(b)()
	i := 10000
	for b.Loop() {
		sp := benchPort(i, 10)
		i++
		s.ServicePorts[sp.Key] = sp
		err := nsexec.Do(ns, func() error {
			return be.Sync(context.Background(), proxy.Update{State: s, Changed: changed(sp)})
		})
		if err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkKernelOneEndpointAt10k adds an endpoint to one service of a
// table of 10k services × 10 endpoints (and removes it the next round).
func BenchmarkKernelOneEndpointAt10k(b *testing.B) {
	ns, be, s := kernelTable10k(b)
	defer reportCPU(b)()
	i := 0
	for b.Loop() {
		sp := benchPort(i%10000, 10)
		if i/10000%2 == 0 {
			extra := sp.InternalEndpoints[0]
			extra.IP = netip.AddrFrom4([4]byte{10, 250, byte(i >> 8), byte(i)})
			eps := append(slices.Clone(sp.InternalEndpoints), extra)
			sp.ClusterEndpoints, sp.InternalEndpoints, sp.ExternalEndpoints = eps, eps, eps
		}
		i++
		s.ServicePorts[sp.Key] = sp
		err := nsexec.Do(ns, func() error {
			return be.Sync(context.Background(), proxy.Update{State: s, Changed: changed(sp)})
		})
		if err != nil {
			b.Fatal(err)
		}
	}
}

// reportRSS reports the peak RSS of this process (the benchmark's state
// and every iteration included).
func reportRSS(b *testing.B) {
	if status, err := os.ReadFile("/proc/self/status"); err == nil {
		for _, line := range strings.Split(string(status), "\n") {
			if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
				var kb float64
				if _, err := fmt.Sscanf(strings.TrimSpace(v), "%f kB", &kb); err == nil {
					b.ReportMetric(kb/1024, "self-peak-MiB")
				}
			}
		}
	}
}

// BenchmarkGoSideRestartAt10k is the first sync of a new backend onto
// the table of 10k services × 10 endpoints it would write: the Go side
// of adopting it (planning, hashing, comparing the object names).
func BenchmarkGoSideRestartAt10k(b *testing.B) {
	s := bigState(10000, 10)
	listed := map[string][]string{}
	be, _ := newEncodeOnly(b, nil)
	for typ, names := range be.buildTable(s, nil, true).objects {
		for name := range names {
			listed[typ] = append(listed[typ], name)
		}
	}
	b.ReportAllocs()
	for b.Loop() {
		be, e := newEncodeOnly(b, listed)
		if err := be.Sync(context.Background(), proxy.Update{State: s, Full: true}); err != nil {
			b.Fatal(err)
		}
		if e.bytes != 0 {
			b.Fatalf("the restart wrote a %d-byte batch", e.bytes)
		}
	}
}

// BenchmarkKernelRestartAt10k is an agent restart at 10k services × 10
// endpoints: the first sync of a new backend onto the table the previous
// one left, listing it over netlink. It must run no transaction.
func BenchmarkKernelRestartAt10k(b *testing.B) {
	s := bigState(10000, 10)
	ns := newNetns(b)
	be, err := newKernelBackend(ns, benchOptions)
	if err == nil {
		err = nsexec.Do(ns, func() error { return be.Sync(context.Background(), proxy.Update{State: s, Full: true}) })
	}
	if err != nil {
		b.Fatal(err)
	}
	runs := 0
	defer reportCPU(b)()
	for b.Loop() {
		be, err := newKernelBackend(ns, benchOptions)
		if err != nil {
			b.Fatal(err)
		}
		counting := &countingTransport{transport: be.tr}
		be.tr = counting
		err = nsexec.Do(ns, func() error { return be.Sync(context.Background(), proxy.Update{State: s, Full: true}) })
		if err != nil {
			b.Fatal(err)
		}
		runs += counting.runs
	}
	if runs != 0 {
		b.Fatalf("the restarts ran %d transactions", runs)
	}
	b.ReportMetric(float64(runs), "transactions")
}
