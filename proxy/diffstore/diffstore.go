// Package diffstore tells a backend exactly which objects to create, update
// and delete: each sync the backend rebuilds the items of the owners that
// changed (usually one owner per service port), and the store diffs them
// against what the backend last applied successfully (KEP-2104's DiffStore
// idea). A round is committed only when the backend applied it, so a failed
// sync is retried from the same baseline.
//
// A Store is not safe for concurrent use: a backend uses it from its sync.
package diffstore

import (
	"reflect"
	"slices"
)

// Store holds the committed items of every owner and one pending round.
//
// A round is a series of Set and Delete calls (plus BeginFull when it
// covers every owner), then Diff to see what changed, then Commit when the
// backend applied the changes or Abort when it did not.
//
// Keys are unique across owners: when an owner Sets a key another owner
// holds, the key moves to it (reported as an update if its value changed).
// When two owners Set the same key in one round, the later Set wins.
type Store[O comparable, K comparable, V any] struct {
	equal func(a, b V) bool

	// Committed baseline: owners[o][k] == v exactly when index[k] is
	// {o, v}.
	owners map[O]map[K]V
	index  map[K]owned[O, V]

	// Pending round. pending[o] is the owner's new set (or its deletion);
	// seq orders Sets so the later one wins a contested key.
	pending map[O]pendingSet[K, V]
	seq     int
	full    bool

	// diff caches the round's Diff until the round changes.
	diff *computed[O, K, V]
}

type pendingSet[K comparable, V any] struct {
	items   map[K]V
	deleted bool
	seq     int
}

type owned[O comparable, V any] struct {
	owner O
	value V
}

// computed is a round's Diff plus what Commit needs to apply it, so that
// Commit costs no more than the changes.
type computed[O comparable, K comparable, V any] struct {
	diff Diff[K, V]
	// writes are the index entries the round creates or changes.
	writes []keyed[K, owned[O, V]]
	// removed are the keys the round deletes.
	removed []K
	// taken are keys leaving an owner's committed or pending set for
	// another owner's.
	taken []keyed[K, O]
	// gone are the owners leaving the store.
	gone []O
}

type keyed[K comparable, T any] struct {
	key K
	val T
}

// Item is a key and its value.
type Item[K comparable, V any] struct {
	Key   K
	Value V
}

// Change is a key whose value changed.
type Change[K comparable, V any] struct {
	Key      K
	Old, New V
}

// Diff is what a round changes relative to the committed baseline. Each
// slice is in no particular order (map order): a backend that needs one
// sorts them. Deleted, then Updated, then Created is the order that never
// asks for two objects with the same identity at once.
type Diff[K comparable, V any] struct {
	// Created holds keys new to the store, with their new values.
	Created []Item[K, V]
	// Updated holds keys whose value changed (also when the key moved to
	// another owner); a key whose value is equal is not reported.
	Updated []Change[K, V]
	// Deleted holds keys no owner has any more, with their old values.
	Deleted []Item[K, V]
}

// Empty reports whether the diff changes nothing.
func (d Diff[K, V]) Empty() bool {
	return len(d.Created) == 0 && len(d.Updated) == 0 && len(d.Deleted) == 0
}

// New returns an empty store whose values are compared with equal
// (reflect.DeepEqual when nil).
func New[O, K comparable, V any](equal func(a, b V) bool) *Store[O, K, V] {
	if equal == nil {
		equal = func(a, b V) bool { return reflect.DeepEqual(a, b) }
	}
	return &Store[O, K, V]{
		equal:   equal,
		owners:  make(map[O]map[K]V),
		index:   make(map[K]owned[O, V]),
		pending: make(map[O]pendingSet[K, V]),
	}
}

// Set gives owner's complete set of items for this round, replacing its
// previous set. The store keeps items and drops from it any key another
// owner takes: the caller must not use the map afterwards.
func (s *Store[O, K, V]) Set(owner O, items map[K]V) {
	s.seq++
	s.pending[owner] = pendingSet[K, V]{items: items, seq: s.seq}
	s.diff = nil
}

