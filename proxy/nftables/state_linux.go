package nftables

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strconv"
	"strings"

	"sigs.k8s.io/knftables"

	"github.com/nodenet/nodenet/proxy"
)

// layoutVersion is part of the state fingerprint. Rule texts, object
// names and the skeleton are hashed as written, so most changes to the
// table's layout change the fingerprint by themselves; bump this for a
// change the hashed text does not show (set flags, element spelling, the
// order objects are built in), so a new agent does not adopt a table an
// older one built.
const layoutVersion = 1

// markerPrefix starts the name of the empty chain that records the state
// fingerprint in the table.
const markerPrefix = "state-"

// fingerprint identifies the table's content: the XOR of a hash of the
// skeleton (Options, layout version) and a hash per programmed service
// port (its plan as written, and its owner). XOR makes it independent of
// order and cheap to update as ports come and go. It is a fixed function,
// unlike the registry's seeded hashes, because another process compares
// it.
type fingerprint [2]uint64

func (f fingerprint) xor(g fingerprint) fingerprint { return fingerprint{f[0] ^ g[0], f[1] ^ g[1]} }

// marker names the chain that records f.
func (f fingerprint) marker() string {
	var b [16]byte
	binary.BigEndian.PutUint64(b[:8], f[0])
	binary.BigEndian.PutUint64(b[8:], f[1])
	return markerPrefix + hex.EncodeToString(b[:])
}

// stateHasher hashes plans into fingerprints, reusing one buffer.
type stateHasher struct{ buf []byte }

func (h *stateHasher) str(tag byte, ss ...string) {
	h.buf = append(h.buf, tag)
	for _, s := range ss {
		h.buf = append(h.buf, s...)
		h.buf = append(h.buf, 0)
	}
}

func (h *stateHasher) sum() fingerprint {
	s := sha256.Sum256(h.buf)
	h.buf = h.buf[:0]
	return fingerprint{binary.BigEndian.Uint64(s[:8]), binary.BigEndian.Uint64(s[8:16])}
}

// port hashes what owner's plan puts in the table. The owner is part of
// it: it decides which claim of a shared element wins.
func (h *stateHasher) port(owner string, p *portPlan) fingerprint {
	h.str('o', owner)
	for _, c := range p.chains {
		h.str('c', c.name)
		for _, r := range c.rules {
			h.str('r', r.text, r.comment)
		}
	}
	for _, s := range p.sets {
		h.str('s', s.name, strconv.FormatInt(int64(s.timeout), 10))
	}
	for _, e := range p.elems {
		h.str('e', e.set, e.key, e.value)
	}
	for _, pk := range p.picks {
		h.str('p', pk.name, pk.rule().text)
	}
	return h.sum()
}

// skeletonHash hashes the table's shared part as writeSkeleton writes it,
// which spells out every Option.
func (b *Backend) skeletonHash(tx *txn) fingerprint {
	h := &b.hasher
	h.str('v', strconv.Itoa(layoutVersion), TableName, tableComment)
	h.str('k', tx.String())
	return h.sum()
}

// tableObjects are the names of the table's chains, sets and maps, by
// the type knftables' ListAll files them under.
type tableObjects map[string]map[string]bool

func (o tableObjects) add(typ, name string) {
	if o[typ] == nil {
		o[typ] = map[string]bool{}
	}
	o[typ][name] = true
}

// skeletonObjects returns the objects writeSkeleton declares.
func (b *Backend) skeletonObjects() tableObjects {
	o := tableObjects{}
	for _, bc := range baseChains {
		o.add("chain", bc.name)
	}
	for _, name := range []string{chainServices, chainMasquerading, chainFirewallCheck, chainServiceEPCheck,
		chainNodePortEPCheck, chainClusterIPsCheck, chainReject} {
		o.add("chain", name)
	}
	for name := range b.maps {
		o.add("map", name)
	}
	for _, f := range b.fams {
		o.add("set", f.clusterIPs)
		o.add("set", f.hairpin)
		for _, st := range []struct {
			name     string
			prefixes []netip.Prefix
		}{{f.serviceCIDRs, f.serviceCIDRPrefixes}, {f.localTraffic, f.localTrafficPrefixes}, {f.nodePortAddrs, f.nodePortPrefixes}} {
			if len(st.prefixes) > 0 {
				o.add("set", st.name)
			}
		}
	}
	return o
}

