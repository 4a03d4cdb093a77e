package runner

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/klog/v2/ktesting"
	testingclock "k8s.io/utils/clock/testing"
)

// The runner runs on a fake clock. Each step of a test does one thing
// (start, Request, step the clock) and then waits until the runner is idle
// again: the runner reports every wait through its idle hook, after every
// sync the step caused, so the syncs seen by then are all there are.

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// hang bounds every wait of the test so a broken runner fails instead of
// hanging; nothing is asserted about time.
const hang = 30 * time.Second

type call struct {
	Full bool
	At   time.Duration // since t0
}

type harness struct {
	t      *testing.T
	clock  *testingclock.FakeClock
	r      *Runner
	calls  chan call
	idles  chan time.Time
	cancel context.CancelFunc
	done   chan struct{}

	mu      sync.Mutex
	results []error  // what the next syncs return (nil once empty)
	during  []func() // run inside the next syncs
}

func newHarness(t *testing.T, opts Options) *harness {
	h := &harness{
		t:     t,
		clock: testingclock.NewFakeClock(t0),
		calls: make(chan call, 100),
		idles: make(chan time.Time, 100),
		done:  make(chan struct{}),
	}
	opts.Clock = h.clock
	opts.Logger = ktesting.NewLogger(t, ktesting.NewConfig())
	opts.Sync = func(ctx context.Context, full bool) error {
		h.calls <- call{Full: full, At: h.clock.Since(t0)}
		h.mu.Lock()
		var err error
		var during func()
		if len(h.results) > 0 {
			err, h.results = h.results[0], h.results[1:]
		}
		if len(h.during) > 0 {
			during, h.during = h.during[0], h.during[1:]
		}
		h.mu.Unlock()
		if during != nil {
			during()
		}
		return err
	}
	h.r = New(opts)
	h.r.idle = func(next time.Time) { h.idles <- next }
	return h
}

func (h *harness) start() {
	ctx, cancel := context.WithCancel(context.Background())
	h.cancel = cancel
	go func() {
		defer close(h.done)
		h.r.Run(ctx)
	}()
	h.t.Cleanup(func() {
		cancel()
		<-h.done
	})
}

// failNext makes the next syncs return these errors (nil: success).
func (h *harness) failNext(errs ...error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.results = append(h.results, errs...)
}

// duringNext runs f inside the next sync.
func (h *harness) duringNext(f func()) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.during = append(h.during, f)
}

// settle waits until the runner waits again and returns the syncs since
// the last settle and when it plans the next one (relative to t0; -1 when
// none is planned).
func (h *harness) settle() ([]call, time.Duration) {
	h.t.Helper()
	var next time.Time
	select {
	case next = <-h.idles:
	case <-time.After(hang):
		h.t.Fatal("the runner never went idle")
	}
	var calls []call
	for {
		select {
		case c := <-h.calls:
			calls = append(calls, c)
			continue
		default:
		}
		break
	}
	if next.IsZero() {
		return calls, -1
	}
	return calls, next.Sub(t0)
}

// expect settles and checks the syncs and the planned next one.
func (h *harness) expect(what string, want []call, wantNext time.Duration) {
	h.t.Helper()
	got, next := h.settle()
	if diff := cmp.Diff(want, got); diff != "" {
		h.t.Errorf("%s: syncs (-want +got):\n%s", what, diff)
	}
	if next != wantNext {
		h.t.Errorf("%s: next sync planned at %v, want %v", what, next, wantNext)
	}
}

// step advances the fake clock to d after t0.
func (h *harness) stepTo(d time.Duration) { h.clock.SetTime(t0.Add(d)) }

func full(at time.Duration) call    { return call{Full: true, At: at} }
func partial(at time.Duration) call { return call{Full: false, At: at} }

const (
	s   = time.Second
	off = time.Duration(-1) // no sync planned
)

