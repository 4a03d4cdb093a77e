package hnslb

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"time"

	"github.com/nodenet/nodenet/hns"
	"github.com/nodenet/nodenet/proxy"
)

// Sync implements proxy.Backend. A full sync (update.Full, the first one,
// one after a failure, one after the network facts changed) reads HNS
// (the network, its endpoints and all load balancers: three calls) and
// makes it match the whole state, adopting what is already right. A
// partial sync programs what the DiffStore says changed, without reading
// HNS unless a new local pod has to be found.
//
// On error the DiffStore round is aborted and the next sync is full:
// whatever this one wrote is found and adopted then.
func (b *Backend) Sync(ctx context.Context, update proxy.Update) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if update.State == nil {
		// An empty state would delete every load balancer of ours.
		return errors.New("hns proxy: sync without a state")
	}
	f, err := b.facts(ctx)
	if err != nil {
		return fmt.Errorf("hns proxy: %w", err)
	}
	if f.local.ID != b.networkID {
		if b.networkID != "" {
			b.log.Info("The HNS network changed: programming it from scratch", "old", b.networkID, "new", f.local.ID)
		}
		b.reset(f.local.ID)
	}
	st := update.State
	full := update.Full || b.needFull || f.key != b.netKey
	start := time.Now()
	r := b.newRound(ctx, f, st)
	if full {
		err = r.full()
	} else {
		err = r.partial(update.Changed)
	}
	if err != nil {
		b.store.Abort()
		b.needFull = true
		return fmt.Errorf("hns proxy: %s sync: %w", syncKind(full), err)
	}
	b.store.Commit()
	b.refs = r.refs
	b.netKey, b.needFull = f.key, false
	b.log.V(2).Info("Synced HNS load balancers", "full", full, "loadBalancers", len(b.applied), "remoteEndpoints", len(b.refs),
		"writes", r.writes, "elapsed", time.Since(start))
	return nil
}

func syncKind(full bool) string {
	if full {
		return "full"
	}
	return "partial"
}

// full makes HNS match the whole state.
func (r *round) full() error {
	b := r.b
	if err := r.readHNS(); err != nil {
		return err
	}
	want, own := r.planAll()
	r.want = want
	r.refs = countRefs(want, r.vips)
	r.ownership = own
	own.remoteIDs = b.eps.ourRemoteIDs()
	r.planEndpointsFull()
	r.matchListing()
	return r.execute()
}

// readHNS checks the network is still there and lists its endpoints and
// all load balancers; an error (even a transient one) ends the sync: a
// failed read never means "absent".
func (r *round) readHNS() error {
	b, id := r.b, r.facts.local.ID
	start := time.Now()
	_, err := b.hns.GetNetworkByID(r.ctx, id)
	b.observe(OpGetNetwork, start, err)
	if err != nil {
		return fmt.Errorf("read HNS network %s (%s): %w", r.facts.local.Name, id, err)
	}
	if err := r.listEndpoints(); err != nil {
		return err
	}
	return r.listLoadBalancers()
}

// relistEndpoints lists endpoints once per round to resolve a conflict:
// one fresh listing answers every conflict of the round.
func (r *round) relistEndpoints() error {
	if r.epsRelisted {
		return nil
	}
	if err := r.listEndpoints(); err != nil {
		return err
	}
	r.epsRelisted = true
	return nil
}

func (r *round) listEndpoints() error {
	b := r.b
	start := time.Now()
	eps, err := b.hns.ListEndpoints(r.ctx, r.facts.local.ID)
	b.observe(OpListEndpoints, start, err)
	if err != nil {
		return fmt.Errorf("list HNS endpoints: %w", err)
	}
	b.eps.load(eps, r.facts.local)
	return nil
}

func (r *round) listLoadBalancers() error {
	b := r.b
	start := time.Now()
	lbs, err := b.hns.ListLoadBalancers(r.ctx)
	b.observe(OpListLoadBalancers, start, err)
	if err != nil {
		return fmt.Errorf("list HNS load balancers: %w", err)
	}
	r.listed = lbs
	return nil
}

