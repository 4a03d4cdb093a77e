package diffstore

import (
	"cmp"
	"maps"
	"slices"
	"testing"

	gocmp "github.com/google/go-cmp/cmp"
)

// op is one call of a round: Set when items is non-nil or set is true,
// Delete when del is true.
type op struct {
	owner string
	items map[string]int
	set   bool // Set with a nil or empty map
	del   bool
}

func set(owner string, kv ...any) op {
	items := make(map[string]int)
	for i := 0; i < len(kv); i += 2 {
		items[kv[i].(string)] = kv[i+1].(int)
	}
	return op{owner: owner, items: items, set: true}
}

func del(owner string) op { return op{owner: owner, del: true} }

// round is one round of calls, what its Diff must say, and whether the
// backend applied it.
type round struct {
	ops   []op
	full  bool
	want  sortedDiff
	abort bool
}

// sortedDiff is a Diff in key order, for comparison.
type sortedDiff struct {
	Created []Item[string, int]
	Updated []Change[string, int]
	Deleted []Item[string, int]
}

func sorted(d Diff[string, int]) sortedDiff {
	byKey := func(a, b Item[string, int]) int { return cmp.Compare(a.Key, b.Key) }
	slices.SortFunc(d.Created, byKey)
	slices.SortFunc(d.Deleted, byKey)
	slices.SortFunc(d.Updated, func(a, b Change[string, int]) int { return cmp.Compare(a.Key, b.Key) })
	return sortedDiff{Created: d.Created, Updated: d.Updated, Deleted: d.Deleted}
}

func created(kv ...any) []Item[string, int] {
	var out []Item[string, int]
	for i := 0; i < len(kv); i += 2 {
		out = append(out, Item[string, int]{Key: kv[i].(string), Value: kv[i+1].(int)})
	}
	return out
}

var deleted = created

func updated(k string, old, new int) Change[string, int] {
	return Change[string, int]{Key: k, Old: old, New: new}
}

