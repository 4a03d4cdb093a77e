package nftables

import (
	"maps"
	"slices"

	"sigs.k8s.io/knftables"

	"github.com/nodenet/nodenet/proxy"
)

// diff collects what a reconcile must write: chains and affinity sets are
// named after their service port (a name never moves between ports), so
// they are diffed port by port; elements can be shared, so they go
// through the registry.
type diff struct {
	b *Backend

	addChains []string // chains to create
	flush     []string // existing chains to empty (rewritten or removed)
	rules     []*chainPlan
	delSets   []string
	addSets   []*knftables.Set

	updates map[proxy.ServicePortKey]*proxy.ServicePort // nil: removed
	hashes  map[proxy.ServicePortKey]fingerprint        // of the re-planned ports
	fp      fingerprint                                 // the state fingerprint after the diff
	removed []string                                    // chains to delete later
	unstale []string                                    // stale chains in use again

	// pickUse counts the change in users of each shared pick chain.
	pickUse  map[string]int
	pickDefs map[string]pickPlan
}

func newDiff(b *Backend) *diff {
	return &diff{
		b:        b,
		updates:  map[proxy.ServicePortKey]*proxy.ServicePort{},
		hashes:   map[proxy.ServicePortKey]fingerprint{},
		fp:       b.fp,
		pickUse:  map[string]int{},
		pickDefs: map[string]pickPlan{},
	}
}

// port diffs one service port from old (nil: not in the table) to sp
// (nil: to be removed).
func (d *diff) port(key proxy.ServicePortKey, old *portState, sp *proxy.ServicePort) {
	owner := key.String()
	oldPlan, newPlan := &portPlan{}, &portPlan{}
	if old != nil {
		owner = old.owner
		oldPlan = d.b.planPort(old.sp)
		d.fp = d.fp.xor(old.hash)
	}
	if sp != nil {
		newPlan = d.b.planPort(sp)
		h := d.b.hasher.port(owner, newPlan)
		d.hashes[key] = h
		d.fp = d.fp.xor(h)
	}
	d.updates[key] = sp

	rewriteAll := d.diffSets(key.Family, oldPlan.sets, newPlan.sets)
	d.diffChains(oldPlan.chains, newPlan.chains, rewriteAll)
	for _, p := range oldPlan.picks {
		d.pickUse[p.name]--
	}
	for _, p := range newPlan.picks {
		d.pickUse[p.name]++
		d.pickDefs[p.name] = p
	}
	d.b.reg.replace(owner, oldPlan.elems, newPlan.elems)
}

// diffSets diffs one port's affinity sets. A set whose timeout changed is
// deleted and added again, which it can only be while no rule references
// it: rewriteAll is then true, and the port's chains are rewritten even
// if their rules read the same.
func (d *diff) diffSets(f proxy.IPFamily, oldSets, newSets []setPlan) (rewriteAll bool) {
	was := map[string]setPlan{}
	for _, s := range oldSets {
		was[s.name] = s
	}
	stays := map[string]bool{}
	for _, s := range newSets {
		stays[s.name] = true
		o, ok := was[s.name]
		if ok && o.timeout == s.timeout {
			continue
		}
		if ok {
			rewriteAll = true
			d.delSets = append(d.delSets, s.name)
		}
		d.addSets = append(d.addSets, affinitySetObject(s, f))
	}
	for _, s := range oldSets {
		if !stays[s.name] {
			d.delSets = append(d.delSets, s.name)
		}
	}
	return rewriteAll
}

// diffChains diffs one port's chains: a chain whose rules changed (or
// every chain, with rewriteAll) is flushed and rewritten; a new one is
// created, or reused while it still waits for deletion as stale; one the
// port no longer has is flushed, to be deleted later.
func (d *diff) diffChains(oldChains, newChains []*chainPlan, rewriteAll bool) {
	was := map[string][]rule{}
	for _, c := range oldChains {
		was[c.name] = c.rules
	}
	stays := map[string]bool{}
	for _, c := range newChains {
		stays[c.name] = true
		rules, existed := was[c.name]
		if existed && !rewriteAll && slices.Equal(rules, c.rules) {
			continue
		}
		_, stale := d.b.stale[c.name]
		switch {
		case existed:
			d.flush = append(d.flush, c.name)
		case stale:
			d.flush = append(d.flush, c.name)
			d.unstale = append(d.unstale, c.name)
		default:
			d.addChains = append(d.addChains, c.name)
		}
		d.rules = append(d.rules, c)
	}
	for _, c := range oldChains {
		if !stays[c.name] {
			d.flush = append(d.flush, c.name)
			d.removed = append(d.removed, c.name)
		}
	}
}

// write adds the diff to tx in an order where everything exists before it
// is referenced and is unreferenced before it is deleted.
func (d *diff) write(tx *txn) {
	var unusedPicks []string
	for _, name := range slices.Sorted(maps.Keys(d.pickUse)) {
		before := d.b.picks[name]
		after := before + d.pickUse[name]
		switch {
		case before == 0 && after > 0:
			writeChain(tx, &knftables.Chain{Name: name}, []rule{d.pickDefs[name].rule()})
		case before > 0 && after == 0:
			unusedPicks = append(unusedPicks, name)
		}
	}
	for _, name := range d.addChains {
		tx.Add(&knftables.Chain{Name: name})
	}
	for _, name := range d.flush {
		tx.Flush(&knftables.Chain{Name: name})
	}
	dels, adds := d.b.reg.ops()
	for _, e := range dels {
		tx.Element(true, e.set, e.key, e.value, d.b.isMap(e.set))
	}
	for _, name := range d.delSets {
		tx.Delete(&knftables.Set{Name: name})
	}
	for _, s := range d.addSets {
		tx.Add(s)
	}
	for _, c := range d.rules {
		for _, r := range c.rules {
			tx.Add(r.object(c.name))
		}
	}
	for _, e := range adds {
		tx.Element(false, e.set, e.key, e.value, d.b.isMap(e.set))
	}
	// Only rules flushed above jumped to these.
	for _, name := range unusedPicks {
		tx.Delete(&knftables.Chain{Name: name})
	}
}

// commit records the diff as programmed.
func (d *diff) commit() {
	b := d.b
	for key, sp := range d.updates {
		if sp == nil {
			delete(b.ports, key)
		} else {
			ps := b.ports[key]
			if ps == nil {
				ps = &portState{owner: key.String()}
				b.ports[key] = ps
			}
			ps.sp = sp
			if h, ok := d.hashes[key]; ok {
				ps.hash = h
			}
		}
	}
	b.fp = d.fp
	for name, delta := range d.pickUse {
		if n := b.picks[name] + delta; n > 0 {
			b.picks[name] = n
		} else {
			delete(b.picks, name)
		}
	}
	now := b.now()
	for _, name := range d.removed {
		b.stale[name] = now
	}
	for _, name := range d.unstale {
		delete(b.stale, name)
	}
}
