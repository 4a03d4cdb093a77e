package hnslb

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"time"

	"github.com/nodenet/nodenet/hns"
	"github.com/nodenet/nodenet/proxy"
)

// maxConsecutiveErrors ends a round early: that many failed calls in a
// row mean HNS is down (restarting), not that some objects are bad, and
// the runner's backoff serves better than thousands of doomed calls.
const maxConsecutiveErrors = 8

// maxReportedErrors bounds the errors a failed sync reports.
const maxReportedErrors = 5

// round is one sync: what to write, and the outcome so far.
type round struct {
	b       *Backend
	ctx     context.Context
	facts   *netFacts
	st      *proxy.State
	planner *planner

	// want holds the frontends this round writes: a spec, or nil to
	// remove the load balancer.
	want map[frontend]*lbSpec
	// refs are the remote endpoint use counts once the round succeeds.
	refs map[netip.Addr]int
	// vips are the remote endpoint addresses that hold cluster IPs.
	vips map[netip.Addr]bool
	// Endpoint work: remote endpoints to create; ours to delete before
	// the load balancer writes (replaced, or shadowing a local pod) and
	// after them (no longer used).
	create map[netip.Addr]remoteSpec
	early  []*remoteEP
	late   []*remoteEP
	// stale are ours HNS holds that nothing wants (full rounds).
	stale []string
	// listed is the load balancer listing of this round, if any.
	listed    []hns.LoadBalancer
	ownership *ownership
	// conflicted are the frontends a create found taken this round;
	// relisted says load balancers were listed to resolve one.
	conflicted map[frontend]bool
	relisted   bool
	// staleBackends are the frontends a create found naming an endpoint
	// HNS no longer has; epsRelisted says endpoints were listed again
	// this round (relistEndpoints) to resolve one, or a taken address.
	staleBackends map[frontend]bool
	epsRelisted   bool

	writes      int
	blocked     []frontend // load balancers left for a missing endpoint
	errs        []error
	errCount    int
	consecutive int
}

func (b *Backend) newRound(ctx context.Context, f *netFacts, st *proxy.State) *round {
	return &round{
		b: b, ctx: ctx, facts: f, st: st,
		planner: &planner{facts: f, opts: &b.opts, report: b.report},
		want:    map[frontend]*lbSpec{},
		vips:    map[netip.Addr]bool{},
		create:  map[netip.Addr]remoteSpec{},

		conflicted:    map[frontend]bool{},
		staleBackends: map[frontend]bool{},
	}
}

// aborted reports whether the round gave up.
func (r *round) aborted() bool {
	return r.consecutive >= maxConsecutiveErrors || r.ctx.Err() != nil
}

// done records the outcome of one write.
func (r *round) done(err error) error {
	r.writes++
	if err == nil {
		r.consecutive = 0
		return nil
	}
	r.consecutive++
	r.errCount++
	if len(r.errs) < maxReportedErrors {
		r.errs = append(r.errs, err)
	}
	return err
}

func (r *round) result() error {
	if err := r.ctx.Err(); err != nil && r.errCount == 0 {
		return err
	}
	if r.errCount == 0 && len(r.blocked) > 0 {
		return fmt.Errorf("%d load balancers (%s first) wait for a remote endpoint that is missing", len(r.blocked), r.blocked[0])
	}
	if r.errCount == 0 {
		return nil
	}
	err := errors.Join(r.errs...)
	if more := r.errCount - len(r.errs); more > 0 {
		err = fmt.Errorf("%w (and %d more errors)", err, more)
	}
	if r.consecutive >= maxConsecutiveErrors {
		err = fmt.Errorf("stopped after %d failed HNS calls in a row: %w", r.consecutive, err)
	}
	return err
}

