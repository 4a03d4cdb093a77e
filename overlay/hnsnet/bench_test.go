// Address plan: see fixture_test.go (remote node i: pods
// 10.(128+i/256).(i%256).0/24 via 192.168.(2+i/250).(1+i%250)).
package hnsnet

import (
	"fmt"
	"testing"

	"github.com/nodenet/nodenet/hns"
	"github.com/nodenet/nodenet/overlay"
)

// BenchmarkMesh measures SyncRemotes on the simulator in overlay mode:
// building the mesh of N remote nodes, one node joining, one leaving.
func BenchmarkMesh(b *testing.B) {
	for _, size := range []int{1000, 5000} {
		all := remotes(size + 1)
		b.Run(fmt.Sprintf("nodes=%d/first-build", size), func(b *testing.B) {
			writes := 0
			for b.Loop() {
				b.StopTimer()
				h := newHost(hns.Version{})
				n := h.agent(b)
				mustEnsure(b, n, overlaySpec())
				b.StartTimer()
				writes += mustSync(b, n, all[:size]).Writes
			}
			b.ReportMetric(float64(writes)/float64(b.N), "writes/op")
		})
		b.Run(fmt.Sprintf("nodes=%d/one-joins", size), func(b *testing.B) {
			benchChange(b, all[:size], all)
		})
		b.Run(fmt.Sprintf("nodes=%d/one-leaves", size), func(b *testing.B) {
			benchChange(b, all, all[:size])
		})
	}
}

// benchChange times the sync from mesh from to mesh to.
func benchChange(b *testing.B, from, to []overlay.RemoteNode) {
	writes := 0
	for b.Loop() {
		b.StopTimer()
		h := newHost(hns.Version{})
		n := h.agent(b)
		mustEnsure(b, n, overlaySpec())
		mustSync(b, n, from)
		b.StartTimer()
		writes += mustSync(b, n, to).Writes
	}
	b.ReportMetric(float64(writes)/float64(b.N), "writes/op")
}