func TestFirstSyncIsFullAndAtOnce(t *testing.T) {
	h := newHarness(t, Options{MinInterval: s, Period: 30 * s})
	h.start()
	h.expect("start", []call{full(0)}, 30*s)
}

func TestRequestsWithinMinIntervalCoalesceIntoOnePartialSync(t *testing.T) {
	h := newHarness(t, Options{MinInterval: 2 * s, Period: 30 * s})
	h.start()
	h.expect("start", []call{full(0)}, 30*s)

	h.r.Request()
	h.expect("a request right after a sync waits for MinInterval", nil, 2*s)
	h.r.Request()
	h.expect("a second request waits for the same sync", nil, 2*s)
	h.stepTo(1 * s)
	h.r.Request()
	h.expect("a third request waits for the same sync", nil, 2*s)

	h.stepTo(2 * s)
	h.expect("MinInterval after the last start", []call{partial(2 * s)}, 30*s)

	h.stepTo(10 * s)
	h.r.Request()
	h.expect("a request long after the last sync runs at once", []call{partial(10 * s)}, 30*s)
}

func TestBatchHoldsTheFirstRequestAfterIdleForTheChangesThatFollow(t *testing.T) {
	const batch = 100 * time.Millisecond
	h := newHarness(t, Options{MinInterval: s, Batch: batch, Period: 30 * s})
	h.start()
	h.expect("start", []call{full(0)}, 30*s)

	h.stepTo(10 * s)
	h.r.Request()
	h.expect("a request after an idle spell waits the batch period", nil, 10*s+batch)
	h.stepTo(10*s + 50*time.Millisecond)
	h.r.Request()
	h.expect("a request within the batch joins it", nil, 10*s+batch)
	h.stepTo(10*s + batch)
	h.expect("both changes, one sync", []call{partial(10*s + batch)}, 30*s)

	h.stepTo(10*s + 200*time.Millisecond)
	h.r.Request()
	h.expect("soon after a sync MinInterval still rules", nil, 11*s+batch)
	h.stepTo(11*s + batch)
	h.expect("MinInterval after the last start", []call{partial(11*s + batch)}, 30*s)
}

func TestRequestNowSkipsTheBatchWait(t *testing.T) {
	const batch = 100 * time.Millisecond
	h := newHarness(t, Options{MinInterval: s, Batch: batch, Period: 30 * s})
	h.start()
	h.expect("start", []call{full(0)}, 30*s)

	h.stepTo(10 * s)
	h.r.RequestNow()
	h.expect("a change nothing follows syncs at once after an idle spell", []call{partial(10 * s)}, 30*s)

	h.stepTo(10*s + 200*time.Millisecond)
	h.r.RequestNow()
	h.expect("soon after a sync MinInterval still rules", nil, 11*s)
	h.stepTo(11 * s)
	h.expect("MinInterval after the last start", []call{partial(11 * s)}, 30*s)

	h.stepTo(20 * s)
	h.r.Request()
	h.stepTo(20*s + 50*time.Millisecond)
	h.r.RequestNow()
	h.expect("a batch already waiting keeps its wait", nil, 20*s+batch)
	h.stepTo(20*s + batch)
	h.expect("both changes, one sync", []call{partial(20*s + batch)}, 30*s)
}

func TestBatchIsCappedAtMinInterval(t *testing.T) {
	h := newHarness(t, Options{Batch: s, Period: 30 * s})
	h.start()
	h.expect("start", []call{full(0)}, 30*s)
	h.stepTo(5 * s)
	h.r.Request()
	h.expect("with MinInterval 0 a request syncs at once", []call{partial(5 * s)}, 30*s)
}

func TestZeroMinIntervalSyncsAtOnce(t *testing.T) {
	h := newHarness(t, Options{Period: 30 * s})
	h.start()
	h.expect("start", []call{full(0)}, 30*s)
	h.r.Request()
	h.expect("request", []call{partial(0)}, 30*s)
}

