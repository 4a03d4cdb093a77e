package brain

import (
	"maps"
	"slices"
	"time"

	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodenet/nodenet/proxy"
)

// Changes describes what a Snapshot consumed, for the proxy's metrics.
type Changes struct {
	// ServiceChanges is the number of services whose Service object
	// changed, EndpointChanges the number of EndpointSlice changes, since
	// the previous Snapshot (the *_changes_pending gauges' last values).
	ServiceChanges, EndpointChanges int
	// TriggerTimes are the endpoints.kubernetes.io/last-change-trigger-time
	// annotations of the slices added or updated since the previous
	// Snapshot (network_programming_duration_seconds). Unparsable ones and
	// those older than the Brain are left out, like kube-proxy does.
	TriggerTimes []time.Time
}

// input is one service to recompute: its Service (nil when deleted) and
// its slices sorted by name.
type input struct {
	name   types.NamespacedName
	svc    *v1.Service
	slices []*discoveryv1.EndpointSlice
}

// Snapshot computes the state. It recomputes the services touched since
// the previous Snapshot, or every service when full is true, on the first
// call, or when this node's zone changed. The returned State is a new map
// each time; unchanged ServicePorts keep their pointers. Update.Changed
// holds the keys added, changed (compared field by field) or removed since
// the previous Snapshot. Update.Full is set when full is or on the first
// Snapshot (a zone change recomputes everything but still reports only
// what changed). Bad input is reported here, once per object generation.
func (b *Brain) Snapshot(full bool) (proxy.Update, Changes) {
	b.snapMu.Lock()
	defer b.snapMu.Unlock()

	// The first Snapshot is full, for the backend too: it may hold rules
	// from an earlier run.
	full = full || b.state == nil
	inputs, c, changes, unowned, forget := b.takeChanges(full)
	for _, s := range unowned {
		c.probs.add(kindSlice, s, "no %s label: the slice belongs to no service", discoveryv1.LabelServiceName)
	}

	// Cloning the previous map is the one O(services) step of a partial
	// Snapshot; maps.Clone copies it wholesale (BenchmarkAddOneServiceAt10k).
	state := maps.Clone(b.state)
	if state == nil {
		state = map[proxy.ServicePortKey]*proxy.ServicePort{}
	}
	changed := map[proxy.ServicePortKey]struct{}{}
	for _, in := range inputs {
		b.apply(in.name, c.service(in.svc, in.slices), state, changed)
	}
	b.state = state
	b.flush(c.probs)
	b.forgetReports(forget)

	return proxy.Update{
		State:   &proxy.State{ServicePorts: state, NodeName: c.nodeName, Zone: c.zone},
		Changed: changed,
		Full:    full,
	}, changes
}

// takeChanges collects, under b.mu, what the Snapshot must recompute and
// resets the pending changes. The computing happens after, without b.mu,
// so handlers never wait for it: API objects are never modified, so
// holding their pointers is enough.
func (b *Brain) takeChanges(full bool) ([]input, *computer, Changes, []*discoveryv1.EndpointSlice, []string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	full = full || b.topoChanged
	c := &computer{
		nodeName: b.opts.NodeName,
		zone:     b.zone,
		families: b.opts.Families,
		dsr:      b.opts.DSR,
		log:      b.log,
		probs:    &problems{},
	}
	var names []types.NamespacedName
	if full {
		names = make([]types.NamespacedName, 0, len(b.services)+len(b.computed))
		for name := range b.services {
			names = append(names, name)
		}
		for name := range b.computed {
			if _, ok := b.services[name]; !ok {
				names = append(names, name)
			}
		}
	} else {
		names = make([]types.NamespacedName, 0, len(b.dirty))
		for name := range b.dirty {
			names = append(names, name)
		}
	}
	inputs := make([]input, len(names))
	for i, name := range names {
		in := &inputs[i]
		in.name = name
		in.svc = b.services[name]
		if in.svc == nil {
			continue
		}
		// A copy: the handlers change b.slices while the Snapshot
		// computes without b.mu.
		in.slices = slices.Clone(b.slices[name])
	}

	changes := Changes{ServiceChanges: len(b.svcPending), EndpointChanges: b.epPending, TriggerTimes: b.triggerTimes}
	unowned, forget := b.unowned, b.forget
	clear(b.dirty)
	clear(b.svcPending)
	b.epPending = 0
	b.triggerTimes = nil
	b.topoChanged = false
	b.unowned, b.forget = nil, nil
	return inputs, c, changes, unowned, forget
}

// apply replaces a service's ServicePorts in state with ports, keeping
// the previous pointer of each port that did not change and recording
// every added, changed or removed key in changed.
func (b *Brain) apply(name types.NamespacedName, ports []*proxy.ServicePort, state map[proxy.ServicePortKey]*proxy.ServicePort, changed map[proxy.ServicePortKey]struct{}) {
	old := b.computed[name]
	for i, sp := range ports {
		if j := slices.IndexFunc(old, func(o *proxy.ServicePort) bool { return o.Key == sp.Key }); j >= 0 && old[j].Equal(sp) {
			ports[i] = old[j]
		} else {
			changed[sp.Key] = struct{}{}
		}
		state[sp.Key] = ports[i]
	}
	for _, o := range old {
		if !slices.ContainsFunc(ports, func(sp *proxy.ServicePort) bool { return sp.Key == o.Key }) {
			delete(state, o.Key)
			changed[o.Key] = struct{}{}
		}
	}
	if len(ports) == 0 {
		delete(b.computed, name)
	} else {
		b.computed[name] = ports
	}
}
