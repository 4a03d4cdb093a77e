package hnsendpoint

// Address plan: see fixture_test.go; the benchmark pod is 10.244.1.5 with
// one host port.

import (
	"testing"

	"github.com/nodenet/nodenet/cni"
)

// BenchmarkAddDel measures one pod ADD and DEL on the simulator: the
// wiring's own cost (lookups, policy derivation, comparisons) plus the
// simulator's bookkeeping, without real HNS latency.
func BenchmarkAddDel(b *testing.B) {
	for _, mode := range modes {
		b.Run(string(mode), func(b *testing.B) {
			h := newHost(b, mode, hostOptions{})
			h.nw.EnableDSR = true
			p := pod(containerA, "eth0", h.namespace(b), "10.244.1.5")
			p.PortMappings = []cni.PortMapping{{HostPort: 8080, ContainerPort: 80, Protocol: "tcp"}}
			b.ReportAllocs()
			for b.Loop() {
				if _, err := h.w.Add(bg, h.nw, p); err != nil {
					b.Fatal(err)
				}
				if err := h.w.Del(bg, h.nw, p); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