// execute writes the round in an order HNS accepts: endpoints a load
// balancer still uses cannot be deleted, an address can hold only one
// endpoint, and a load balancer needs its endpoints to exist.
//
//  1. delete stale load balancers, and settle the load balancers that use
//     an endpoint about to be replaced or removed early;
//  2. delete those endpoints, create the new remote endpoints;
//  3. delete, update and create the load balancers;
//  4. delete the remote endpoints nothing uses any more.
func (r *round) execute() error {
	doomed := map[string]bool{}
	for _, ep := range r.early {
		doomed[strings.ToUpper(ep.id)] = true
	}
	for _, id := range r.stale {
		r.deleteStale(id)
	}
	settled := r.settleDoomed(doomed)
	for _, ep := range r.early {
		r.deleteEndpoint(ep, true)
	}
	r.createEndpoints()
	fes := make([]frontend, 0, len(r.want))
	for fe := range r.want {
		if !settled[fe] {
			fes = append(fes, fe)
		}
	}
	slices.SortFunc(fes, frontendLess)
	for _, fe := range fes {
		if r.want[fe] == nil {
			r.removeLB(fe)
		}
	}
	for _, fe := range fes {
		if r.want[fe] != nil {
			r.writeLB(fe)
		}
	}
	for _, ep := range r.late {
		if r.refs[ep.ip] == 0 {
			r.deleteEndpoint(ep, false)
		}
	}
	return r.result()
}

// settleDoomed handles each load balancer of ours that uses an endpoint
// about to be deleted: written now when its new definition needs no new
// endpoint, else deleted (and created in step 3).
func (r *round) settleDoomed(doomed map[string]bool) map[frontend]bool {
	settled := map[frontend]bool{}
	if len(doomed) == 0 {
		return settled
	}
	var fes []frontend
	for fe, a := range r.b.applied {
		if usesAny(a.lb, doomed) {
			fes = append(fes, fe)
		}
	}
	slices.SortFunc(fes, frontendLess)
	for _, fe := range fes {
		s, wanted := r.want[fe]
		if !wanted {
			s = r.b.committed(fe)
		}
		if s != nil && r.ready(fe, s, doomed) {
			r.want[fe] = s
			r.writeLB(fe)
			settled[fe] = true
			continue
		}
		r.removeLB(fe)
		if s == nil {
			settled[fe] = true
		} else {
			r.want[fe] = s
		}
	}
	return settled
}

// ready reports whether every remote endpoint s needs exists and stays.
func (r *round) ready(fe frontend, s *lbSpec, doomed map[string]bool) bool {
	for _, ip := range s.remoteIPs(fe) {
		ep := r.b.eps.remote[ip]
		if _, local := r.b.eps.local[ip]; ep == nil && local {
			continue
		}
		if ep == nil || doomed[strings.ToUpper(ep.id)] {
			return false
		}
	}
	return true
}

// committed returns the spec the store holds for fe, if any.
func (b *Backend) committed(fe frontend) *lbSpec {
	s, _ := b.store.Get(fe)
	return s
}

// resolve turns a spec into the HNS load balancer, or nil when none of
// its backends has an endpoint (a local pod HNS does not show is left
// out until the next full sync finds it). ok is false while a remote
// endpoint it needs is missing (its creation failed).
func (r *round) resolve(fe frontend, s *lbSpec) (lb *hns.LoadBalancer, ok bool) {
	v := r.b.eps
	ids := make([]string, 0, len(s.backends))
	for _, be := range s.backends {
		var id string
		switch be.kind {
		case backendLocal:
			id = v.local[be.ip]
			if id == "" {
				r.b.log.V(2).Info("Local endpoint not found in HNS; leaving it out", "ip", be.ip, "frontend", fe.String(), "service", s.service.String())
				continue
			}
		case backendRemote:
			if ep := v.remote[be.ip]; ep != nil {
				id = ep.id
			} else if id = v.local[be.ip]; id == "" {
				return nil, false
			}
		case backendHost:
			if id = v.hostID; id == "" {
				continue
			}
		}
		ids = append(ids, id)
	}
	if s.vipEndpoint && v.remote[fe.vip] == nil {
		return nil, false
	}
	if len(ids) == 0 {
		return nil, true
	}
	return hnsLB(fe, s, ids), true
}

