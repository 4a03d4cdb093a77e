package nftables

import (
	"hash/maphash"
	"slices"
	"strings"
)

// registry tracks which service ports claim each set and map element.
// Elements are shared (two ports of one service share a cluster IP; a
// misconfigured cluster may give two services one external IP and port),
// so the table holds the claim of the first owner in key order, and an
// element leaves the table with its last claim.
//
// It holds every element of the table, so it is compact: elements are
// known by a 128-bit hash of their set and key (the strings live in the
// plans, which the diff recomputes), and only shared elements have a
// list of claims.
type registry struct {
	seeds [2]maphash.Seed
	h     maphash.Hash
	first map[elemHash]claim   // the winning claim of each element
	more  map[elemHash][]claim // the other claims of shared elements, in owner order
	// touched holds each element changed since the last ops call, with
	// the winning claim it had before (the zero claim if none).
	touched map[elemHash]touch
}

type elemHash [2]uint64

type claim struct {
	owner string // the owning ServicePortKey's String()
	value string
}

type touch struct {
	set, key string
	was      claim
}

// newRegistry returns an empty registry with room for about size
// elements (a full table's build knows roughly how many).
func newRegistry(size int) *registry {
	return &registry{
		seeds:   [2]maphash.Seed{maphash.MakeSeed(), maphash.MakeSeed()},
		first:   make(map[elemHash]claim, size),
		more:    map[elemHash][]claim{},
		touched: map[elemHash]touch{},
	}
}

func (r *registry) hash(set, key string) elemHash {
	var h elemHash
	for i, seed := range r.seeds {
		r.h.SetSeed(seed)
		r.h.WriteString(set)
		r.h.WriteByte(0)
		r.h.WriteString(key)
		h[i] = r.h.Sum64()
	}
	return h
}

func (r *registry) touch(h elemHash, e element) {
	if _, ok := r.touched[h]; !ok {
		r.touched[h] = touch{set: e.set, key: e.key, was: r.first[h]}
	}
}

// claims returns all claims of h, in owner order.
func (r *registry) claims(h elemHash) []claim {
	c, ok := r.first[h]
	if !ok {
		return nil
	}
	return append([]claim{c}, r.more[h]...)
}

func (r *registry) setClaims(h elemHash, cs []claim) {
	switch {
	case len(cs) == 0:
		delete(r.first, h)
		delete(r.more, h)
	case len(cs) == 1:
		r.first[h] = cs[0]
		delete(r.more, h)
	default:
		r.first[h] = cs[0]
		r.more[h] = cs[1:]
	}
}

func (r *registry) put(h elemHash, e element, owner string) {
	r.touch(h, e)
	if c, ok := r.first[h]; !ok || (c.owner == owner && len(r.more[h]) == 0) {
		r.first[h] = claim{owner, e.value}
		return
	}
	cs := r.claims(h)
	i, found := slices.BinarySearchFunc(cs, owner, func(c claim, o string) int { return strings.Compare(c.owner, o) })
	if found {
		cs[i].value = e.value
	} else {
		cs = slices.Insert(cs, i, claim{owner, e.value})
	}
	r.setClaims(h, cs)
}

func (r *registry) drop(h elemHash, e element, owner string) {
	r.touch(h, e)
	if c, ok := r.first[h]; ok && c.owner == owner && len(r.more[h]) == 0 {
		delete(r.first, h)
		return
	}
	cs := r.claims(h)
	if i := slices.IndexFunc(cs, func(c claim) bool { return c.owner == owner }); i >= 0 {
		r.setClaims(h, slices.Delete(cs, i, i+1))
	}
}

// replace makes owner's claims old into new. A plan lists an element at
// most once per key; if not, the first listing wins.
func (r *registry) replace(owner string, old, new []element) {
	keep := make(map[elemHash]struct{}, len(new))
	for _, e := range new {
		h := r.hash(e.set, e.key)
		if _, dup := keep[h]; dup {
			continue
		}
		keep[h] = struct{}{}
		r.put(h, e, owner)
	}
	for _, e := range old {
		h := r.hash(e.set, e.key)
		if _, ok := keep[h]; !ok {
			r.drop(h, e, owner)
		}
	}
}

// ops returns the element deletions and additions that bring the table
// from the winners before the touches to the winners now, and forgets the
// touches.
func (r *registry) ops() (dels, adds []element) {
	for h, t := range r.touched {
		now := r.first[h]
		was := t.was
		if was == now || (was.owner != "" && now.owner != "" && was.value == now.value) {
			continue
		}
		if was.owner != "" {
			dels = append(dels, element{set: t.set, key: t.key})
		}
		if now.owner != "" {
			adds = append(adds, element{set: t.set, key: t.key, value: now.value})
		}
	}
	clear(r.touched)
	byID := func(a, b element) int {
		if c := strings.Compare(a.set, b.set); c != 0 {
			return c
		}
		return strings.Compare(a.key, b.key)
	}
	slices.SortFunc(dels, byID)
	slices.SortFunc(adds, byID)
	return dels, adds
}

// build claims elems for owner in a registry being filled in owner
// order, and appends to out the elements owner is the first to claim:
// exactly the winners, in plan order, for a table built from scratch.
func (r *registry) build(owner string, elems []element, out []element) []element {
	for _, e := range elems {
		h := r.hash(e.set, e.key)
		c, ok := r.first[h]
		if !ok {
			r.first[h] = claim{owner, e.value}
			out = append(out, e)
			continue
		}
		more := r.more[h]
		if c.owner != owner && (len(more) == 0 || more[len(more)-1].owner != owner) {
			r.more[h] = append(more, claim{owner, e.value})
		}
	}
	return out
}