func TestStore(t *testing.T) {
	tests := []struct {
		name   string
		rounds []round
		// want is the committed content after the last round.
		want map[string]int
	}{
		{
			name: "a first round creates every item",
			rounds: []round{{
				ops:  []op{set("svc-a", "a1", 1, "a2", 2), set("svc-b", "b1", 3)},
				want: sortedDiff{Created: created("a1", 1, "a2", 2, "b1", 3)},
			}},
			want: map[string]int{"a1": 1, "a2": 2, "b1": 3},
		},
		{
			name: "setting an owner's same items again changes nothing",
			rounds: []round{
				{ops: []op{set("svc-a", "a1", 1)}, want: sortedDiff{Created: created("a1", 1)}},
				{ops: []op{set("svc-a", "a1", 1)}},
			},
			want: map[string]int{"a1": 1},
		},
		{
			name: "a new set replaces the owner's previous one: added, changed and dropped items",
			rounds: []round{
				{ops: []op{set("svc-a", "a1", 1, "a2", 2)}, want: sortedDiff{Created: created("a1", 1, "a2", 2)}},
				{
					ops:  []op{set("svc-a", "a1", 10, "a3", 3)},
					want: sortedDiff{Created: created("a3", 3), Updated: []Change[string, int]{updated("a1", 1, 10)}, Deleted: deleted("a2", 2)},
				},
			},
			want: map[string]int{"a1": 10, "a3": 3},
		},
		{
			name: "a partial round leaves owners it does not touch alone",
			rounds: []round{
				{ops: []op{set("svc-a", "a1", 1), set("svc-b", "b1", 2)}, want: sortedDiff{Created: created("a1", 1, "b1", 2)}},
				{ops: []op{set("svc-b", "b1", 20)}, want: sortedDiff{Updated: []Change[string, int]{updated("b1", 2, 20)}}},
			},
			want: map[string]int{"a1": 1, "b1": 20},
		},
		{
			name: "deleting an owner deletes all its items",
			rounds: []round{
				{ops: []op{set("svc-a", "a1", 1, "a2", 2), set("svc-b", "b1", 3)}, want: sortedDiff{Created: created("a1", 1, "a2", 2, "b1", 3)}},
				{ops: []op{del("svc-a")}, want: sortedDiff{Deleted: deleted("a1", 1, "a2", 2)}},
			},
			want: map[string]int{"b1": 3},
		},
		{
			name: "setting an owner to no items deletes them",
			rounds: []round{
				{ops: []op{set("svc-a", "a1", 1)}, want: sortedDiff{Created: created("a1", 1)}},
				{ops: []op{{owner: "svc-a", set: true}}, want: sortedDiff{Deleted: deleted("a1", 1)}},
			},
			want: map[string]int{},
		},
		{
			name: "deleting an unknown owner changes nothing",
			rounds: []round{
				{ops: []op{set("svc-a", "a1", 1)}, want: sortedDiff{Created: created("a1", 1)}},
				{ops: []op{del("svc-x")}},
			},
			want: map[string]int{"a1": 1},
		},
		{
			name: "a full round deletes the owners it did not set",
			rounds: []round{
				{ops: []op{set("svc-a", "a1", 1), set("svc-b", "b1", 2), set("svc-c", "c1", 3)}, want: sortedDiff{Created: created("a1", 1, "b1", 2, "c1", 3)}},
				{
					full: true,
					ops:  []op{set("svc-a", "a1", 1), set("svc-d", "d1", 4)},
					want: sortedDiff{Created: created("d1", 4), Deleted: deleted("b1", 2, "c1", 3)},
				},
			},
			want: map[string]int{"a1": 1, "d1": 4},
		},
		{
			name: "a full round with nothing set empties the store",
			rounds: []round{
				{ops: []op{set("svc-a", "a1", 1)}, want: sortedDiff{Created: created("a1", 1)}},
				{full: true, want: sortedDiff{Deleted: deleted("a1", 1)}},
			},
			want: map[string]int{},
		},
		{
			name: "a key moving between two owners set in the same round is an update",
			rounds: []round{
				{ops: []op{set("svc-a", "vip", 1), set("svc-b")}, want: sortedDiff{Created: created("vip", 1)}},
				{ops: []op{set("svc-a"), set("svc-b", "vip", 2)}, want: sortedDiff{Updated: []Change[string, int]{updated("vip", 1, 2)}}},
				// svc-a no longer holds the key: deleting it leaves the key alone.
				{ops: []op{del("svc-a")}},
			},
			want: map[string]int{"vip": 2},
		},
		{
			name: "a key taken by another owner leaves the owner not touched in the round",
			rounds: []round{
				{ops: []op{set("svc-a", "vip", 1, "a2", 2)}, want: sortedDiff{Created: created("a2", 2, "vip", 1)}},
				{ops: []op{set("svc-b", "vip", 3)}, want: sortedDiff{Updated: []Change[string, int]{updated("vip", 1, 3)}}},
				{ops: []op{del("svc-a")}, want: sortedDiff{Deleted: deleted("a2", 2)}},
			},
			want: map[string]int{"vip": 3},
		},
		{
			name: "a key moving with an equal value is not reported",
			rounds: []round{
				{ops: []op{set("svc-a", "vip", 1)}, want: sortedDiff{Created: created("vip", 1)}},
				{ops: []op{del("svc-a"), set("svc-b", "vip", 1)}},
				{ops: []op{del("svc-b")}, want: sortedDiff{Deleted: deleted("vip", 1)}},
			},
			want: map[string]int{},
		},
		{
			name: "two owners setting the same key in one round: the later Set wins",
			rounds: []round{
				{ops: []op{set("svc-a", "vip", 1), set("svc-b", "vip", 2)}, want: sortedDiff{Created: created("vip", 2)}},
				// The loser lost the key: deleting it leaves the key alone.
				{ops: []op{del("svc-a")}},
				{ops: []op{del("svc-b")}, want: sortedDiff{Deleted: deleted("vip", 2)}},
			},
			want: map[string]int{},
		},
		{
			name: "an owner setting a held key again loses it to a later Set of another owner",
			rounds: []round{
				{ops: []op{set("svc-a", "vip", 1, "a1", 1)}, want: sortedDiff{Created: created("a1", 1, "vip", 1)}},
				{ops: []op{set("svc-a", "vip", 5, "a1", 1), set("svc-b", "vip", 7)}, want: sortedDiff{Updated: []Change[string, int]{updated("vip", 1, 7)}}},
				{ops: []op{del("svc-a")}, want: sortedDiff{Deleted: deleted("a1", 1)}},
			},
			want: map[string]int{"vip": 7},
		},
		{
			name: "an owner setting a held key again keeps it against an earlier Set of another owner",
			rounds: []round{
				{ops: []op{set("svc-a", "vip", 1)}, want: sortedDiff{Created: created("vip", 1)}},
				{ops: []op{set("svc-b", "vip", 7, "b1", 2), set("svc-a", "vip", 5)}, want: sortedDiff{Created: created("b1", 2), Updated: []Change[string, int]{updated("vip", 1, 5)}}},
				{ops: []op{del("svc-b")}, want: sortedDiff{Deleted: deleted("b1", 2)}},
			},
			want: map[string]int{"vip": 5},
		},
		{
			name: "three owners contesting a key: the last Set wins whatever the map order",
			rounds: []round{
				{ops: []op{set("svc-a", "vip", 1)}, want: sortedDiff{Created: created("vip", 1)}},
				{ops: []op{set("svc-b", "vip", 2), set("svc-a", "vip", 1), set("svc-c", "vip", 3), set("svc-d", "vip", 4)}, want: sortedDiff{Updated: []Change[string, int]{updated("vip", 1, 4)}}},
				{ops: []op{del("svc-a"), del("svc-b"), del("svc-c")}},
			},
			want: map[string]int{"vip": 4},
		},
		{
			name: "an aborted round leaves the baseline as it was and is forgotten",
			rounds: []round{
				{ops: []op{set("svc-a", "a1", 1)}, want: sortedDiff{Created: created("a1", 1)}},
				{ops: []op{set("svc-a", "a1", 2), set("svc-b", "b1", 3)}, want: sortedDiff{Created: created("b1", 3), Updated: []Change[string, int]{updated("a1", 1, 2)}}, abort: true},
				{ops: []op{set("svc-c", "c1", 4)}, want: sortedDiff{Created: created("c1", 4)}},
			},
			want: map[string]int{"a1": 1, "c1": 4},
		},
		{
			name: "an aborted full round deletes nothing",
			rounds: []round{
				{ops: []op{set("svc-a", "a1", 1)}, want: sortedDiff{Created: created("a1", 1)}},
				{full: true, want: sortedDiff{Deleted: deleted("a1", 1)}, abort: true},
				{},
			},
			want: map[string]int{"a1": 1},
		},
		{
			name: "the last call for an owner in a round counts",
			rounds: []round{
				{ops: []op{set("svc-a", "a1", 1)}, want: sortedDiff{Created: created("a1", 1)}},
				{ops: []op{del("svc-a"), set("svc-a", "a1", 1, "a2", 2)}, want: sortedDiff{Created: created("a2", 2)}},
				{ops: []op{set("svc-a", "a1", 5), del("svc-a")}, want: sortedDiff{Deleted: deleted("a1", 1, "a2", 2)}},
			},
			want: map[string]int{},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// Map order varies between runs: repeat to see several.
			for range 20 {
				testRounds(t, tt.rounds, tt.want)
			}
		})
	}
}

