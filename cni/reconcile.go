package cni

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/klog/v2"

	"github.com/nodenet/nodenet/ipam"
)

// SandboxLister lists the pod sandboxes the container runtime has
// (cni/cri reads them over CRI).
type SandboxLister interface {
	// PodSandboxIDs returns the ID of every pod sandbox the runtime has,
	// whatever its state. A sandbox's ID is the CNI container ID of its
	// pod's attachments.
	PodSandboxIDs(ctx context.Context) ([]string, error)
}

// Defaults and bounds of ReconcilerOptions.
const (
	// maxReconcileInterval is the longest default time between two passes.
	maxReconcileInterval = time.Minute
	// minReconcileInterval is the shortest.
	minReconcileInterval = time.Second
)

// ReconcilerOptions configure a SandboxReconciler.
type ReconcilerOptions struct {
	// Server is the CNI server whose allocations are reconciled.
	Server *Server
	// Sandboxes lists the runtime's pod sandboxes.
	Sandboxes SandboxLister
	// GracePeriod is how old an allocation must be before it may be
	// released (config cni.orphanGracePeriod); it must be positive.
	GracePeriod time.Duration
	// Interval is the time between two passes. Default: GracePeriod/4,
	// between a second and a minute.
	Interval time.Duration
	// Registerer, if set, gets the reconciler's metrics.
	Registerer prometheus.Registerer
	// Logger logs releases and runtime failures. Default: klog.Background().
	Logger *klog.Logger
}

// Metric names of the SandboxReconciler.
const (
	MetricOrphansReleased = "nodenet_cni_orphaned_attachments_released_total"
	MetricReconciles      = "nodenet_cni_sandbox_reconciles_total"
)

// SandboxReconciler releases the attachments (addresses and wiring) that
// belong to no pod sandbox of the container runtime. They are what is left
// when the agent dies during an ADD: the runtime never sees the result, so
// it neither keeps the sandbox nor sends a DEL later (containerd 2.2 sends
// no CNI GC either). An attachment is released only when
//
//   - the runtime answered the sandbox list (a runtime that is down or
//     fails releases nothing), and does not list its container ID in any
//     state (a NOTREADY sandbox still holds its addresses: the runtime will
//     send its DEL);
//   - its allocations and its last successful ADD are older than
//     GracePeriod: a sandbox is listed only once RunPodSandbox returns,
//     after its ADD;
//   - no CNI request for its container is in flight (the per-container
//     lock is free);
//
// and it is released the way a DEL releases it: wiring (interface,
// hostPorts) first, then the addresses. An allocation file that names no
// owner at all (the agent was killed between creating and filling it) is
// removed once older than GracePeriod.
type SandboxReconciler struct {
	opts ReconcilerOptions
	log  klog.Logger

	released prometheus.Counter
	runs     *prometheus.CounterVec

	mu     sync.Mutex
	status ReconcileStatus
}

// ReconcileStatus is what a SandboxReconciler has done since it started.
type ReconcileStatus struct {
	// GracePeriod and Interval are the reconciler's settings.
	GracePeriod, Interval time.Duration
	// LastRun is when the last pass ended; zero before the first.
	LastRun time.Time
	// LastError says what failed in the last pass (when the runtime could
	// not be read, nothing was released); empty when it succeeded.
	LastError string
	// Sandboxes is how many sandboxes the runtime listed in the last pass
	// that read them.
	Sandboxes int
	// Released counts the attachments released; LastReleased is the most
	// recent of them.
	Released     int
	LastReleased []OrphanRelease
}

// OrphanRelease is one attachment released for belonging to no sandbox;
// its Attachment is empty for an allocation that named no owner.
type OrphanRelease struct {
	Attachment
	// IPs are the addresses it held; Allocated when the oldest was
	// handed out.
	IPs       []netip.Addr
	Allocated time.Time
	// Released is when it was released.
	Released time.Time
}