// Delete removes owner and all its items this round.
func (s *Store[O, K, V]) Delete(owner O) {
	s.seq++
	s.pending[owner] = pendingSet[K, V]{deleted: true, seq: s.seq}
	s.diff = nil
}

// BeginFull marks this round as covering every owner: the owners not Set
// in it are deleted. It may be called at any point of the round.
func (s *Store[O, K, V]) BeginFull() {
	s.full = true
	s.diff = nil
}

// Diff returns the pending round's changes against the committed baseline.
// Its cost is proportional to the items of the owners touched in the
// round, or to the store's size in a full round. The slices are the
// caller's to keep or modify.
func (s *Store[O, K, V]) Diff() Diff[K, V] {
	d := s.compute().diff
	return Diff[K, V]{
		Created: slices.Clone(d.Created),
		Updated: slices.Clone(d.Updated),
		Deleted: slices.Clone(d.Deleted),
	}
}

// compute works out the round's diff once: compare the owners' new sets
// with their old ones, then settle the keys that changed owner, then find
// the keys nobody holds any more.
func (s *Store[O, K, V]) compute() *computed[O, K, V] {
	if s.diff != nil {
		return s.diff
	}
	r := &computed[O, K, V]{}
	arrivals, shrunk := s.compareOwners(r)
	s.settleArrivals(r, arrivals)
	s.collectDeleted(r, arrivals, shrunk)
	s.diff = r
	return r
}

// compareOwners makes one pass over the round's items. A key its owner
// held before is compared within the owner's own small maps; only a key
// new to its owner needs the index, and which owner wins it is known only
// at the end of the pass: arrivals[k] is the winner. shrunk are the
// owners that may have dropped keys.
func (s *Store[O, K, V]) compareOwners(r *computed[O, K, V]) (arrivals map[K]owned[O, V], shrunk []O) {
	// evicted are keys whose owner Set them again but lost them to a
	// later Set of another owner.
	var evicted map[K]struct{}
	for o, p := range s.pending {
		old := s.owners[o]
		if p.deleted {
			r.gone = append(r.gone, o)
			if len(old) > 0 {
				shrunk = append(shrunk, o)
			}
			continue
		}
		stays := 0
		for k, v := range p.items {
			if prev, ok := old[k]; ok {
				stays++
				if !s.equal(prev, v) {
					r.diff.Updated = append(r.diff.Updated, Change[K, V]{Key: k, Old: prev, New: v})
					r.writes = append(r.writes, keyed[K, owned[O, V]]{k, owned[O, V]{owner: o, value: v}})
				}
				continue
			}
			wins, evicts := s.contest(r, arrivals, o, p.seq, k)
			if !wins {
				continue
			}
			if evicts {
				if evicted == nil {
					evicted = make(map[K]struct{})
				}
				evicted[k] = struct{}{}
			}
			if arrivals == nil {
				arrivals = make(map[K]owned[O, V])
			}
			arrivals[k] = owned[O, V]{owner: o, value: v}
		}
		if stays < len(old) {
			shrunk = append(shrunk, o)
		}
	}

	// An evicted key's old owner compared it as its own: drop that.
	if len(evicted) > 0 {
		r.diff.Updated = slices.DeleteFunc(r.diff.Updated, func(c Change[K, V]) bool { _, ok := evicted[c.Key]; return ok })
		r.writes = slices.DeleteFunc(r.writes, func(w keyed[K, owned[O, V]]) bool { _, ok := evicted[w.key]; return ok })
	}
	return arrivals, shrunk
}

