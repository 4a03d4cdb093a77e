package diffstore

import (
	"fmt"
	"testing"
)

// benchKey looks like what the HNS backend keys load balancers by.
type benchKey struct {
	vip   string
	port  uint16
	index int
}

type benchValue struct {
	backends [4]string
	flags    uint32
}

func benchItems(owner, version int) map[benchKey]benchValue {
	items := make(map[benchKey]benchValue, 10)
	for i := range 10 {
		items[benchKey{vip: fmt.Sprintf("10.96.%d.%d", owner/256, owner%256), port: 80, index: i}] = benchValue{
			backends: [4]string{"10.244.1.2", "10.244.2.2", "10.244.3.2", fmt.Sprint(version)},
		}
	}
	return items
}

const benchOwners = 10_000

func newBenchStore(b *testing.B) *Store[int, benchKey, benchValue] {
	s := New[int, benchKey, benchValue](func(a, b benchValue) bool { return a == b })
	for o := range benchOwners {
		s.Set(o, benchItems(o, 0))
	}
	s.Commit()
	if s.Len() != benchOwners*10 {
		b.Fatalf("Len() = %d", s.Len())
	}
	return s
}

// BenchmarkFullRound rebuilds 10,000 owners × 10 items, diffs against the
// same content and commits: the periodic full sync with nothing changed.
func BenchmarkFullRound(b *testing.B) {
	s := newBenchStore(b)
	round := make([]map[benchKey]benchValue, benchOwners)
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		// Building the items is the backend's cost, not the store's.
		b.StopTimer()
		for o := range benchOwners {
			round[o] = benchItems(o, 0)
		}
		b.StartTimer()
		s.BeginFull()
		for o := range benchOwners {
			s.Set(o, round[o])
		}
		if d := s.Diff(); !d.Empty() {
			b.Fatalf("unchanged full round has changes")
		}
		s.Commit()
	}
}

// BenchmarkOneOwnerChanged changes one owner's items in a store of 10,000
// owners × 10 items: the common partial sync.
func BenchmarkOneOwnerChanged(b *testing.B) {
	s := newBenchStore(b)
	// Two new versions of every owner's items, built beforehand: each
	// round moves one owner to the version it does not have.
	var versions [2][]map[benchKey]benchValue
	for v := range versions {
		versions[v] = make([]map[benchKey]benchValue, benchOwners)
		for o := range benchOwners {
			versions[v][o] = benchItems(o, v+1)
		}
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		o := i % benchOwners
		s.Set(o, versions[(i/benchOwners)%2][o])
		if d := s.Diff(); len(d.Updated) != 10 {
			b.Fatalf("updated %d, want 10", len(d.Updated))
		}
		s.Commit()
	}
}
