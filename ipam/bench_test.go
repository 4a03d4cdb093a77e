// Address plan: a dual-stack node, 10.244.1.0/24 (.2 source VIP) and
// fd00:10:244:1::/64 (::2 source VIP), optionally already holding
// 100 pods (.3-.102), like a busy node.
package ipam

import (
	"fmt"
	"sync/atomic"
	"testing"
)

var benchCases = []struct {
	name   string
	ranges []Range
	held   int
}{
	{name: "ipv4/pods=0", ranges: []Range{rng("10.244.1.0/24", "10.244.1.2")}},
	{name: "dual-stack/pods=0", ranges: dualStack()},
	{name: "dual-stack/pods=100", ranges: dualStack(), held: 100},
}

// benchAllocator opens an allocator on a fresh store holding c.held pods.
func benchAllocator(b *testing.B, ranges []Range, held int) *Allocator {
	a := newAllocator(b, "", ranges...)
	for i := range held {
		mustAllocate(b, a, fmt.Sprint("held-", i), "eth0")
	}
	return a
}

// BenchmarkAllocateRelease measures one pod's ADD and DEL.
func BenchmarkAllocateRelease(b *testing.B) {
	for _, c := range benchCases {
		b.Run(c.name, func(b *testing.B) {
			a := benchAllocator(b, c.ranges, c.held)
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				id := fmt.Sprint("pod-", i)
				mustAllocate(b, a, id, "eth0")
				mustRelease(b, a, id, "eth0")
			}
		})
	}
}

// BenchmarkAllocateReleaseParallel measures pods added and deleted at once,
// all through one Allocator (as in the agent).
func BenchmarkAllocateReleaseParallel(b *testing.B) {
	for _, c := range benchCases {
		b.Run(c.name, func(b *testing.B) {
			a := benchAllocator(b, c.ranges, c.held)
			var next atomic.Int64
			b.ReportAllocs()
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					id := fmt.Sprint("pod-", next.Add(1))
					mustAllocate(b, a, id, "eth0")
					mustRelease(b, a, id, "eth0")
				}
			})
		})
	}
}
