// Package proxier wires the service proxy together: a source feeds the
// brain, the runner drives syncs, and each sync hands the brain's snapshot
// to one backend, then reports to the metrics and the health servers. It
// holds no rules of its own: kube-proxy's shape, with the 700-line sync
// function split between the brain and the backend.
package proxier

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/nodenet/nodenet/proxy"
	"github.com/nodenet/nodenet/proxy/brain"
	"github.com/nodenet/nodenet/proxy/healthcheck"
	"github.com/nodenet/nodenet/proxy/metrics"
	"github.com/nodenet/nodenet/proxy/runner"
	"github.com/nodenet/nodenet/proxy/source"
)

// batchPeriod is how long a Service change after an idle spell waits for
// the changes that follow it: a new Service's EndpointSlice arrives
// milliseconds after the Service, and without the wait it would sync a
// whole minSyncPeriod later than the Service (the runner caps it at
// minSyncPeriod, so minSyncPeriod 0 still syncs every change at once).
// EndpointSlice changes alone do not wait.
const batchPeriod = 100 * time.Millisecond

// Options configure a Proxier. Source, Backend and the periods are
// required; the observers may be nil.
type Options struct {
	// Source delivers Services, EndpointSlices and this node's Node.
	Source source.Interface
	// Backend programs the dataplane.
	Backend proxy.Backend
	// Brain configures the node-local state; OnChange is set by the
	// Proxier.
	Brain brain.Options
	// MinSyncPeriod and SyncPeriod are the config's minSyncPeriod and
	// syncPeriod.
	MinSyncPeriod time.Duration
	SyncPeriod    time.Duration

	// Metrics, Health and ServiceHealth are told about every sync.
	Metrics       *metrics.Metrics
	Health        *healthcheck.ProxyHealth
	ServiceHealth *healthcheck.ServiceHealth

	// Clock defaults to the real clock.
	Clock  clock.WithTicker
	Logger klog.Logger
}

// Proxier runs the service proxy.
type Proxier struct {
	opts   Options
	log    klog.Logger
	clock  clock.WithTicker
	brain  *brain.Brain
	runner *runner.Runner
	synced chan struct{}

	// triggers holds the EndpointSlice change times not yet observed as
	// network programming latency: a failed sync keeps them for the next.
	mu       sync.Mutex
	triggers []time.Time

	state atomic.Pointer[proxy.State]
	syncs atomic.Int64
}

// New checks opts and builds a Proxier; Run starts it.
func New(opts Options) (*Proxier, error) {
	switch {
	case opts.Source == nil:
		return nil, errors.New("proxier: no source")
	case opts.Backend == nil:
		return nil, errors.New("proxier: no backend")
	case len(opts.Brain.Families) == 0:
		return nil, errors.New("proxier: no IP families")
	case opts.SyncPeriod <= 0:
		return nil, fmt.Errorf("proxier: sync period %v must be positive", opts.SyncPeriod)
	case opts.MinSyncPeriod < 0 || opts.MinSyncPeriod > opts.SyncPeriod:
		return nil, fmt.Errorf("proxier: min sync period %v must be between 0 and the sync period %v", opts.MinSyncPeriod, opts.SyncPeriod)
	}
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	p := &Proxier{
		opts:   opts,
		log:    opts.Logger.WithName("proxier").WithValues("backend", opts.Backend.Name()),
		clock:  opts.Clock,
		synced: make(chan struct{}),
	}
	brainOpts := opts.Brain
	brainOpts.OnChange = p.changed
	if brainOpts.Logger.GetSink() == nil {
		brainOpts.Logger = opts.Logger
	}
	p.brain = brain.New(brainOpts)
	p.runner = runner.New(runner.Options{
		MinInterval: opts.MinSyncPeriod,
		Batch:       batchPeriod,
		Period:      opts.SyncPeriod,
		Sync:        p.sync,
		Clock:       opts.Clock,
		Logger:      p.log,
	})
	return p, nil
}

// Run feeds the brain from the source and, once the source has delivered
// its initial objects, syncs until ctx is done. Nothing is programmed from
// a partial view of the cluster.
func (p *Proxier) Run(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	sourceDone := make(chan error, 1)
	go func() { sourceDone <- p.opts.Source.Run(ctx, handler{p}) }()

	select {
	case <-p.synced:
	case err := <-sourceDone:
		if err == nil {
			err = errors.New("source stopped before it synced")
		}
		return fmt.Errorf("proxier: %w", err)
	case <-ctx.Done():
		return nil
	}
	p.log.Info("Source synced; starting syncs", "minSyncPeriod", p.opts.MinSyncPeriod, "syncPeriod", p.opts.SyncPeriod)
	p.runner.Run(ctx)
	cancel()
	if err := <-sourceDone; err != nil && !errors.Is(err, context.Canceled) {
		return fmt.Errorf("proxier: source: %w", err)
	}
	return nil
}