// NewReconciler checks opts and returns a reconciler that does nothing
// until Run or Reconcile.
func NewReconciler(opts ReconcilerOptions) (*SandboxReconciler, error) {
	switch {
	case opts.Server == nil:
		return nil, errors.New("sandbox reconciler: no CNI server")
	case opts.Sandboxes == nil:
		return nil, errors.New("sandbox reconciler: no sandbox lister")
	case opts.GracePeriod <= 0:
		return nil, fmt.Errorf("sandbox reconciler: grace period %s is not positive", opts.GracePeriod)
	}
	if opts.Interval <= 0 {
		opts.Interval = min(max(opts.GracePeriod/4, minReconcileInterval), maxReconcileInterval)
	}
	log := klog.Background()
	if opts.Logger != nil {
		log = *opts.Logger
	}
	r := &SandboxReconciler{
		opts: opts,
		log:  log.WithName("sandbox-reconciler"),
		released: prometheus.NewCounter(prometheus.CounterOpts{
			Name: MetricOrphansReleased,
			Help: "Pod attachments (addresses, interface, hostPorts) the agent released because no pod sandbox of the container runtime holds them, and allocations it removed because they name no owner.",
		}),
		runs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: MetricReconciles,
			Help: "Passes comparing the agent's address allocations with the container runtime's pod sandboxes, by result (success, error: nothing released).",
		}, []string{"result"}),
	}
	r.status.GracePeriod, r.status.Interval = opts.GracePeriod, opts.Interval
	if opts.Registerer != nil {
		for _, c := range []prometheus.Collector{r.released, r.runs} {
			if err := opts.Registerer.Register(c); err != nil {
				return nil, fmt.Errorf("sandbox reconciler: register metrics: %w", err)
			}
		}
	}
	return r, nil
}

// Status returns what the reconciler has done so far.
func (r *SandboxReconciler) Status() ReconcileStatus {
	r.mu.Lock()
	defer r.mu.Unlock()
	st := r.status
	st.LastReleased = slices.Clone(st.LastReleased)
	return st
}

