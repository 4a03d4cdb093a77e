package healthcheck

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/nodenet/nodenet/proxy"
)

var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

const timeout = time.Minute

// step is one thing that happens to a ProxyHealth.
type step func(h *ProxyHealth, c *clocktesting.FakeClock)

func queued(f proxy.IPFamily) step {
	return func(h *ProxyHealth, _ *clocktesting.FakeClock) { h.QueuedUpdate(f) }
}

func updated(f proxy.IPFamily) step {
	return func(h *ProxyHealth, _ *clocktesting.FakeClock) { h.Updated(f) }
}

func wait(d time.Duration) step {
	return func(_ *ProxyHealth, c *clocktesting.FakeClock) { c.Step(d) }
}

func node(n *v1.Node) step {
	return func(h *ProxyHealth, _ *clocktesting.FakeClock) { h.SyncNode(n) }
}

func newNode(deleting bool, taints ...string) *v1.Node {
	n := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}}
	if deleting {
		ts := metav1.NewTime(t0)
		n.DeletionTimestamp = &ts
	}
	for _, k := range taints {
		n.Spec.Taints = append(n.Spec.Taints, v1.Taint{Key: k, Effect: v1.TaintEffectNoSchedule})
	}
	return n
}

type recordedProbes struct{ healthz, livez []int }

func (r *recordedProbes) ObserveHealthz(code int) { r.healthz = append(r.healthz, code) }
func (r *recordedProbes) ObserveLivez(code int)   { r.livez = append(r.livez, code) }

func get(t *testing.T, h http.Handler, path string) (*httptest.ResponseRecorder, Status) {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
	var st Status
	if rec.Code != http.StatusNotFound {
		if err := json.Unmarshal(rec.Body.Bytes(), &st); err != nil {
			t.Fatalf("%s body %q: %v", path, rec.Body.String(), err)
		}
	}
	return rec, st
}

func TestProxyHealthFollowsKubeProxysRules(t *testing.T) {
	tests := []struct {
		name        string
		steps       []step
		wantHealthy bool
		// wantEligible is the node eligibility /healthz adds.
		wantEligible bool
		// wantLastUpdated is Health's lastUpdated (the newest sync).
		wantLastUpdated time.Time
		wantFamilies    map[proxy.IPFamily]FamilyStatus
	}{
		{
			name:         "a fresh proxy is healthy",
			wantHealthy:  true,
			wantEligible: true,
			wantFamilies: map[proxy.IPFamily]FamilyStatus{},
		},
		{
			name:         "a family that never synced stays healthy however long its update waits",
			steps:        []step{queued(proxy.IPv4), wait(10 * timeout)},
			wantHealthy:  true,
			wantEligible: true,
			wantFamilies: map[proxy.IPFamily]FamilyStatus{},
		},
		{
			name:            "a queued update younger than the timeout is healthy",
			steps:           []step{updated(proxy.IPv4), wait(time.Second), queued(proxy.IPv4), wait(timeout - time.Nanosecond)},
			wantHealthy:     true,
			wantEligible:    true,
			wantLastUpdated: t0,
			wantFamilies:    map[proxy.IPFamily]FamilyStatus{proxy.IPv4: {LastUpdated: t0, Healthy: true}},
		},
		{
			name:            "a queued update as old as the timeout is unhealthy",
			steps:           []step{updated(proxy.IPv4), queued(proxy.IPv4), wait(timeout)},
			wantEligible:    true,
			wantLastUpdated: t0,
			wantFamilies:    map[proxy.IPFamily]FamilyStatus{proxy.IPv4: {LastUpdated: t0, Healthy: false}},
		},
		{
			name: "queuing again does not reset the oldest pending update",
			steps: []step{
				updated(proxy.IPv4), queued(proxy.IPv4), wait(timeout / 2),
				queued(proxy.IPv4), wait(timeout / 2),
			},
			wantEligible:    true,
			wantLastUpdated: t0,
			wantFamilies:    map[proxy.IPFamily]FamilyStatus{proxy.IPv4: {LastUpdated: t0, Healthy: false}},
		},
		{
			name:            "a sync clears the pending update",
			steps:           []step{updated(proxy.IPv4), queued(proxy.IPv4), wait(2 * timeout), updated(proxy.IPv4), wait(timeout)},
			wantHealthy:     true,
			wantEligible:    true,
			wantLastUpdated: t0.Add(2 * timeout),
			wantFamilies:    map[proxy.IPFamily]FamilyStatus{proxy.IPv4: {LastUpdated: t0.Add(2 * timeout), Healthy: true}},
		},
		{
			name: "one stale family makes the proxy unhealthy and lastUpdated is the newest sync",
			steps: []step{
				updated(proxy.IPv6), queued(proxy.IPv6), wait(time.Second),
				updated(proxy.IPv4), wait(timeout),
			},
			wantEligible:    true,
			wantLastUpdated: t0.Add(time.Second),
			wantFamilies: map[proxy.IPFamily]FamilyStatus{
				proxy.IPv4: {LastUpdated: t0.Add(time.Second), Healthy: true},
				proxy.IPv6: {LastUpdated: t0, Healthy: false},
			},
		},
		{
			name:         "a node being deleted is not eligible but the proxy stays healthy",
			steps:        []step{node(newNode(true))},
			wantHealthy:  true,
			wantFamilies: map[proxy.IPFamily]FamilyStatus{},
		},
		{
			name:         "a node tainted for deletion by the autoscaler is not eligible",
			steps:        []step{node(newNode(false, "other", ToBeDeletedTaint))},
			wantHealthy:  true,
			wantFamilies: map[proxy.IPFamily]FamilyStatus{},
		},
		{
			name:         "a node whose deletion taint is removed is eligible again",
			steps:        []step{node(newNode(false, ToBeDeletedTaint)), node(newNode(false, "other"))},
			wantHealthy:  true,
			wantEligible: true,
			wantFamilies: map[proxy.IPFamily]FamilyStatus{},
		},
		{
			name:         "a deleted node (nil) is not eligible",
			steps:        []step{node(newNode(false)), node(nil)},
			wantHealthy:  true,
			wantFamilies: map[proxy.IPFamily]FamilyStatus{},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clk := clocktesting.NewFakeClock(t0)
			probes := &recordedProbes{}
			h := NewProxyHealth(ProxyHealthOptions{Clock: clk, HealthTimeout: timeout, Probes: probes})
			for _, s := range tt.steps {
				s(h, clk)
			}
			now := clk.Now()

			healthy, last := h.Health()
			if healthy != tt.wantHealthy || !last.Equal(tt.wantLastUpdated) {
				t.Errorf("Health() = %v, %v; want %v, %v", healthy, last, tt.wantHealthy, tt.wantLastUpdated)
			}

			code := func(ok bool) int {
				if ok {
					return http.StatusOK
				}
				return http.StatusServiceUnavailable
			}
			// When healthy, kube-proxy reports lastUpdated as now.
			wantBodyLast := tt.wantLastUpdated
			if tt.wantHealthy {
				wantBodyLast = now
			}

			handler := h.Handler()
			rec, st := get(t, handler, "/livez")
			if rec.Code != code(tt.wantHealthy) {
				t.Errorf("/livez status = %d, want %d", rec.Code, code(tt.wantHealthy))
			}
			wantLivez := Status{LastUpdated: wantBodyLast, CurrentTime: now, Healthy: tt.wantHealthy, Families: tt.wantFamilies}
			if len(wantLivez.Families) == 0 {
				wantLivez.Families = nil // omitted from the JSON
			}
			if diff := cmp.Diff(wantLivez, st); diff != "" {
				t.Errorf("/livez body (-want +got):\n%s", diff)
			}

			healthzOK := tt.wantHealthy && tt.wantEligible
			if healthzOK {
				wantBodyLast = now
			} else {
				wantBodyLast = tt.wantLastUpdated
			}
			rec, st = get(t, handler, "/healthz")
			if rec.Code != code(healthzOK) {
				t.Errorf("/healthz status = %d, want %d", rec.Code, code(healthzOK))
			}
			wantHealthz := wantLivez
			wantHealthz.LastUpdated = wantBodyLast
			wantHealthz.NodeEligible = &tt.wantEligible
			if diff := cmp.Diff(wantHealthz, st); diff != "" {
				t.Errorf("/healthz body (-want +got):\n%s", diff)
			}

			if diff := cmp.Diff(&recordedProbes{healthz: []int{code(healthzOK)}, livez: []int{code(tt.wantHealthy)}}, probes, cmp.AllowUnexported(recordedProbes{})); diff != "" {
				t.Errorf("probe counts (-want +got):\n%s", diff)
			}
		})
	}
}