// State returns the state of the last successful sync (nil before the
// first): what the dataplane holds, for status and debugging.
func (p *Proxier) State() *proxy.State { return p.state.Load() }

// Syncs counts successful syncs.
func (p *Proxier) Syncs() int64 { return p.syncs.Load() }

// RequestFullSync asks for a full sync soon (e.g. after the dataplane was
// changed behind our back).
func (p *Proxier) RequestFullSync() { p.runner.RequestFull() }

// changed runs after every change the brain records.
func (p *Proxier) changed() {
	now := p.clock.Now()
	if m := p.opts.Metrics; m != nil {
		m.Queued(now)
		m.SetPending(p.brain.Pending())
	}
	if h := p.opts.Health; h != nil {
		for _, family := range p.opts.Brain.Families {
			h.QueuedUpdate(family)
		}
	}
	// Only a Service change is worth the batch wait (its new slices
	// follow it); an endpoint change alone syncs at once.
	if services, _ := p.brain.Pending(); services > 0 {
		p.runner.Request()
	} else {
		p.runner.RequestNow()
	}
}

// sync is one pass: snapshot, program, report.
func (p *Proxier) sync(ctx context.Context, full bool) error {
	start := p.clock.Now()
	update, changes := p.brain.Snapshot(full)
	p.mu.Lock()
	p.triggers = append(p.triggers, changes.TriggerTimes...)
	p.mu.Unlock()
	m := p.opts.Metrics
	if m != nil {
		m.AddChanges(changes.ServiceChanges, changes.EndpointChanges)
		m.SetPending(p.brain.Pending())
	}

	err := p.opts.Backend.Sync(ctx, update)
	done := p.clock.Now()
	if err != nil {
		if m != nil {
			m.SyncFailed(p.opts.Backend.Name())
		}
		return fmt.Errorf("%s sync (full=%v, %d changed): %w", p.opts.Backend.Name(), update.Full, len(update.Changed), err)
	}
	p.state.Store(update.State)
	p.syncs.Add(1)

	p.mu.Lock()
	triggers := p.triggers
	p.triggers = nil
	p.mu.Unlock()
	if m != nil {
		m.ObserveSync(update.Full, done.Sub(start))
		m.ObserveProgramming(triggers, done)
		m.Synced(done)
		m.SetNoLocalEndpointsFromState(update.State)
	}
	if h := p.opts.Health; h != nil {
		for _, family := range p.opts.Brain.Families {
			h.Updated(family)
		}
	}
	if sh := p.opts.ServiceHealth; sh != nil {
		// One listener per port serves both families (family "").
		if err := sh.SyncServices(healthcheck.HealthCheckNodePorts(update.State, "")); err != nil {
			p.log.Error(err, "Health-check node ports")
		}
		if err := sh.SyncEndpoints(healthcheck.LocalReadyEndpoints(update.State, "")); err != nil {
			p.log.Error(err, "Health-check node port endpoint counts")
		}
	}
	p.log.V(2).Info("Synced", "full", update.Full, "changed", len(update.Changed), "servicePorts", len(update.State.ServicePorts), "duration", done.Sub(start))
	return nil
}

// handler passes the source's objects to the brain, and this node's Node
// also to the health server (a node being deleted fails /healthz).
type handler struct{ p *Proxier }

func (h handler) OnServiceUpdate(old, new *v1.Service) { h.p.brain.OnServiceUpdate(old, new) }
func (h handler) OnEndpointSliceUpdate(old, new *discoveryv1.EndpointSlice) {
	h.p.brain.OnEndpointSliceUpdate(old, new)
}

func (h handler) OnNodeUpdate(old, new *v1.Node) {
	h.p.brain.OnNodeUpdate(old, new)
	if hs := h.p.opts.Health; hs != nil {
		hs.SyncNode(new)
	}
}

func (h handler) OnSynced() {
	h.p.brain.OnSynced()
	select {
	case <-h.p.synced:
	default:
		close(h.p.synced)
	}
}
