package hns

import (
	"errors"
	"slices"
	"time"
)

// Fault makes matching calls fail. Exactly one of Every, Rate or Sequence
// says when.
type Fault struct {
	// Op restricts the fault to one operation; empty matches every op
	// (or every write op with Writes).
	Op Op
	// Writes restricts an Op-less fault to state-changing operations.
	Writes bool
	// Every fails every Nth matching call (1 = all of them).
	Every int
	// Rate fails each matching call with this probability, from the
	// simulator's seeded random source (reproducible per Seed).
	Rate float64
	// Sequence scripts matching calls in order: the k-th one returns
	// Sequence[k] (nil lets it through). The rule is spent after the last.
	Sequence []error
	// Err is the error for Every and Rate. Default: a transient error.
	Err error
	// AfterApply applies the operation before failing, like an RPC that
	// timed out after HNS committed: the object exists but the caller
	// was told it failed.
	AfterApply bool
}

type faultRule struct {
	Fault
	matched int
	next    error
}

// InjectFault adds a fault rule and returns a function that removes it.
func (s *Simulator) InjectFault(f Fault) (remove func()) {
	r := &faultRule{Fault: f}
	s.mu.Lock()
	s.faults = append(s.faults, r)
	s.mu.Unlock()
	return func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		for i, x := range s.faults {
			if x == r {
				s.faults = append(s.faults[:i], s.faults[i+1:]...)
				return
			}
		}
	}
}

// ClearFaults removes every fault rule.
func (s *Simulator) ClearFaults() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults = nil
}

// matchFault returns the first rule that fires for this call. s.mu held.
func (s *Simulator) matchFault(op Op) *faultRule {
	for _, r := range s.faults {
		if r.Op != "" && r.Op != op {
			continue
		}
		if r.Op == "" && r.Writes && !op.IsWrite() {
			continue
		}
		r.matched++
		switch {
		case len(r.Sequence) > 0:
			if r.matched > len(r.Sequence) {
				continue
			}
			if err := r.Sequence[r.matched-1]; err != nil {
				r.next = err
				return r
			}
		case r.Every > 0:
			if r.matched%r.Every == 0 {
				r.next = r.Err
				return r
			}
		case r.Rate > 0:
			if s.rng.Float64() < r.Rate {
				r.next = r.Err
				return r
			}
		}
	}
	return nil
}

// errorFor is the error an injected fault returns: the rule's own, else
// a transient one. unsourced: a fault is a test's script, not a model of
// HNS, so it has no source; transient is the class real outages have
// (kubernetes issue 139519: every call fails while HNS restarts).
func (r *faultRule) errorFor(op Op, object string) error {
	err := r.next
	if err == nil {
		return &Error{Op: op, Kind: KindTransient, Object: object, Msg: "injected fault"}
	}
	var e *Error
	if errors.As(err, &e) {
		return err
	}
	return &Error{Op: op, Kind: KindUnknown, Object: object, Msg: "injected fault", Err: err}
}

// SetLatency delays every call of op (every op when op is empty) by d,
// honoring the caller's context.
func (s *Simulator) SetLatency(op Op, d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.latency[op] = d
}

// latencyFor returns op's delay. s.mu held.
func (s *Simulator) latencyFor(op Op) time.Duration {
	if d, ok := s.latency[op]; ok {
		return d
	}
	return s.latency[""]
}

// RestartOptions describes a simulated HNS service restart.
type RestartOptions struct {
	// Duration is how long every call fails with a transient error.
	Duration time.Duration
}

type restartState struct {
	until time.Time
}

// SimulateRestart starts an HNS service restart. Until Duration has
// passed on the simulator's clock every call fails transiently with
// RPC_S_SERVER_UNAVAILABLE, Version, Features, Get and List included
// (kubernetes issue 139519: "GetHNSNetwork failed because HNS was down",
// "GetLoadBalancer calls also failed"). When it is over:
//   - networks flagged EnableNonPersistent are gone with their endpoints
//     (that is what the flag means; endpoints vanishing on an HNS restart
//     are reported in projectcalico/calico issue 5164), and so are the
//     load balancers and namespace attachments that used them;
//   - persistent networks and their endpoints are kept;
//   - HNS restores every load balancer whose endpoints survived from its
//     backup ("rehydration", issue 139519), under the same ID; creating
//     one of their frontends again fails with ERROR_ALREADY_EXISTS (0xb7,
//     frontendTaken) until the restored load balancer is deleted or
//     updated.
func (s *Simulator) SimulateRestart(o RestartOptions) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.restart = &restartState{until: s.opts.Now().Add(o.Duration)}
}

// checkRestart fails the call while a restart is in progress, with
// RPC_S_SERVER_UNAVAILABLE (winerror.h; CodeServerUnavailable says why
// that code), and applies its effects once it is over, as SimulateRestart
// describes (kubernetes issue 139519). s.mu held.
func (s *Simulator) checkRestart(op Op, object string) error {
	if s.restart == nil {
		return nil
	}
	if s.opts.Now().Before(s.restart.until) {
		return &Error{Op: op, Kind: KindTransient, Object: object, Msg: "the HNS service is restarting", Code: CodeServerUnavailable}
	}
	s.restart = nil
	s.dropNonPersistent()
	s.restoreLoadBalancers()
	return nil
}

// dropNonPersistent removes what an HNS restart loses: networks created
// with hcn.EnableNonPersistent (hnslib hcn/hcnnetwork.go; flannel's vxlan
// backend sets it, pkg/backend/vxlan/device_windows.go) and their
// endpoints (endpoints vanishing on an HNS restart: projectcalico/calico
// issue 5164). s.mu held.
func (s *Simulator) dropNonPersistent() {
	for id, n := range s.networks {
		if n.Flags&NetworkFlagsEnableNonPersistent == 0 {
			continue
		}
		for epID, ep := range s.endpoints {
			if ep.HostComputeNetwork == id {
				s.forgetEndpoint(epID)
				s.dropLoadBalancersUsing(epID)
			}
		}
		delete(s.networks, id)
	}
}

// restoreLoadBalancers marks the load balancers left after
// dropNonPersistent as restored from HNS's backup (kubernetes issue
// 139519: HNS rehydrates load balancers after a restart). s.mu held.
func (s *Simulator) restoreLoadBalancers() {
	for id := range s.lbs {
		s.restoredLBs[id] = true
	}
}

// dropLoadBalancersUsing removes the load balancers that use endpoint id,
// for a restart that lost the endpoint's network. unsourced: that HNS
// restores only load balancers whose endpoints survived (issue 139519
// says it restores what it had, not what becomes of the others); kept so
// a restart never leaves a load balancer to a network that is gone.
// s.mu held.
func (s *Simulator) dropLoadBalancersUsing(id string) {
	for lbID, lb := range s.lbs {
		if slices.Contains(lb.HostComputeEndpoints, id) {
			delete(s.lbs, lbID)
		}
	}
}
