// Package runner is the proxy's sync loop, in the manner of kube-proxy's
// BoundedFrequencyRunner: change handlers ask for a sync and return at
// once; the runner coalesces their requests into one sync at a time, no
// more often than MinInterval, with a full sync at least every Period and
// after every failure (retried with exponential backoff).
package runner

import (
	"context"
	"sync"
	"time"

	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
)

// Options configure a Runner. Sync is required.
type Options struct {
	// MinInterval is the least time between the starts of two syncs (the
	// config's minSyncPeriod): requests within it wait and coalesce.
	MinInterval time.Duration
	// Batch is how long the first request after an idle spell waits for
	// the changes that usually follow it (the EndpointSlice controller
	// writes a new Service's slice milliseconds after the Service), so
	// they land in one sync instead of two syncs MinInterval apart. 0
	// syncs at once; it is capped at MinInterval.
	Batch time.Duration
	// Period is the most time between the end of a full sync and the
	// start of the next full sync (the config's syncPeriod); 0 disables
	// periodic syncs.
	Period time.Duration
	// Sync does the work. full asks it to re-program everything rather
	// than only what changed. It is never called concurrently.
	Sync func(ctx context.Context, full bool) error
	// BackoffInitial and BackoffMax bound the wait before retrying a
	// failed sync; the wait doubles on each failure in a row. They
	// default to 1s and to Period (or one minute without a Period).
	BackoffInitial, BackoffMax time.Duration
	// Clock defaults to the real clock.
	Clock  clock.WithTicker
	Logger klog.Logger
}

// Runner runs Options.Sync when asked, within its bounds.
type Runner struct {
	opts Options
	log  klog.Logger

	mu        sync.Mutex
	requested bool // a sync was asked for since the last one started
	// requestedAt is when requested last became true by a request.
	requestedAt time.Time
	full        bool // the next sync must be full

	// wake tells Run to look at the flags again.
	wake chan struct{}

	// idle, when set (by tests), is called each time Run waits, with the
	// time of the next sync it has planned (zero when none).
	idle func(next time.Time)
}

// New returns a Runner; Run starts it.
func New(opts Options) *Runner {
	if opts.Sync == nil {
		panic("runner: Options.Sync is nil")
	}
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	if opts.Logger.GetSink() == nil {
		opts.Logger = klog.Background()
	}
	if opts.MinInterval < 0 {
		opts.MinInterval = 0
	}
	opts.Batch = min(max(opts.Batch, 0), opts.MinInterval)
	if opts.Period < 0 {
		opts.Period = 0
	}
	if opts.BackoffInitial <= 0 {
		opts.BackoffInitial = time.Second
	}
	if opts.BackoffMax <= 0 {
		opts.BackoffMax = opts.Period
		if opts.BackoffMax == 0 {
			opts.BackoffMax = time.Minute
		}
	}
	opts.BackoffMax = max(opts.BackoffMax, opts.BackoffInitial)
	return &Runner{
		opts: opts,
		log:  opts.Logger.WithName("runner"),
		// The first sync is full and due as soon as Run starts.
		requested: true,
		full:      true,
		wake:      make(chan struct{}, 1),
	}
}

// Request asks for a sync soon. It never blocks; requests made before the
// next sync starts coalesce into it, and a request made during a sync
// causes one more sync after it.
func (r *Runner) Request() { r.request(false, false) }

// RequestNow asks for a sync as Request does, without the Batch wait
// when it is the first request after an idle spell: for a change nothing
// usually follows (an endpoint of an existing service), which would
// otherwise wait Batch for nothing. MinInterval still applies.
func (r *Runner) RequestNow() { r.request(false, true) }

// RequestFull asks for a full sync soon, as Request does.
func (r *Runner) RequestFull() { r.request(true, false) }