func TestRequestsBeforeRunAreKept(t *testing.T) {
	h := newHarness(t, Options{MinInterval: s, Period: 30 * s})
	h.r.Request()
	h.r.RequestFull()
	h.start()
	h.expect("start: one sync for the first and the earlier requests", []call{full(0)}, 30*s)
}

func TestPeriodForcesFullSyncs(t *testing.T) {
	h := newHarness(t, Options{MinInterval: s, Period: 30 * s})
	h.start()
	h.expect("start", []call{full(0)}, 30*s)

	h.stepTo(10 * s)
	h.r.Request()
	h.expect("a partial sync does not move the periodic full sync", []call{partial(10 * s)}, 30*s)

	h.stepTo(30 * s)
	h.expect("period", []call{full(30 * s)}, 60*s)
	h.stepTo(60 * s)
	h.expect("period again", []call{full(60 * s)}, 90*s)
}

func TestPeriodIsCountedFromTheEndOfTheFullSync(t *testing.T) {
	h := newHarness(t, Options{MinInterval: s, Period: 30 * s})
	h.duringNext(func() { h.clock.Step(5 * s) }) // the first sync takes 5s
	h.start()
	h.expect("start", []call{full(0)}, 35*s)
}

func TestRequestFullAsksForAFullSync(t *testing.T) {
	h := newHarness(t, Options{MinInterval: s, Period: 30 * s})
	h.start()
	h.expect("start", []call{full(0)}, 30*s)

	h.stepTo(5 * s)
	h.r.Request()
	h.expect("request", []call{partial(5 * s)}, 30*s)
	h.r.RequestFull()
	h.expect("a full request respects MinInterval", nil, 6*s)
	h.r.Request()
	h.expect("a partial request joins the full one", nil, 6*s)
	h.stepTo(6 * s)
	h.expect("the full sync restarts the period", []call{full(6 * s)}, 36*s)
}

func TestRequestDuringASyncCausesOneMoreSync(t *testing.T) {
	h := newHarness(t, Options{MinInterval: s, Period: 30 * s})
	h.duringNext(func() {
		for range 100 {
			h.r.Request()
		}
	})
	h.start()
	h.expect("start: the requests made during the sync wait for MinInterval", []call{full(0)}, 1*s)
	h.stepTo(1 * s)
	h.expect("one sync for all of them", []call{partial(1 * s)}, 30*s)
}

func TestFailedSyncIsRetriedFullWithBackoff(t *testing.T) {
	h := newHarness(t, Options{MinInterval: s, Period: 30 * s, BackoffInitial: 2 * s, BackoffMax: 10 * s})
	boom := errors.New("boom")
	h.failNext(boom, boom, boom, boom, nil)
	h.start()
	h.expect("first failure", []call{full(0)}, 2*s)

	h.r.Request()
	h.expect("a request does not cut the backoff short", nil, 2*s)

	h.stepTo(2 * s)
	h.expect("second failure", []call{full(2 * s)}, 6*s)
	h.stepTo(6 * s)
	h.expect("third failure", []call{full(6 * s)}, 14*s)
	h.stepTo(14 * s)
	h.expect("fourth failure: backoff capped", []call{full(14 * s)}, 24*s)
	h.stepTo(24 * s)
	h.expect("success", []call{full(24 * s)}, 54*s)

	h.stepTo(30 * s)
	h.failNext(boom)
	h.r.Request()
	h.expect("a failed partial sync", []call{partial(30 * s)}, 32*s)
	h.stepTo(32 * s)
	h.expect("is retried full after the initial backoff again", []call{full(32 * s)}, 62*s)
}

func TestPeriodicSyncWaitsForTheBackoff(t *testing.T) {
	h := newHarness(t, Options{MinInterval: s, Period: 10 * s, BackoffInitial: 8 * s, BackoffMax: 8 * s})
	boom := errors.New("boom")
	h.start()
	h.expect("start", []call{full(0)}, 10*s)
	h.stepTo(9 * s)
	h.failNext(boom)
	h.r.Request()
	h.expect("failure", []call{partial(9 * s)}, 17*s)
	h.stepTo(17 * s)
	h.expect("retry", []call{full(17 * s)}, 27*s)
}

