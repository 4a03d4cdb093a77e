// Package apiwait makes the agent's API reads wait out an API server that
// is down, instead of failing into client-go's reflector backoff.
//
// Why: a reflector whose list or watch fails backs off exponentially, up
// to 30 s plus as much jitter, and the steps it took during an outage are
// still in force when the server returns. After a one-minute outage the
// agent used to see the first change 12–76 s late. Under this transport a
// GET that finds nothing listening (connection refused, host or network
// unreachable) is retried here, every Initial..Max, until it gets through
// or its context ends. The reflector never sees the failure, never backs
// off, and its list goes out within Max of the server's return.
//
// Only GETs without a body are held: they are idempotent, and nothing was
// sent when the dial failed. Writes fail at once, as before, so callers
// that report (events, conditions) keep their own error handling. Errors
// from a server that answers (429, 5xx, TLS, timeouts) are passed through:
// an overloaded server still gets client-go's backoff.
package apiwait

import (
	"errors"
	"math/rand/v2"
	"net/http"
	"sync"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
)

// Options tune the retries. Zero values take the defaults.
type Options struct {
	// Initial is the first wait after a failed dial (default 500 ms); it
	// doubles up to Max (default 4 s). Each wait is jittered by up to
	// +50% so a fleet of nodes does not return in step.
	Initial, Max time.Duration
	Logger       klog.Logger
	Clock        clock.Clock
}

func (o *Options) defaults() {
	if o.Initial <= 0 {
		o.Initial = 500 * time.Millisecond
	}
	if o.Max < o.Initial {
		o.Max = max(4*time.Second, o.Initial)
	}
	if o.Logger.GetSink() == nil {
		o.Logger = klog.Background()
	}
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
}

// WrapConfig makes every client built from rc hold its GETs while the API
// server is unreachable. It keeps any wrapper rc already has.
func WrapConfig(rc *rest.Config, opts Options) {
	prev := rc.WrapTransport
	t := newTracker(opts)
	rc.WrapTransport = func(rt http.RoundTripper) http.RoundTripper {
		if prev != nil {
			rt = prev(rt)
		}
		return &transport{next: rt, tracker: t}
	}
}

// Unreachable reports whether err means nothing answered at the server's
// address, so no request reached it.
func Unreachable(err error) bool {
	if err == nil {
		return false
	}
	for _, errno := range unreachableErrnos {
		if errors.Is(err, errno) {
			return true
		}
	}
	return false
}

type transport struct {
	next    http.RoundTripper
	tracker *tracker
}

func (t *transport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.next.RoundTrip(req)
	if !holdable(req) || err == nil || !Unreachable(err) {
		t.tracker.result(req, err)
		return resp, err
	}
	delay := t.tracker.opts.Initial
	for {
		t.tracker.down(req, err)
		select {
		case <-req.Context().Done():
			return nil, err
		case <-t.tracker.opts.Clock.After(jitter(delay)):
		}
		delay = min(2*delay, t.tracker.opts.Max)
		resp, err = t.next.RoundTrip(req.Clone(req.Context()))
		if err == nil || !Unreachable(err) {
			t.tracker.result(req, err)
			return resp, err
		}
	}
}

func (t *transport) WrappedRoundTripper() http.RoundTripper { return t.next }

// holdable: a GET or HEAD without a body can be sent again unchanged.
func holdable(req *http.Request) bool {
	return (req.Method == http.MethodGet || req.Method == http.MethodHead) &&
		(req.Body == nil || req.Body == http.NoBody)
}

func jitter(d time.Duration) time.Duration {
	return d + rand.N(d/2+1)
}

// tracker logs an outage once when it starts and once when it ends, for
// all requests of one client config.
type tracker struct {
	opts  Options
	mu    sync.Mutex
	since time.Time // zero while reachable
}

func newTracker(opts Options) *tracker {
	opts.defaults()
	return &tracker{opts: opts}
}

func (t *tracker) down(req *http.Request, err error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.since.IsZero() {
		t.since = t.opts.Clock.Now()
		t.opts.Logger.Info("API server unreachable; reads wait for it, the dataplane keeps its state",
			"host", req.URL.Host, "err", err.Error())
	}
}

// result ends an outage on any answer from the server.
func (t *tracker) result(req *http.Request, err error) {
	if err != nil && Unreachable(err) {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.since.IsZero() {
		t.opts.Logger.Info("API server reachable again", "host", req.URL.Host,
			"after", t.opts.Clock.Since(t.since).Round(100*time.Millisecond).String())
		t.since = time.Time{}
	}
}