func TestProbesAnswerJSONWithKubeProxysFieldsAndHeaders(t *testing.T) {
	clk := clocktesting.NewFakeClock(t0)
	h := NewProxyHealth(ProxyHealthOptions{Clock: clk, HealthTimeout: timeout})
	h.Updated(proxy.IPv4)
	clk.Step(time.Second)
	handler := h.Handler()

	tests := []struct {
		path string
		want string
	}{
		{
			path: "/healthz",
			want: `{"lastUpdated":"2026-01-02T03:04:06Z","currentTime":"2026-01-02T03:04:06Z","nodeEligible":true,"healthy":true,"status":{"IPv4":{"lastUpdated":"2026-01-02T03:04:05Z","healthy":true}}}`,
		},
		{
			path: "/livez",
			want: `{"lastUpdated":"2026-01-02T03:04:06Z","currentTime":"2026-01-02T03:04:06Z","healthy":true,"status":{"IPv4":{"lastUpdated":"2026-01-02T03:04:05Z","healthy":true}}}`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.path, func(t *testing.T) {
			rec := httptest.NewRecorder()
			handler.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, tt.path, nil))
			if got := rec.Body.String(); got != tt.want {
				t.Errorf("body\n got %s\nwant %s", got, tt.want)
			}
			for k, v := range map[string]string{"Content-Type": "application/json", "X-Content-Type-Options": "nosniff"} {
				if got := rec.Header().Get(k); got != v {
					t.Errorf("header %s = %q, want %q", k, got, v)
				}
			}
		})
	}
}

func TestOtherPathsAreNotServed(t *testing.T) {
	handler := NewProxyHealth(ProxyHealthOptions{}).Handler()
	for _, path := range []string{"/", "/metrics", "/healthz/extra", "/readyz"} {
		rec := httptest.NewRecorder()
		handler.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
		if rec.Code != http.StatusNotFound {
			t.Errorf("%s: status %d, want 404", path, rec.Code)
		}
	}
}

func TestHealthTimeoutDefaultsToTwiceKubeProxysSyncPeriod(t *testing.T) {
	clk := clocktesting.NewFakeClock(t0)
	h := NewProxyHealth(ProxyHealthOptions{Clock: clk})
	h.Updated(proxy.IPv4)
	h.QueuedUpdate(proxy.IPv4)
	clk.Step(59 * time.Second)
	if ok, _ := h.Health(); !ok {
		t.Fatal("unhealthy after 59s, want healthy until 60s")
	}
	clk.Step(time.Second)
	if ok, _ := h.Health(); ok {
		t.Fatal("healthy after 60s, want unhealthy")
	}
}