// writeLB makes HNS hold want[fe]: nothing when it already does, an
// in-place update where HNS supports it, else delete and create.
func (r *round) writeLB(fe frontend) {
	if r.aborted() {
		return
	}
	want, ok := r.resolve(fe, r.want[fe])
	if !ok {
		// A remote endpoint it needs is missing (its creation failed, or
		// it vanished): fail the sync without counting toward an abort,
		// and let the next full sync build it.
		r.blocked = append(r.blocked, fe)
		return
	}
	if want == nil {
		r.removeLB(fe)
		return
	}
	have := r.b.applied[fe]
	switch {
	case have == nil:
		r.createLB(fe, want)
	case have.lb != nil && sameLB(have.lb, want):
	default:
		r.replaceLB(fe, have, want)
	}
}

func (r *round) replaceLB(fe frontend, have *appliedLB, want *hns.LoadBalancer) {
	b := r.b
	if b.modifyLB {
		start := time.Now()
		lb, err := b.hns.UpdateLoadBalancer(r.ctx, have.id, want)
		b.observe(OpUpdateLoadBalancer, start, err)
		switch {
		case err == nil && sameLB(lb, want):
			r.done(nil)
			b.applied[fe] = &appliedLB{id: lb.ID, lb: lb}
			return
		case err == nil:
			// HNS 15.4 answers success and keeps the old endpoints
			// (kubernetes issue 131466): what it answers is what it holds,
			// so an answer that differs from the request means in-place
			// updates cannot be trusted on this host.
			r.done(nil)
			b.log.Info("HNS accepted an in-place load balancer update but kept the old definition; deleting and re-creating from now on",
				"frontend", fe.String(), "id", lb.ID)
			b.modifyLB = false
			have = &appliedLB{id: lb.ID, lb: lb}
			b.applied[fe] = have
		case hns.IsNotSupported(err):
			// kube-proxy saw HNS versions that announce in-place updates
			// and refuse them: fall back for good.
			b.log.Info("HNS refused an in-place load balancer update; deleting and re-creating from now on", "err", err)
			b.modifyLB = false
		case hns.IsNotFound(err):
			delete(b.applied, fe)
			r.createLB(fe, want)
			return
		default:
			b.applied[fe].lb = nil
			r.done(fmt.Errorf("update load balancer %s (%s): %w", fe, have.id, err))
			return
		}
	}
	if !r.deleteLB(fe, have.id) {
		return
	}
	r.createLB(fe, want)
}

func (r *round) createLB(fe frontend, want *hns.LoadBalancer) {
	if r.aborted() {
		return
	}
	b := r.b
	start := time.Now()
	lb, err := b.hns.CreateLoadBalancer(r.ctx, want)
	b.observe(OpCreateLoadBalancer, start, err)
	if err == nil {
		r.done(nil)
		b.applied[fe] = &appliedLB{id: lb.ID, lb: lb}
		return
	}
	if (hns.IsPortAlreadyExists(err) || hns.IsAlreadyExists(err)) && !r.conflicted[fe] {
		r.conflicted[fe] = true
		r.done(nil)
		r.adoptConflict(fe, want, err)
		return
	}
	if hns.IsNotFound(err) && !r.staleBackends[fe] {
		r.staleBackends[fe] = true
		r.done(nil)
		r.retryWithFreshEndpoints(fe, err)
		return
	}
	r.done(fmt.Errorf("create load balancer %s: %w", fe, err))
}

// retryWithFreshEndpoints handles a create that names an endpoint HNS no
// longer has: CNI deleted a pod's endpoint (HNS allows it under a load
// balancer, microsoft/wcnscripts PR 21) and made a new one for the same
// address since our last listing. One listing per round refreshes the
// view; the frontend is written again, once (staleBackends).
func (r *round) retryWithFreshEndpoints(fe frontend, cause error) {
	if err := r.relistEndpoints(); err != nil {
		r.done(fmt.Errorf("create load balancer %s: %w; then: %w", fe, cause, err))
		return
	}
	// The failed create left no applied load balancer for fe, so
	// writeLB resolves it again and creates it.
	r.writeLB(fe)
}