func TestDefaultBackoffIsOneSecondUpToThePeriod(t *testing.T) {
	h := newHarness(t, Options{Period: 3 * s})
	boom := errors.New("boom")
	h.failNext(boom, boom, boom)
	h.start()
	h.expect("first failure", []call{full(0)}, 1*s)
	h.stepTo(1 * s)
	h.expect("second failure", []call{full(1 * s)}, 3*s)
	h.stepTo(3 * s)
	h.expect("third failure: capped at the period", []call{full(3 * s)}, 6*s)
}

func TestNoPeriodMeansNoPeriodicSync(t *testing.T) {
	h := newHarness(t, Options{MinInterval: s})
	h.start()
	h.expect("start", []call{full(0)}, off)
	h.r.Request()
	h.expect("request", nil, 1*s)
	h.stepTo(1 * s)
	h.expect("partial", []call{partial(1 * s)}, off)
}

func TestNoSyncAfterTheContextIsDone(t *testing.T) {
	t.Run("a sync planned when the context is cancelled never runs", func(t *testing.T) {
		h := newHarness(t, Options{MinInterval: s, Period: 30 * s})
		h.start()
		h.expect("start", []call{full(0)}, 30*s)
		h.r.Request()
		h.expect("request", nil, 1*s)
		h.cancel()
		<-h.done
		h.stepTo(time.Hour)
		h.r.Request()
		if len(h.calls) != 0 {
			t.Errorf("syncs after cancel: %v", <-h.calls)
		}
	})
	t.Run("a request during the sync that sees the cancel runs nothing more", func(t *testing.T) {
		h := newHarness(t, Options{Period: 30 * s})
		h.duringNext(func() {
			h.r.RequestFull()
			h.cancel()
		})
		h.start()
		<-h.done
		if got := len(h.calls); got != 1 {
			t.Errorf("%d syncs, want the first only", got)
		}
	})
	t.Run("a failure caused by the cancel is not retried", func(t *testing.T) {
		h := newHarness(t, Options{Period: 30 * s})
		h.failNext(context.Canceled)
		h.duringNext(func() { h.cancel() })
		h.start()
		<-h.done
		if got := len(h.calls); got != 1 {
			t.Errorf("%d syncs, want the first only", got)
		}
	})
}

// TestSyncsNeverOverlapAndNoRequestIsLost hammers the runner on the real
// clock from several goroutines.
func TestSyncsNeverOverlapAndNoRequestIsLost(t *testing.T) {
	var (
		inflight, overlaps atomic.Int32
		requests, lastSeen atomic.Int64
		synced             = make(chan struct{}, 1)
	)
	r := New(Options{
		Period: time.Hour,
		Sync: func(ctx context.Context, full bool) error {
			if inflight.Add(1) > 1 {
				overlaps.Add(1)
			}
			defer inflight.Add(-1)
			// Requests counted before this sync started are served by it.
			lastSeen.Store(requests.Load())
			select {
			case synced <- struct{}{}:
			default:
			}
			return nil
		},
		Logger: ktesting.NewLogger(t, ktesting.NewConfig()),
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		r.Run(ctx)
	}()
	defer func() {
		cancel()
		<-done
	}()

	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 2000 {
				requests.Add(1)
				r.Request()
			}
		})
	}
	wg.Wait()
	total := requests.Load()
	deadline := time.After(hang)
	for {
		select {
		case <-synced:
			if lastSeen.Load() == total {
				if got := overlaps.Load(); got != 0 {
					t.Errorf("%d syncs overlapped another", got)
				}
				return
			}
		case <-deadline:
			t.Fatalf("no sync started after the last of %d requests", total)
		}
	}
}