// Run reconciles at once and then every Interval until ctx ends; it
// returns nil then. Failures are logged and recorded in Status, never
// returned: the next pass tries again.
func (r *SandboxReconciler) Run(ctx context.Context) error {
	r.log.Info("Comparing address allocations with the runtime's pod sandboxes", "gracePeriod", r.opts.GracePeriod, "interval", r.opts.Interval)
	t := time.NewTicker(r.opts.Interval)
	defer t.Stop()
	var lastErr string
	for {
		_, err := r.Reconcile(ctx)
		if ctx.Err() != nil {
			return nil
		}
		msg := ""
		if err != nil && !errors.Is(err, errNotReady) { // nothing to compare before the network exists
			msg = err.Error()
		}
		switch {
		case msg != "" && msg != lastErr:
			r.log.Error(err, "Comparing the address allocations with the runtime's pod sandboxes failed")
		case msg != "":
			r.log.V(2).Info("Comparing the address allocations with the runtime's pod sandboxes still fails", "err", msg)
		case lastErr != "":
			r.log.Info("Comparing the address allocations with the runtime's pod sandboxes works again")
		}
		lastErr = msg
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// Reconcile runs one pass: it lists the runtime's sandboxes and releases
// the attachments that qualify (see SandboxReconciler). An error reading
// the sandboxes or the allocations means nothing was released; an error
// releasing one attachment is returned after the others were tried.
func (r *SandboxReconciler) Reconcile(ctx context.Context) ([]OrphanRelease, error) {
	s := r.opts.Server
	// The cutoff is taken before the list: an attachment allocated before
	// it and still not listed after it has had the whole grace period.
	cutoff := s.opts.Now().Add(-r.opts.GracePeriod)
	if !s.hasNetwork() {
		return nil, errNotReady
	}
	ids, err := r.opts.Sandboxes.PodSandboxIDs(ctx)
	if err != nil {
		r.finish(nil, -1, err)
		return nil, err
	}
	held := make(map[string]bool, len(ids))
	for _, id := range ids {
		held[id] = true
	}
	released, err := s.releaseOrphans(ctx, held, cutoff, r.log)
	r.finish(released, len(ids), err)
	return released, err
}

// finish records a pass; sandboxes < 0 means the runtime wasn't read.
func (r *SandboxReconciler) finish(released []OrphanRelease, sandboxes int, err error) {
	result := "success"
	if err != nil {
		result = "error"
	}
	r.runs.WithLabelValues(result).Inc()
	r.released.Add(float64(len(released)))
	r.mu.Lock()
	defer r.mu.Unlock()
	r.status.LastRun = r.opts.Server.opts.Now()
	r.status.LastError = ""
	if err != nil {
		r.status.LastError = err.Error()
	}
	if sandboxes >= 0 {
		r.status.Sandboxes = sandboxes
	}
	if len(released) > 0 {
		r.status.Released += len(released)
		r.status.LastReleased = released
	}
}

// hasNetwork reports whether the server has its network (and IPAM).
func (s *Server) hasNetwork() bool {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.nw != nil
}

// orphanCandidate is an attachment no listed sandbox holds, with its
// allocations.
type orphanCandidate struct {
	Attachment
	ips            []netip.Addr
	oldest, newest time.Time
}

// releaseOrphans releases every attachment whose container held does not
// list, whose allocations were all made before cutoff and that no request
// is working on, as a DEL would. Allocations that reserve an address of
// the node network or predate host-local's interface names are left
// alone, as GC leaves them. An allocation made before cutoff that names no
// owner at all (its writer was killed between creating the file and
// writing it; the agent dying mid-ADD does that too) has no wiring and no
// request to wait for: its file is removed.
func (s *Server) releaseOrphans(ctx context.Context, held map[string]bool, cutoff time.Time, log klog.Logger) ([]OrphanRelease, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.nw == nil {
		return nil, errNotReady
	}
	allocs, err := s.alloc.List()
	if err != nil {
		return nil, wrapf(err, "list allocations")
	}
	candidates := map[Attachment]*orphanCandidate{}
	var order []Attachment
	var unowned []ipam.Allocation
	for _, al := range allocs {
		if al.ContainerID == "" && !s.isReserved(al.IP) {
			if al.Allocated.Before(cutoff) {
				unowned = append(unowned, al)
			}
			continue
		}
		if held[al.ContainerID] || !s.releasable(al, log) {
			continue
		}
		a := Attachment{ContainerID: al.ContainerID, IfName: al.IfName}
		c := candidates[a]
		if c == nil {
			c = &orphanCandidate{Attachment: a, oldest: al.Allocated, newest: al.Allocated}
			candidates[a] = c
			order = append(order, a)
		}
		c.ips = append(c.ips, al.IP)
		if al.Allocated.Before(c.oldest) {
			c.oldest = al.Allocated
		}
		if al.Allocated.After(c.newest) {
			c.newest = al.Allocated
		}
	}
	var released []OrphanRelease
	var errs []error
	for _, a := range order {
		c := candidates[a]
		if !c.newest.Before(cutoff) {
			log.V(4).Info("An attachment no sandbox holds is younger than the grace period", "containerID", a.ContainerID, "ifname", a.IfName, "allocated", c.newest)
			continue
		}
		rel, err := s.releaseOrphan(ctx, c, cutoff, log)
		if err != nil {
			errs = append(errs, fmt.Errorf("container %s interface %s: %w", a.ContainerID, a.IfName, err))
			continue
		}
		if rel != nil {
			released = append(released, *rel)
		}
	}
	for _, al := range unowned {
		ok, err := s.alloc.ReleaseUnowned(al.IP)
		if err != nil {
			errs = append(errs, fmt.Errorf("address %s that names no owner: %w", al.IP, err))
			continue
		}
		if !ok {
			continue
		}
		rel := OrphanRelease{IPs: []netip.Addr{al.IP}, Allocated: al.Allocated, Released: s.opts.Now()}
		log.Info("Released an address whose allocation names no owner (its writer died between creating and filling the file)",
			"ip", al.IP, "age", rel.Released.Sub(al.Allocated).Round(time.Second))
		released = append(released, rel)
	}
	return released, errors.Join(errs...)
}

// releasable reports whether an allocation is one reconciliation may
// release at all (see releaseOrphans).
func (s *Server) releasable(al ipam.Allocation, log klog.Logger) bool {
	switch {
	case s.isReserved(al.IP):
		return false // the source VIP a migrated node's old scripts reserved
	case al.IfName == "":
		log.V(2).Info("An old-format allocation belongs to a container the runtime does not list; remove it by hand", "containerID", al.ContainerID, "ip", al.IP)
		return false
	}
	return true
}

// releaseOrphan releases one candidate unless a request is working on its
// container or it changed since it was listed; nil, nil when it was left.
func (s *Server) releaseOrphan(ctx context.Context, c *orphanCandidate, cutoff time.Time, log klog.Logger) (*OrphanRelease, error) {
	unlock, ok := s.locks.tryLock(c.ContainerID)
	if !ok {
		log.V(2).Info("A CNI request for a container no sandbox holds is in flight; leaving it", "containerID", c.ContainerID, "ifname", c.IfName)
		return nil, nil
	}
	defer unlock()
	if s.addedSince(c.Attachment, cutoff) {
		return nil, nil
	}
	// A DEL may have released it since the list.
	now, err := s.alloc.Get(c.ContainerID, c.IfName)
	if err != nil {
		return nil, wrapf(err, "read allocations")
	}
	if len(now) == 0 {
		return nil, nil
	}
	if err := s.unwire(ctx, &Pod{Attachment: c.Attachment}); err != nil {
		return nil, err
	}
	rel := &OrphanRelease{Attachment: c.Attachment, IPs: c.ips, Allocated: c.oldest, Released: s.opts.Now()}
	log.Info("Released an attachment no pod sandbox holds (left by a CNI ADD the runtime never saw finish)",
		"containerID", c.ContainerID, "ifname", c.IfName, "ips", c.ips, "age", rel.Released.Sub(c.oldest).Round(time.Second))
	return rel, nil
}