func (r *Runner) request(full, now bool) {
	r.mu.Lock()
	if !r.requested {
		r.requestedAt = r.opts.Clock.Now()
		if now {
			r.requestedAt = r.requestedAt.Add(-r.opts.Batch)
		}
	}
	r.requested = true
	r.full = r.full || full
	r.mu.Unlock()
	select {
	case r.wake <- struct{}{}:
	default: // Run will see the flags anyway.
	}
}

// Run syncs at once (a full sync), then whenever asked or due, until ctx
// is done. It must be called once. It returns when ctx is done, after the
// sync in progress (which gets ctx) returns; Sync is not called once Run
// has seen ctx done.
func (r *Runner) Run(ctx context.Context) {
	var h history
	for {
		select {
		case <-r.wake:
		default:
		}
		if ctx.Err() != nil {
			return
		}
		now := r.opts.Clock.Now()
		due, have := r.next(&h)
		if have && !due.After(now) {
			if !r.sync(ctx, &h, now) {
				return
			}
			continue
		}
		r.wait(ctx, due, have, now)
	}
}

// history is what Run remembers of its syncs.
type history struct {
	started   bool
	lastStart time.Time     // start of the last sync
	lastFull  time.Time     // end of the last successful full sync
	backoff   time.Duration // after a failure: the last wait; else 0
	retryAt   time.Time     // after a failure: the earliest retry
}

func (h *history) failed() bool { return h.backoff > 0 }

// next is when the next sync should start, if have: no earlier than
// MinInterval after the last start, the retry time after a failure, and
// Batch after a request; no later than Period after the last full sync.
func (r *Runner) next(h *history) (due time.Time, have bool) {
	failed := h.failed()
	// gate is the earliest a sync may start.
	var gate time.Time
	if h.started {
		gate = h.lastStart.Add(r.opts.MinInterval)
	}
	if failed {
		gate = later(gate, h.retryAt)
	}
	r.mu.Lock()
	requested := r.requested
	if requested && h.started {
		gate = later(gate, r.requestedAt.Add(r.opts.Batch))
	}
	r.mu.Unlock()
	due, have = gate, requested || failed
	if h.started && r.opts.Period > 0 {
		periodic := later(h.lastFull.Add(r.opts.Period), gate)
		if !have || periodic.Before(due) {
			due, have = periodic, true
		}
	}
	return due, have
}

// sync runs one sync, full when asked for, after a failure or when a
// periodic one is due, and records in h how it went. It returns false when
// ctx is done, before or during the sync.
func (r *Runner) sync(ctx context.Context, h *history, now time.Time) bool {
	r.mu.Lock()
	full := r.full || h.failed() || (r.opts.Period > 0 && !now.Before(h.lastFull.Add(r.opts.Period)))
	r.requested, r.full = false, false
	r.mu.Unlock()
	if ctx.Err() != nil {
		return false
	}
	h.started, h.lastStart = true, now
	r.log.V(4).Info("Syncing", "full", full)
	err := r.opts.Sync(ctx, full)
	end := r.opts.Clock.Now()
	switch {
	case ctx.Err() != nil:
		return false
	case err != nil:
		h.backoff = min(max(2*h.backoff, r.opts.BackoffInitial), r.opts.BackoffMax)
		h.retryAt = end.Add(h.backoff)
		r.log.Error(err, "Sync failed; retrying with a full sync", "full", full, "retryIn", h.backoff)
	default:
		h.backoff, h.retryAt = 0, time.Time{}
		if full {
			h.lastFull = end
		}
	}
	return true
}

// wait returns at due (never, without have), on a request, or when ctx
// is done.
func (r *Runner) wait(ctx context.Context, due time.Time, have bool, now time.Time) {
	var timer clock.Timer
	var fire <-chan time.Time
	if have {
		timer = r.opts.Clock.NewTimer(due.Sub(now))
		fire = timer.C()
	} else {
		due = time.Time{}
	}
	if r.idle != nil {
		r.idle(due)
	}
	select {
	case <-ctx.Done():
	case <-r.wake:
	case <-fire:
	}
	if timer != nil {
		timer.Stop()
	}
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}
