package nftables

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

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

// discardNFT is a knftables.Interface that only renders transactions:
// the Go side of a sync without nft. (knftables' Fake checks each element
// against every other, which at 100k elements measures the Fake.)
type discardNFT struct {
	knftables.Interface
	bytes int
}

func (d *discardNFT) NewTransaction() *knftables.Transaction {
	return knftables.NewFake(knftables.InetFamily, TableName).NewTransaction()
}

// ListAll finds an empty table, which a first sync replaces.
func (d *discardNFT) ListAll(context.Context) (map[string][]string, error) {
	return map[string][]string{}, nil
}

func (d *discardNFT) Run(_ context.Context, tx *knftables.Transaction) error {
	d.bytes = len(tx.String())
	return nil
}

func benchOptions(nft knftables.Interface) Options {
	o := testOptions(nft)
	o.Logger = klog.Background().V(10) // quiet
	return o
}

func BenchmarkGoSideFullSync10kx10(b *testing.B) {
	s := bigState(10000, 10)
	nft := &discardNFT{}
	b.ReportAllocs()
	for b.Loop() {
		be, err := New(benchOptions(nft))
		if err != nil {
			b.Fatal(err)
		}
		if err := be.Sync(context.Background(), proxy.Update{State: s, Full: true}); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(nft.bytes)/(1<<20), "tx-MiB")
}

func BenchmarkGoSideAddOneServiceAt10k(b *testing.B) {
	s := bigState(10000, 10)
	nft := &discardNFT{}
	be, err := New(benchOptions(nft))
	if err != nil {
		b.Fatal(err)
	}
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
	b.ReportMetric(float64(nft.bytes), "tx-bytes")
}

// BenchmarkGoSidePeriodicFullSyncAt10k is the periodic full sync when
// nothing changed but the brain handed over new ServicePort pointers.
func BenchmarkGoSidePeriodicFullSyncAt10k(b *testing.B) {
	s := bigState(10000, 10)
	nft := &discardNFT{}
	be, err := New(benchOptions(nft))
	if err != nil {
		b.Fatal(err)
	}
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
	b.ReportMetric(float64(nft.bytes), "tx-bytes")
}

// BenchmarkKernelFullSync10kx10 loads 10k services × 10 endpoints into an
// empty table of a new network namespace: Go, nft and the kernel.
func BenchmarkKernelFullSync10kx10(b *testing.B) {
	s := bigState(10000, 10)
	before := childCPU()
	for b.Loop() {
		b.StopTimer()
		ns := newNetns(b)
		b.StartTimer()
		be, err := newKernelBackend(ns, benchOptions)
		if err == nil {
			err = nsexec.Do(ns, func() error { return be.Sync(context.Background(), proxy.Update{State: s, Full: true}) })
		}
		if err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		ns.Close()
		b.StartTimer()
	}
	b.ReportMetric((childCPU()-before).Seconds()/float64(b.N), "nft-cpu-s/op")
	reportRSS(b)
}

// childCPU is the user and system time of the children waited for.
func childCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_CHILDREN, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkKernelAddOneServiceAt10k adds one service to a table of 10k
// services × 10 endpoints: a partial sync through nft.
func BenchmarkKernelAddOneServiceAt10k(b *testing.B) {
	s := bigState(10000, 10)
	ns := newNetns(b)
	be, err := newKernelBackend(ns, benchOptions)
	if err == nil {
		err = nsexec.Do(ns, func() error { return be.Sync(context.Background(), proxy.Update{State: s, Full: true}) })
	}
	if err != nil {
		b.Fatal(err)
	}
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

// reportRSS reports the peak RSS of this process and of the largest child
// (nft) it waited for.
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
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_CHILDREN, &ru); err == nil {
		b.ReportMetric(float64(ru.Maxrss)/1024, "nft-peak-MiB")
	}
}

// listedNFT is a discardNFT whose table holds the objects listed.
type listedNFT struct {
	discardNFT
	listed map[string][]string
}

func (l *listedNFT) ListAll(context.Context) (map[string][]string, error) { return l.listed, nil }

// BenchmarkGoSideRestartAt10k is the first sync of a new backend onto
// the table of 10k services × 10 endpoints it would write: the Go side
// of adopting it (planning, hashing, comparing the object names).
func BenchmarkGoSideRestartAt10k(b *testing.B) {
	s := bigState(10000, 10)
	nft := &listedNFT{listed: map[string][]string{}}
	be, err := New(benchOptions(nft))
	if err != nil {
		b.Fatal(err)
	}
	for typ, names := range be.buildTable(s, nil, true).objects {
		for name := range names {
			nft.listed[typ] = append(nft.listed[typ], name)
		}
	}
	b.ReportAllocs()
	for b.Loop() {
		nft.bytes = 0
		be, err := New(benchOptions(nft))
		if err != nil {
			b.Fatal(err)
		}
		if err := be.Sync(context.Background(), proxy.Update{State: s, Full: true}); err != nil {
			b.Fatal(err)
		}
		if nft.bytes != 0 {
			b.Fatalf("the restart wrote a %d-byte transaction", nft.bytes)
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