// tableBuild is a table built from a state: what the backend keeps about
// it, and (for adoption) the names of its objects.
type tableBuild struct {
	ports   []*portState // in owner order
	reg     *registry
	picks   map[string]int
	fp      fingerprint
	objects tableObjects // nil unless asked for
}

// buildTable plans the whole table for state. With a transaction it
// writes the table into it (after the skeleton the caller wrote); with
// names it also collects the names of every object.
func (b *Backend) buildTable(state *proxy.State, tx *txn, names bool) *tableBuild {
	// The registry grows as it fills: sized up front for 120k elements a
	// map takes 256 tables of 1024 slots at once, twice what growing
	// leaves, and that peak of live heap raised the GC goal by ~14 MiB
	// at 10k×10 (BenchmarkFirstSyncMemory10kx10; issue 16).
	t := &tableBuild{reg: newRegistry(0), picks: map[string]int{}, fp: b.skeletonFP}
	for key := range state.ServicePorts {
		if sp := b.wanted(state, key); sp != nil {
			t.ports = append(t.ports, &portState{owner: key.String(), sp: sp})
		}
	}
	slices.SortFunc(t.ports, func(a, b *portState) int { return strings.Compare(a.owner, b.owner) })
	if names {
		t.objects = b.skeletonObjects()
	}
	var elems []element
	for _, ps := range t.ports {
		plan := b.planPort(ps.sp)
		ps.hash = b.hasher.port(ps.owner, plan)
		t.fp = t.fp.xor(ps.hash)
		for _, p := range plan.picks {
			if t.picks[p.name] == 0 {
				if tx != nil {
					writeChain(tx, &knftables.Chain{Name: p.name}, []rule{p.rule()})
				}
				if names {
					t.objects.add("chain", p.name)
				}
			}
			t.picks[p.name]++
		}
		if names {
			for _, c := range plan.chains {
				t.objects.add("chain", c.name)
			}
			for _, s := range plan.sets {
				t.objects.add("set", s.name)
			}
		}
		elems = t.reg.build(ps.owner, plan.elems, elems[:0])
		if tx == nil {
			continue
		}
		// A port's objects only reference its own chains and sets, the
		// pick chains above and the skeleton, so writing port by port
		// keeps every reference after what it references.
		for _, c := range plan.chains {
			tx.Add(&knftables.Chain{Name: c.name})
		}
		for _, s := range plan.sets {
			tx.Add(affinitySetObject(s, ps.sp.Key.Family))
		}
		for _, c := range plan.chains {
			for _, r := range c.rules {
				tx.Add(r.object(c.name))
			}
		}
		for _, e := range elems {
			tx.Element(false, e.set, e.key, e.value, b.isMap(e.set))
		}
	}
	if names {
		t.objects.add("chain", t.fp.marker())
	}
	return t
}

// install makes t what the backend believes the table holds.
func (b *Backend) install(t *tableBuild) {
	b.ports = make(map[proxy.ServicePortKey]*portState, len(t.ports))
	for _, ps := range t.ports {
		b.ports[ps.sp.Key] = ps
	}
	b.reg, b.picks, b.fp = t.reg, t.picks, t.fp
	clear(b.stale)
}

// adopt takes over the table an earlier run left when it is exactly the
// table state would build: its marker records the same fingerprint and
// it holds exactly the chains, sets and maps the build would create (so
// no chain was deleted, and no emptied chain waits for deletion). It
// writes nothing, so affinity sets keep their clients. It returns why it
// did not adopt ("" if it did).
func (b *Backend) adopt(ctx context.Context, state *proxy.State) (string, error) {
	listed, err := b.tr.list(ctx)
	if isNotFound(err) {
		return "there is no table", nil
	}
	if err != nil {
		return "", fmt.Errorf("nftables: list table inet %s: %w", TableName, err)
	}
	if !slices.ContainsFunc(listed["chain"], func(name string) bool { return strings.HasPrefix(name, markerPrefix) }) {
		return "it records no state", nil // spares planning a table to replace
	}
	t := b.buildTable(state, nil, true)
	got := tableObjects{}
	for typ, names := range listed {
		for _, name := range names {
			got.add(typ, name)
		}
	}
	if !got["chain"][t.fp.marker()] {
		return "its state differs", nil
	}
	for _, typ := range []string{"chain", "set", "map"} {
		if !maps.Equal(got[typ], t.objects[typ]) {
			return "its " + typ + "s differ", nil
		}
	}
	for typ, names := range got {
		if t.objects[typ] == nil && len(names) > 0 {
			return "it holds " + typ + "s", nil
		}
	}
	b.install(t)
	return "", nil
}