// planAll rebuilds every owner's items into the store (a full round) and
// returns the winning spec per frontend, plus what is ours in HNS.
func (r *round) planAll() (map[frontend]*lbSpec, *ownership) {
	b, st := r.b, r.st
	own := &ownership{serviceCIDRs: b.opts.ServiceCIDRs, addrs: map[netip.Addr]bool{}}
	for _, ip := range r.facts.nodeIP {
		own.addrs[ip] = true
	}
	keys := make([]proxy.ServicePortKey, 0, len(st.ServicePorts))
	for k, sp := range st.ServicePorts {
		keys = append(keys, k)
		addVIPs(own.addrs, sp)
	}
	slices.SortFunc(keys, comparePortKeys)
	b.store.BeginFull()
	want := map[frontend]*lbSpec{}
	set := func(o owner, items map[frontend]*lbSpec) {
		for fe, s := range items {
			want[fe] = s // the later owner wins, as in the store
		}
		b.store.Set(o, items)
	}
	for _, k := range keys {
		set(portOwner(k), r.planner.plan(st.ServicePorts[k]))
	}
	if b.opts.ForwardHealthCheckVIP {
		byService, order := servicesOf(st, keys)
		for _, o := range order {
			set(o, r.planner.healthChecks(byService[o]))
		}
	}
	b.report.forgetAllBut(st)
	return want, own
}

func addVIPs(addrs map[netip.Addr]bool, sp *proxy.ServicePort) {
	if sp.ClusterIP.IsValid() {
		addrs[sp.ClusterIP] = true
	}
	for _, ip := range sp.ExternalIPs {
		addrs[ip] = true
	}
	for _, ip := range sp.LoadBalancerIPs {
		addrs[ip] = true
	}
}

func comparePortKeys(a, b proxy.ServicePortKey) int {
	as, bs := a.String(), b.String()
	switch {
	case as < bs:
		return -1
	case as > bs:
		return 1
	}
	return 0
}

// countRefs counts the specs that need each remote endpoint, and notes
// the ones that hold a cluster IP in vips.
func countRefs(want map[frontend]*lbSpec, vips map[netip.Addr]bool) map[netip.Addr]int {
	refs := map[netip.Addr]int{}
	for fe, s := range want {
		for _, ip := range s.remoteIPs(fe) {
			refs[ip]++
		}
		if s.vipEndpoint {
			vips[fe.vip] = true
		}
	}
	return refs
}

// planEndpointsFull compares the remote endpoints HNS holds with those the
// state needs: missing ones are created, ours with a stale provider
// address replaced, ours nobody needs deleted, and ours holding an
// address of this node's pods deleted before anything else.
func (r *round) planEndpointsFull() {
	v := r.b.eps
	for ip := range r.refs {
		r.ensureRemote(ip)
	}
	for ip, ep := range v.remote {
		if !ep.ours || r.refs[ip] > 0 {
			continue
		}
		if r.shadows(ip) {
			r.early = append(r.early, ep)
		} else {
			r.late = append(r.late, ep)
		}
	}
}

// ensureRemote plans the remote endpoint for ip: nothing when a fitting
// one exists, a replacement for ours with a stale provider address, a
// new one otherwise. Someone else's remote endpoint for the address is
// used as it is (HNS allows one endpoint per address), never changed.
func (r *round) ensureRemote(ip netip.Addr) {
	want := r.remoteSpec(ip)
	have := r.b.eps.remote[ip]
	switch {
	case have == nil:
		if _, local := r.b.eps.local[ip]; !local {
			r.create[ip] = want
		}
	case !have.ours:
		if !have.fits(want) {
			r.b.log.V(2).Info("Using a remote endpoint that is not ours as it is", "ip", ip, "id", have.id, "providerAddress", have.pa, "want", want.pa)
		}
	case !have.fits(want):
		r.early = append(r.early, have)
		r.create[ip] = want
	}
}

func (r *round) remoteSpec(ip netip.Addr) remoteSpec {
	return remoteSpec{ip: ip, pa: r.facts.providerAddress(ip), vip: r.vips[ip]}
}

// shadows reports whether a remote endpoint for ip would hide a local pod.
func (r *round) shadows(ip netip.Addr) bool {
	_, local := r.b.eps.local[ip]
	return local || r.facts.isLocalPodIP(ip)
}

// matchListing records, for each frontend we want, the load balancer HNS
// holds for it (adoption), forgets the ones gone out of band, and marks
// the ours nobody wants (or duplicates) for deletion.
func (r *round) matchListing() {
	b := r.b
	byFE := map[frontend][]*hns.LoadBalancer{}
	listedIDs := map[string]bool{}
	for i := range r.listed {
		lb := &r.listed[i]
		listedIDs[lb.ID] = true
		if fe, ok := frontendOf(lb); ok {
			byFE[fe] = append(byFE[fe], lb)
			continue
		}
		if r.ownership.lb(lb) {
			r.stale = append(r.stale, lb.ID)
		}
	}
	for fe, a := range b.applied {
		if !listedIDs[a.id] {
			delete(b.applied, fe)
		}
	}
	for fe, lbs := range byFE {
		made := b.applied[fe]
		_, wanted := r.want[fe]
		keep := -1
		if wanted {
			keep = 0
			if made != nil {
				keep = max(0, slices.IndexFunc(lbs, func(lb *hns.LoadBalancer) bool { return lb.ID == made.id }))
			}
			b.applied[fe] = &appliedLB{id: lbs[keep].ID, lb: lbs[keep]}
		} else {
			delete(b.applied, fe)
		}
		for i, lb := range lbs {
			if i != keep && (wanted || r.ownership.lb(lb) || (made != nil && made.id == lb.ID)) {
				r.stale = append(r.stale, lb.ID)
			}
		}
	}
	slices.Sort(r.stale)
}

