package cni_test

// Address plan: both plugins serve pods from 10.244.1.0/24 in one node
// netns: nodenet on bridge "nodenet" (10.244.1.1), the reference bridge
// plugin on "refbr0" with its own host-local store.

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/containernetworking/cni/libcni"
	"github.com/containernetworking/plugins/pkg/ns"
)

// cniDriver runs ADD and DEL the way containerd does (libcni executing the
// plugin binaries), from inside the node netns.
type cniDriver struct {
	node *testNode
	list *libcni.NetworkConfigList
}

func (d *cniDriver) do(f func() error) error {
	return d.node.netns.Do(func(ns.NetNS) error { return f() })
}

func (d *cniDriver) add(p *testPod) error {
	return d.do(func() error {
		_, err := d.node.client.AddNetworkList(context.Background(), d.list, p.rt)
		return err
	})
}

func (d *cniDriver) del(p *testPod) error {
	return d.do(func() error { return d.node.client.DelNetworkList(context.Background(), d.list, p.rt) })
}

func benchDrivers(b *testing.B) []struct {
	name string
	d    *cniDriver
} {
	node := newTestNode(b, nodeOptions{})
	node.startServer(node.linuxWiring(), true)
	ref, err := libcni.ConfListFromBytes(fmt.Appendf(nil, `{
		"cniVersion": "1.0.0", "name": "reference",
		"plugins": [{"type": "bridge", "bridge": "refbr0", "isGateway": true, "hairpinMode": true, "mtu": 1450,
			"ipam": {"type": "host-local", "ranges": [[{"subnet": "10.244.1.0/24"}]], "dataDir": %q}}]}`,
		filepath.Join(node.dir, "host-local")))
	if err != nil {
		b.Fatal(err)
	}
	return []struct {
		name string
		d    *cniDriver
	}{
		{"nodenet", &cniDriver{node: node, list: node.list}},
		{"bridge+host-local", &cniDriver{node: node, list: ref}},
	}
}

// BenchmarkCNI compares nodenet with the reference bridge + host-local
// plugins through the same client. Reported per implementation:
// sequential ADD and DEL p50/p99, and the wall time of 100 parallel ADDs
// and then 100 parallel DELs.
func BenchmarkCNI(b *testing.B) {
	requireRoot(b)
	for _, impl := range benchDrivers(b) {
		b.Run(impl.name+"/sequential", func(b *testing.B) {
			var adds, dels []time.Duration
			for i := 0; b.Loop(); i++ {
				p := impl.d.node.newPod(fmt.Sprintf("seq-%d", i))
				start := time.Now()
				if err := impl.d.add(p); err != nil {
					b.Fatalf("ADD: %v", err)
				}
				adds = append(adds, time.Since(start))
				start = time.Now()
				if err := impl.d.del(p); err != nil {
					b.Fatalf("DEL: %v", err)
				}
				dels = append(dels, time.Since(start))
				p.close()
			}
			reportPercentiles(b, "add", adds)
			reportPercentiles(b, "del", dels)
		})
		b.Run(impl.name+"/parallel-100", func(b *testing.B) {
			const n = 100
			var addWall, delWall time.Duration
			for i := 0; b.Loop(); i++ {
				pods := make([]*testPod, n)
				for j := range pods {
					pods[j] = impl.d.node.newPod(fmt.Sprintf("par-%d-%d", i, j))
				}
				addWall += parallel(b, pods, impl.d.add)
				delWall += parallel(b, pods, impl.d.del)
				for _, p := range pods {
					p.close()
				}
			}
			b.ReportMetric(float64(addWall.Milliseconds())/float64(b.N), "add-100-wall-ms")
			b.ReportMetric(float64(delWall.Milliseconds())/float64(b.N), "del-100-wall-ms")
		})
	}
}

func parallel(b *testing.B, pods []*testPod, op func(*testPod) error) time.Duration {
	start := time.Now()
	var wg sync.WaitGroup
	errs := make([]error, len(pods))
	for i, p := range pods {
		wg.Go(func() { errs[i] = op(p) })
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
