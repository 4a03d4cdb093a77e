package source

import (
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// hang bounds every wait so a broken source fails instead of hanging;
// nothing is asserted about time.
const hang = 30 * time.Second

// recorder is a proxy.Handler that records its calls as lines like
// "add Service default/web", "update Node node-a", "delete EndpointSlice
// default/web-1" and "synced". It checks that an update's or delete's old
// object is the one last delivered, and that calls never overlap.
type recorder struct {
	t       *testing.T
	inCall  atomic.Int32
	mu      sync.Mutex
	calls   []string
	last    map[string]metav1.Object // by "Kind ns/name"
	changed chan struct{}
}

func newRecorder(t *testing.T) *recorder {
	return &recorder{t: t, last: make(map[string]metav1.Object), changed: make(chan struct{}, 1)}
}

func (r *recorder) record(kind string, old, new metav1.Object) {
	if r.inCall.Add(1) > 1 {
		r.t.Errorf("handler called concurrently")
	}
	defer r.inCall.Add(-1)
	r.mu.Lock()
	defer r.mu.Unlock()
	var op string
	var obj metav1.Object
	switch {
	case old == nil && new == nil:
		r.t.Errorf("%s update with neither old nor new", kind)
		return
	case old == nil:
		op, obj = "add", new
	case new == nil:
		op, obj = "delete", old
	default:
		op, obj = "update", new
	}
	id := kind + " " + obj.GetName()
	if obj.GetNamespace() != "" {
		id = kind + " " + obj.GetNamespace() + "/" + obj.GetName()
	}
	prev, had := r.last[id]
	switch {
	case op == "add" && had:
		r.t.Errorf("add of %s, which the handler already has", id)
	case op != "add" && !had:
		r.t.Errorf("%s of %s, which the handler does not have", op, id)
	case op != "add" && prev.GetResourceVersion() != old.GetResourceVersion():
		r.t.Errorf("%s of %s: old resourceVersion %q, but %q was delivered", op, id, old.GetResourceVersion(), prev.GetResourceVersion())
	}
	if op == "delete" {
		delete(r.last, id)
	} else {
		r.last[id] = new
	}
	r.calls = append(r.calls, op+" "+id)
	r.notify()
}

func (r *recorder) notify() {
	select {
	case r.changed <- struct{}{}:
	default:
	}
}

func (r *recorder) OnServiceUpdate(old, new *v1.Service) {
	r.record("Service", metaOrNil(old), metaOrNil(new))
}

func (r *recorder) OnEndpointSliceUpdate(old, new *discoveryv1.EndpointSlice) {
	r.record("EndpointSlice", metaOrNil(old), metaOrNil(new))
}

func (r *recorder) OnNodeUpdate(old, new *v1.Node) {
	r.record("Node", metaOrNil(old), metaOrNil(new))
}

func (r *recorder) OnSynced() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls = append(r.calls, "synced")
	r.notify()
}

// metaOrNil avoids a non-nil interface holding a nil pointer.
func metaOrNil[T any, P interface {
	*T
	metav1.Object
}](p P) metav1.Object {
	if p == nil {
		return nil
	}
	return p
}

// take waits until the recorder holds n calls, returns them and forgets
// them.
func (r *recorder) take(n int) []string {
	r.t.Helper()
	deadline := time.After(hang)
	for {
		r.mu.Lock()
		if len(r.calls) >= n {
			got := slices.Clone(r.calls)
			r.calls = nil
			r.mu.Unlock()
			if len(got) > n {
				r.t.Errorf("want %d calls, got %d: %q", n, len(got), got)
			}
			return got
		}
		r.mu.Unlock()
		select {
		case <-r.changed:
		case <-deadline:
			r.mu.Lock()
			defer r.mu.Unlock()
			r.t.Fatalf("waited for %d calls, have %q", n, r.calls)
			return nil
		}
	}
}

// takeUntil waits for a call equal to last and returns every call up to
// and including it.
func (r *recorder) takeUntil(last string) []string {
	r.t.Helper()
	deadline := time.After(hang)
	for {
		r.mu.Lock()
		if i := slices.Index(r.calls, last); i >= 0 {
			got := slices.Clone(r.calls[:i+1])
			r.calls = slices.Delete(r.calls, 0, i+1)
			r.mu.Unlock()
			return got
		}
		r.mu.Unlock()
		select {
		case <-r.changed:
		case <-deadline:
			r.mu.Lock()
			defer r.mu.Unlock()
			r.t.Fatalf("waited for %q, have %q", last, r.calls)
			return nil
		}
	}
}

// drain returns and forgets the calls so far.
func (r *recorder) drain() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	got := r.calls
	r.calls = nil
	return got
}

// waitFor waits until cond holds; cond runs without the recorder's lock.
func (r *recorder) waitFor(cond func() bool) {
	r.t.Helper()
	deadline := time.After(hang)
	for !cond() {
		select {
		case <-r.changed:
		case <-deadline:
			r.t.Fatalf("condition never held; calls %s", r)
		}
	}
}

// object returns the last object delivered for id ("Kind ns/name").
func (r *recorder) object(id string) metav1.Object {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.last[id]
}

func (r *recorder) String() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return fmt.Sprint(r.calls)
}