// partial programs the changed service ports.
func (r *round) partial(changed map[proxy.ServicePortKey]struct{}) error {
	b, st := r.b, r.st
	keys := make([]proxy.ServicePortKey, 0, len(changed))
	for k := range changed {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, comparePortKeys)
	for _, k := range keys {
		sp := st.ServicePorts[k]
		if sp == nil {
			b.store.Delete(portOwner(k))
			b.report.forget(k)
			continue
		}
		b.store.Set(portOwner(k), r.planner.plan(sp))
	}
	if b.opts.ForwardHealthCheckVIP {
		r.replanHealthChecks(keys)
	}
	d := b.store.Diff()
	r.refs = b.refs
	if d.Empty() {
		return nil
	}
	delta := map[netip.Addr]int{}
	var newLocal []netip.Addr
	for _, x := range d.Deleted {
		r.want[x.Key] = nil
		r.addRefs(delta, x.Key, x.Value, -1)
	}
	for _, x := range d.Updated {
		r.want[x.Key] = x.New
		r.addRefs(delta, x.Key, x.Old, -1)
		r.addRefs(delta, x.Key, x.New, 1)
		newLocal = appendLocal(newLocal, x.New)
	}
	for _, x := range d.Created {
		r.want[x.Key] = x.Value
		r.addRefs(delta, x.Key, x.Value, 1)
		newLocal = appendLocal(newLocal, x.Value)
	}
	if err := r.findLocal(newLocal); err != nil {
		return err
	}
	r.refs = applyDelta(b.refs, delta)
	r.planEndpointsPartial(delta, newLocal)
	return r.execute()
}

func (r *round) addRefs(delta map[netip.Addr]int, fe frontend, s *lbSpec, n int) {
	for _, ip := range s.remoteIPs(fe) {
		delta[ip] += n
	}
	if s.vipEndpoint && n > 0 {
		r.vips[fe.vip] = true
	}
}

func appendLocal(out []netip.Addr, s *lbSpec) []netip.Addr {
	for _, be := range s.backends {
		if be.kind == backendLocal {
			out = append(out, be.ip)
		}
	}
	return out
}

// applyDelta returns refs plus delta as a new map only when delta changes
// it, so an aborted round leaves the committed counts alone.
func applyDelta(refs, delta map[netip.Addr]int) map[netip.Addr]int {
	changed := false
	for _, n := range delta {
		if n != 0 {
			changed = true
			break
		}
	}
	if !changed {
		return refs
	}
	out := make(map[netip.Addr]int, len(refs)+len(delta))
	for ip, n := range refs {
		out[ip] = n
	}
	for ip, n := range delta {
		if out[ip] += n; out[ip] <= 0 {
			delete(out, ip)
		}
	}
	return out
}

// findLocal makes sure the view knows the local pods a partial round
// needs: a pod created since the last listing costs one ListEndpoints.
func (r *round) findLocal(ips []netip.Addr) error {
	for _, ip := range ips {
		if _, ok := r.b.eps.local[ip]; !ok {
			return r.listEndpoints()
		}
	}
	return nil
}

// planEndpointsPartial plans the remote endpoints whose use count crosses
// zero, and the removal of ours that shadow a now-local pod.
func (r *round) planEndpointsPartial(delta map[netip.Addr]int, newLocal []netip.Addr) {
	v := r.b.eps
	for ip := range delta {
		before, after := r.b.refs[ip], r.refs[ip]
		switch {
		case after > 0 && (before == 0 || v.remote[ip] == nil):
			r.ensureRemote(ip)
		case after == 0 && before > 0:
			if ep := v.remote[ip]; ep != nil && ep.ours {
				r.late = append(r.late, ep)
			}
		}
	}
	for _, ip := range newLocal {
		if ep := v.remote[ip]; ep != nil && ep.ours && r.refs[ip] == 0 && !slices.Contains(r.early, ep) {
			r.early = append(r.early, ep)
			r.late = slices.DeleteFunc(r.late, func(x *remoteEP) bool { return x == ep })
		}
	}
}