// adoptConflict handles "this frontend is taken" (0x803b0013, or 0xb7
// for a load balancer HNS restored after a restart): the load balancer
// that holds it (made by an earlier attempt whose answer was lost,
// restored by HNS, or left behind by an earlier run, kubernetes PR
// 137530) is looked up and adopted when it has our shape (then updated
// or replaced to what we want), deleted otherwise, and the create tried
// once more. Never a retry loop: one conflict per frontend and round.
func (r *round) adoptConflict(fe frontend, want *hns.LoadBalancer, cause error) {
	// One fresh listing per round answers every conflict of the round.
	if !r.relisted {
		if err := r.listLoadBalancers(); err != nil {
			r.done(fmt.Errorf("create load balancer %s: %w; then: %w", fe, cause, err))
			return
		}
		r.relisted = true
	}
	holder := r.holderOf(fe)
	if holder == nil {
		r.done(fmt.Errorf("create load balancer %s: %w (and no load balancer with that frontend is listed)", fe, cause))
		return
	}
	if got, ok := frontendOf(holder); ok && got == fe {
		have := &appliedLB{id: holder.ID, lb: holder}
		r.b.applied[fe] = have
		if sameLB(holder, want) {
			r.b.log.V(2).Info("Adopted the load balancer holding our frontend", "frontend", fe.String(), "id", holder.ID)
			return
		}
		r.replaceLB(fe, have, want)
		return
	}
	// Another shape (more VIPs or port mappings): it cannot be one of
	// our frontends, so it goes and ours takes its place.
	r.b.log.Info("Deleting a load balancer that holds a service frontend", "frontend", fe.String(), "id", holder.ID,
		"vips", holder.FrontendVIPs, "portMappings", len(holder.PortMappings))
	r.deleteStale(holder.ID)
	if !r.aborted() && r.consecutive == 0 {
		r.createLB(fe, want)
	}
}

// holderOf returns the listed load balancer that serves frontend fe (its
// VIP, or no VIP for a node port of the family; protocol; port), if any.
func (r *round) holderOf(fe frontend) *hns.LoadBalancer {
	for i := range r.listed {
		lb := &r.listed[i]
		if holds(lb, fe) {
			return lb
		}
	}
	return nil
}

func holds(lb *hns.LoadBalancer, fe frontend) bool {
	vipMatch := false
	if !fe.vip.IsValid() {
		vipMatch = len(lb.FrontendVIPs) == 0 && (lb.Flags&hns.LoadBalancerFlagsIPv6 != 0) == fe.v6
	}
	for _, s := range lb.FrontendVIPs {
		if a, err := netip.ParseAddr(s); err == nil && a.Unmap() == fe.vip {
			vipMatch = true
		}
	}
	if !vipMatch {
		return false
	}
	for _, pm := range lb.PortMappings {
		if pm.Protocol == fe.proto && pm.ExternalPort == fe.port {
			return true
		}
	}
	return false
}

// removeLB deletes the load balancer of fe, if HNS holds one.
func (r *round) removeLB(fe frontend) {
	if a := r.b.applied[fe]; a != nil {
		r.deleteLB(fe, a.id)
	}
}

// deleteLB deletes load balancer id of fe; gone already is fine.
func (r *round) deleteLB(fe frontend, id string) bool {
	if r.aborted() {
		return false
	}
	b := r.b
	start := time.Now()
	err := b.hns.DeleteLoadBalancer(r.ctx, id)
	b.observe(OpDeleteLoadBalancer, start, err)
	if err != nil && !hns.IsNotFound(err) {
		b.applied[fe].lb = nil
		r.done(fmt.Errorf("delete load balancer %s (%s): %w", fe, id, err))
		return false
	}
	r.done(nil)
	delete(b.applied, fe)
	return true
}

// deleteStale deletes a load balancer of ours nothing wants.
func (r *round) deleteStale(id string) {
	if r.aborted() {
		return
	}
	b := r.b
	start := time.Now()
	err := b.hns.DeleteLoadBalancer(r.ctx, id)
	b.observe(OpDeleteLoadBalancer, start, err)
	if err != nil && !hns.IsNotFound(err) {
		r.done(fmt.Errorf("delete stale load balancer %s: %w", id, err))
		return
	}
	r.done(nil)
	b.log.V(2).Info("Deleted a stale load balancer", "id", id)
}
