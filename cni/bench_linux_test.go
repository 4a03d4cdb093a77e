package cni_test

// Address plan: both plugins serve pods from 10.244.1.0/24 in one node
// (see node_linux_test.go): nodenet on bridge "nodenet" (10.244.1.1), the
// reference bridge plugin on "refbr0" with its own host-local store.

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/nodenet/nodenet/test/netnode"
)

// benchDrivers are both plugins' runtimes on one node; each runs ADD and
// DEL the way containerd does (libcni executing the plugin binaries),
// from inside the node.
func benchDrivers(b *testing.B) (*testNode, []struct {
	name string
	rt   *netnode.Runtime
}) {
	node := newTestNode(b, podCIDR)
	node.startCNI(b, netnode.NodenetCNIOptions{Network: node.nw})
	ref := node.NewRuntime(b, netnode.RuntimeOptions{BinDir: binaries(b), Conflist: fmt.Appendf(nil, `{
		"cniVersion": "1.0.0", "name": "reference",
		"plugins": [{"type": "bridge", "bridge": "refbr0", "isGateway": true, "hairpinMode": true, "mtu": 1450,
			"ipam": {"type": "host-local", "ranges": [[{"subnet": "10.244.1.0/24"}]], "dataDir": %q}}]}`,
		filepath.Join(b.TempDir(), "host-local"))})
	return node, []struct {
		name string
		rt   *netnode.Runtime
	}{
		{"nodenet", node.Runtime},
		{"bridge+host-local", ref},
	}
}

// BenchmarkCNI compares nodenet with the reference bridge + host-local
// plugins through the same client. Reported per implementation:
// sequential ADD and DEL p50/p99, and the wall time of 100 parallel ADDs
// and then 100 parallel DELs.
func BenchmarkCNI(b *testing.B) {
	node, impls := benchDrivers(b)
	ctx := b.Context()
	for _, impl := range impls {
		b.Run(impl.name+"/sequential", func(b *testing.B) {
			var adds, dels []time.Duration
			for i := 0; b.Loop(); i++ {
				p := node.NewPod(b, fmt.Sprintf("seq-%d", i))
				start := time.Now()
				if err := impl.rt.Add(ctx, p); err != nil {
					b.Fatalf("ADD: %v", err)
				}
				adds = append(adds, time.Since(start))
				start = time.Now()
				if err := impl.rt.Del(ctx, p); err != nil {
					b.Fatalf("DEL: %v", err)
				}
				dels = append(dels, time.Since(start))
				closePod(b, p)
			}
			reportPercentiles(b, "add", adds)
			reportPercentiles(b, "del", dels)
		})
		b.Run(impl.name+"/parallel-100", func(b *testing.B) {
			const n = 100
			var addWall, delWall time.Duration
			for i := 0; b.Loop(); i++ {
				pods := make([]*netnode.Pod, n)
				for j := range pods {
					pods[j] = node.NewPod(b, fmt.Sprintf("par-%d-%d", i, j))
				}
				addWall += parallel(b, pods, impl.rt.Add)
				delWall += parallel(b, pods, impl.rt.Del)
				for _, p := range pods {
					closePod(b, p)
				}
			}
			b.ReportMetric(float64(addWall.Milliseconds())/float64(b.N), "add-100-wall-ms")
			b.ReportMetric(float64(delWall.Milliseconds())/float64(b.N), "del-100-wall-ms")
		})
	}
}

// closePod removes a pod's namespace now: the benchmarks make thousands.
func closePod(b *testing.B, p *netnode.Pod) {
	if err := p.Close(); err != nil {
		b.Fatal(err)
	}
}

func parallel(b *testing.B, pods []*netnode.Pod, op func(context.Context, *netnode.Pod) error) time.Duration {
	start := time.Now()
	var wg sync.WaitGroup
	errs := make([]error, len(pods))
	for i, p := range pods {
		wg.Go(func() { errs[i] = op(b.Context(), p) })
	}
	wg.Wait()
	wall := time.Since(start)
	for _, err := range errs {
		if err != nil {
			b.Fatal(err)
		}
	}
	return wall
}

func reportPercentiles(b *testing.B, op string, d []time.Duration) {
	if len(d) == 0 {
		return
	}
	slices.Sort(d)
	at := func(q float64) float64 {
		return float64(d[min(len(d)-1, int(q*float64(len(d))))].Microseconds()) / 1000
	}
	b.ReportMetric(at(0.50), op+"-p50-ms")
	b.ReportMetric(at(0.99), op+"-p99-ms")
}
