package hnslb

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"time"

	"github.com/nodenet/nodenet/hns"
)

// createEndpoints creates the planned remote endpoints.
func (r *round) createEndpoints() {
	ips := make([]netip.Addr, 0, len(r.create))
	for ip := range r.create {
		ips = append(ips, ip)
	}
	slices.SortFunc(ips, netip.Addr.Compare)
	for _, ip := range ips {
		if r.aborted() {
			return
		}
		r.createEndpoint(r.create[ip], true)
	}
}

func (r *round) createEndpoint(want remoteSpec, retry bool) {
	b := r.b
	start := time.Now()
	ep, err := b.hns.CreateEndpoint(r.ctx, want.endpoint(r.facts.local.ID, b.eps.hostMAC))
	b.observe(OpCreateEndpoint, start, err)
	switch {
	case err == nil:
		r.done(nil)
		b.eps.remote[want.ip] = &remoteEP{id: ep.ID, ip: want.ip, pa: want.pa, ours: true}
	case hns.IsAlreadyExists(err) && retry:
		r.done(nil)
		r.adoptEndpoint(want, err)
	default:
		r.done(fmt.Errorf("create remote endpoint %s: %w", want.ip, err))
	}
}

// adoptEndpoint handles "an endpoint holds this address": after a fresh
// listing, ours that fits is adopted, ours that doesn't is replaced, and
// anyone else's (a local pod, another agent's remote endpoint) is used as
// it is.
func (r *round) adoptEndpoint(want remoteSpec, cause error) {
	if err := r.relistEndpoints(); err != nil {
		r.done(fmt.Errorf("create remote endpoint %s: %w; then: %w", want.ip, cause, err))
		return
	}
	v := r.b.eps
	have := v.remote[want.ip]
	switch {
	case have != nil && have.ours && !have.fits(want):
		if r.deleteEndpoint(have, true) {
			r.createEndpoint(want, false)
		}
	case have != nil:
		r.b.log.V(2).Info("Adopted the endpoint holding a remote backend's address", "ip", want.ip, "id", have.id, "ours", have.ours)
	case v.local[want.ip] != "":
		r.b.log.V(2).Info("A remote backend's address is a local endpoint; using it", "ip", want.ip)
	default:
		r.done(fmt.Errorf("create remote endpoint %s: %w (and no endpoint with that address is listed)", want.ip, cause))
	}
}

// deleteEndpoint deletes one of our remote endpoints. One that a load
// balancer still uses (not ours, or one whose update failed) is kept and
// tried again by the next full sync.
func (r *round) deleteEndpoint(ep *remoteEP, early bool) bool {
	if r.aborted() {
		return false
	}
	b := r.b
	start := time.Now()
	err := b.hns.DeleteEndpoint(r.ctx, ep.id)
	b.observe(OpDeleteEndpoint, start, err)
	switch {
	case err == nil || hns.IsNotFound(err):
		r.done(nil)
		if b.eps.remote[ep.ip] == ep || (b.eps.remote[ep.ip] != nil && b.eps.remote[ep.ip].id == ep.id) {
			delete(b.eps.remote, ep.ip)
		}
		return true
	case hns.IsInUse(err):
		r.done(nil)
		b.log.Info("A load balancer still uses a remote endpoint of ours; keeping it for now", "ip", ep.ip, "id", ep.id, "replacing", early, "err", err)
		return false
	default:
		r.done(fmt.Errorf("delete remote endpoint %s (%s): %w", ep.ip, ep.id, err))
		return false
	}
}

// ourRemoteIDs returns the IDs of our remote endpoints, upper case.
func (v *endpointView) ourRemoteIDs() map[string]bool {
	out := map[string]bool{}
	for _, ep := range v.remote {
		if ep.ours {
			out[strings.ToUpper(ep.id)] = true
		}
	}
	return out
}