// contest decides, as far as the pass has got, whether owner o, Set at
// seq, takes k, a key new to it. The later Set wins, against another
// owner new to k and against k's committed owner Setting it again; r.taken
// records the loser. evicts is true when o wins k from its committed owner
// Setting it again.
func (s *Store[O, K, V]) contest(r *computed[O, K, V], arrivals map[K]owned[O, V], o O, seq int, k K) (wins, evicts bool) {
	if prev, ok := arrivals[k]; ok {
		if s.pending[prev.owner].seq > seq {
			r.taken = append(r.taken, keyed[K, O]{k, o})
			return false, false
		}
		r.taken = append(r.taken, keyed[K, O]{k, prev.owner})
		return true, false
	}
	cur, held := s.index[k]
	if !held {
		return true, false
	}
	if cp, ok := s.pending[cur.owner]; ok && !cp.deleted {
		if _, again := cp.items[k]; again {
			if cp.seq > seq {
				r.taken = append(r.taken, keyed[K, O]{k, o})
				return false, false
			}
			evicts = true
		}
	}
	r.taken = append(r.taken, keyed[K, O]{k, cur.owner})
	return true, evicts
}

// settleArrivals reports each key that came to a new owner: created when
// no owner held it, updated when its value changed.
func (s *Store[O, K, V]) settleArrivals(r *computed[O, K, V], arrivals map[K]owned[O, V]) {
	for k, a := range arrivals {
		cur, held := s.index[k]
		switch {
		case !held:
			r.diff.Created = append(r.diff.Created, Item[K, V]{Key: k, Value: a.value})
		case !s.equal(cur.value, a.value):
			r.diff.Updated = append(r.diff.Updated, Change[K, V]{Key: k, Old: cur.value, New: a.value})
		}
		r.writes = append(r.writes, keyed[K, owned[O, V]]{k, a})
	}
}

// collectDeleted reports the keys that go: held by an owner that dropped
// some this round (or by any owner not Set in a full round) and wanted by
// nobody.
func (s *Store[O, K, V]) collectDeleted(r *computed[O, K, V], arrivals map[K]owned[O, V], shrunk []O) {
	gone := func(o O, keep map[K]V) {
		for k, v := range s.owners[o] {
			if _, moved := arrivals[k]; moved {
				continue
			}
			if _, kept := keep[k]; kept {
				continue
			}
			r.diff.Deleted = append(r.diff.Deleted, Item[K, V]{Key: k, Value: v})
			r.removed = append(r.removed, k)
		}
	}
	for _, o := range shrunk {
		gone(o, s.pending[o].items)
	}
	if s.full {
		for o := range s.owners {
			if _, ok := s.pending[o]; !ok {
				r.gone = append(r.gone, o)
				gone(o, nil)
			}
		}
	}
}

// Commit makes the pending round the baseline: call it once the backend
// applied the round's Diff. Its cost is that of the changes plus the
// owners touched.
func (s *Store[O, K, V]) Commit() {
	r := s.compute()
	for _, o := range r.gone {
		delete(s.owners, o)
	}
	for o, p := range s.pending {
		if !p.deleted {
			s.owners[o] = p.items
		}
	}
	for _, t := range r.taken {
		delete(s.owners[t.val], t.key)
	}
	for _, k := range r.removed {
		delete(s.index, k)
	}
	for _, w := range r.writes {
		s.index[w.key] = w.val
	}
	s.reset()
}

// Abort forgets the pending round: the baseline stays as it was, and the
// next round starts empty (a backend that failed usually retries with a
// full round).
func (s *Store[O, K, V]) Abort() { s.reset() }

func (s *Store[O, K, V]) reset() {
	// A fresh map: clearing one that once held every owner costs its
	// capacity, every round.
	s.pending = make(map[O]pendingSet[K, V])
	s.seq = 0
	s.full = false
	s.diff = nil
}

// Get returns the committed value of key.
func (s *Store[O, K, V]) Get(key K) (V, bool) {
	e, ok := s.index[key]
	return e.value, ok
}

// Len returns the number of committed keys.
func (s *Store[O, K, V]) Len() int { return len(s.index) }