func testRounds(t *testing.T, rounds []round, want map[string]int) {
	t.Helper()
	s := New[string, string, int](func(a, b int) bool { return a == b })
	for i, r := range rounds {
		if r.full {
			s.BeginFull()
		}
		for _, o := range r.ops {
			if o.del {
				s.Delete(o.owner)
			} else {
				// The store owns what it is given.
				s.Set(o.owner, maps.Clone(o.items))
			}
		}
		got := sorted(s.Diff())
		if diff := gocmp.Diff(r.want, got); diff != "" {
			t.Fatalf("round %d: diff (-want +got):\n%s", i, diff)
		}
		if again := sorted(s.Diff()); !gocmp.Equal(got, again) {
			t.Fatalf("round %d: a second Diff differs from the first: %v vs %v", i, got, again)
		}
		if r.abort {
			s.Abort()
		} else {
			s.Commit()
		}
	}
	got := make(map[string]int)
	for _, k := range []string{"a1", "a2", "a3", "b1", "c1", "d1", "vip"} {
		if v, ok := s.Get(k); ok {
			got[k] = v
		}
	}
	if diff := gocmp.Diff(want, got); diff != "" {
		t.Fatalf("committed (-want +got):\n%s", diff)
	}
	if s.Len() != len(want) {
		t.Fatalf("Len() = %d, want %d", s.Len(), len(want))
	}
	if d := s.Diff(); !d.Empty() {
		t.Fatalf("a round with no calls after the last commit has changes: %+v", d)
	}
}

func TestDiffSeesSetsMadeAfterAnEarlierDiff(t *testing.T) {
	s := New[string, string, int](nil)
	s.Set("svc-a", map[string]int{"a1": 1})
	if got := len(s.Diff().Created); got != 1 {
		t.Fatalf("created %d, want 1", got)
	}
	s.Set("svc-b", map[string]int{"b1": 2})
	if got := len(s.Diff().Created); got != 2 {
		t.Fatalf("after another Set: created %d, want 2", got)
	}
	s.Commit()
	if v, ok := s.Get("b1"); !ok || v != 2 {
		t.Errorf("Get(b1) = %d, %v; want 2, true", v, ok)
	}
}

func TestNilEqualComparesDeeply(t *testing.T) {
	s := New[string, string, []int](nil)
	s.Set("svc-a", map[string][]int{"a1": {1, 2}})
	s.Commit()
	s.Set("svc-a", map[string][]int{"a1": {1, 2}})
	if d := s.Diff(); !d.Empty() {
		t.Errorf("equal slices reported as changed: %+v", d)
	}
	s.Set("svc-a", map[string][]int{"a1": {1, 3}})
	if d := s.Diff(); len(d.Updated) != 1 {
		t.Errorf("changed slice: %+v, want one update", d)
	}
}
