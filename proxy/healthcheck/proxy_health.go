// Package healthcheck serves the proxy's health the way kube-proxy does:
// /healthz and /livez on the proxy health address (ProxyHealth, Serve), and
// one HTTP server per health-check node port of each externalTrafficPolicy
// Local LoadBalancer service (ServiceHealth), which cloud load balancers
// probe to find the nodes with local endpoints.
package healthcheck

import (
	"encoding/json"
	"net/http"
	"strconv"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/nodenet/nodenet/proxy"
)

// ToBeDeletedTaint is the taint the cluster autoscaler puts on a node it is
// about to delete; /healthz fails on such a node so load balancers drain it.
const ToBeDeletedTaint = "ToBeDeletedByClusterAutoscaler"

// DefaultHealthTimeout is kube-proxy's health timeout (2 × syncPeriod) for
// its default 30 s sync period.
const DefaultHealthTimeout = 2 * 30 * time.Second

// ProbeObserver counts health probe answers by HTTP status code;
// *metrics.Metrics implements it (kubeproxy_proxy_healthz_total and
// kubeproxy_proxy_livez_total).
type ProbeObserver interface {
	ObserveHealthz(code int)
	ObserveLivez(code int)
}

// ProxyHealthOptions configures a ProxyHealth.
type ProxyHealthOptions struct {
	// Clock defaults to the real clock; tests pass a fake one.
	Clock clock.PassiveClock
	// HealthTimeout is how long a queued update may wait for a sync before
	// the proxy counts as unhealthy; kube-proxy uses 2 × syncPeriod.
	// Defaults to DefaultHealthTimeout.
	HealthTimeout time.Duration
	// Probes, if set, counts /healthz and /livez answers.
	Probes ProbeObserver
	// Logger defaults to klog.Background().
	Logger klog.Logger
}

// ProxyHealth tracks whether the proxy keeps its dataplane up to date, per
// IP family, with kube-proxy's ProxyHealthServer semantics: a family is
// unhealthy when an update has been queued for at least HealthTimeout
// without a successful sync since. A family that has never synced counts as
// healthy (kube-proxy's "starting up"), however long its first sync takes.
// It is safe for concurrent use.
type ProxyHealth struct {
	clock   clock.PassiveClock
	timeout time.Duration
	probes  ProbeObserver
	log     klog.Logger

	mu sync.RWMutex
	// lastUpdated is each family's last successful sync.
	lastUpdated map[proxy.IPFamily]time.Time
	// oldestQueued is each family's oldest update not yet synced.
	oldestQueued map[proxy.IPFamily]time.Time
	nodeEligible bool
}

// NewProxyHealth returns a ProxyHealth with nothing queued and the node
// eligible.
func NewProxyHealth(opts ProxyHealthOptions) *ProxyHealth {
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	if opts.HealthTimeout <= 0 {
		opts.HealthTimeout = DefaultHealthTimeout
	}
	if opts.Logger.GetSink() == nil {
		opts.Logger = klog.Background()
	}
	return &ProxyHealth{
		clock:        opts.Clock,
		timeout:      opts.HealthTimeout,
		probes:       opts.Probes,
		log:          opts.Logger.WithName("proxy-health"),
		lastUpdated:  map[proxy.IPFamily]time.Time{},
		oldestQueued: map[proxy.IPFamily]time.Time{},
		// kube-proxy reads the Node before it serves; nodenet may start
		// without one (or run from files), so the node is eligible until a
		// Node says otherwise.
		nodeEligible: true,
	}
}

// QueuedUpdate records that family has changes waiting for a sync. Only the
// oldest pending change counts: further calls before Updated change nothing.
func (h *ProxyHealth) QueuedUpdate(family proxy.IPFamily) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if _, queued := h.oldestQueued[family]; !queued {
		h.oldestQueued[family] = h.clock.Now()
	}
}

// Updated records a successful sync of family: nothing is pending any more.
func (h *ProxyHealth) Updated(family proxy.IPFamily) {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.oldestQueued, family)
	h.lastUpdated[family] = h.clock.Now()
}

// SyncNode records whether this node may receive load-balancer traffic: not
// when its Node is gone (nil), being deleted, or tainted by the cluster
// autoscaler for deletion. Only /healthz looks at it.
func (h *ProxyHealth) SyncNode(node *v1.Node) {
	eligible := nodeEligible(node)
	h.mu.Lock()
	defer h.mu.Unlock()
	if eligible != h.nodeEligible {
		h.log.V(2).Info("Node eligibility for load-balancer traffic changed", "eligible", eligible)
	}
	h.nodeEligible = eligible
}

func nodeEligible(node *v1.Node) bool {
	if node == nil || !node.DeletionTimestamp.IsZero() {
		return false
	}
	for _, taint := range node.Spec.Taints {
		if taint.Key == ToBeDeletedTaint {
			return false
		}
	}
	return true
}

// NodeEligible reports what the last SyncNode decided (true before any).
func (h *ProxyHealth) NodeEligible() bool {
	h.mu.RLock()
	defer h.mu.RUnlock()
	return h.nodeEligible
}

// Health reports whether every family is healthy, ignoring the node's
// eligibility, and the most recent successful sync of any family.
func (h *ProxyHealth) Health() (healthy bool, lastUpdated time.Time) {
	st := h.Status()
	return st.Healthy, st.LastUpdated
}

// Status is the JSON body of /healthz and /livez, field for field
// kube-proxy's.
type Status struct {
	// LastUpdated is the most recent successful sync of any family; the
	// handlers replace it with CurrentTime when healthy, as kube-proxy does
	// for compatibility with older releases.
	LastUpdated time.Time `json:"lastUpdated"`
	CurrentTime time.Time `json:"currentTime"`
	// NodeEligible is set in /healthz answers only.
	NodeEligible *bool `json:"nodeEligible,omitempty"`
	Healthy      bool  `json:"healthy"`
	// Families holds each family that has synced at least once.
	Families map[proxy.IPFamily]FamilyStatus `json:"status,omitempty"`
}

// FamilyStatus is one IP family's health.
type FamilyStatus struct {
	LastUpdated time.Time `json:"lastUpdated"`
	Healthy     bool      `json:"healthy"`
}

// Status returns the proxy's health without node eligibility.
func (h *ProxyHealth) Status() Status {
	h.mu.RLock()
	defer h.mu.RUnlock()
	now := h.clock.Now()
	st := Status{
		CurrentTime: now,
		Healthy:     true,
		Families:    make(map[proxy.IPFamily]FamilyStatus, len(h.lastUpdated)),
	}
	// Like kube-proxy, only families that synced once are judged.
	for family, updated := range h.lastUpdated {
		if updated.After(st.LastUpdated) {
			st.LastUpdated = updated
		}
		fs := FamilyStatus{LastUpdated: updated, Healthy: true}
		if queued, ok := h.oldestQueued[family]; ok && now.Sub(queued) >= h.timeout {
			fs.Healthy = false
			st.Healthy = false
		}
		st.Families[family] = fs
	}
	return st
}

// Handler serves /healthz (proxy health and node eligibility, for load
// balancers) and /livez (proxy health only, for the liveness probe). Both
// answer 200 or 503 with a JSON Status.
func (h *ProxyHealth) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/healthz", h.serveHealthz)
	mux.HandleFunc("/livez", h.serveLivez)
	return mux
}

func (h *ProxyHealth) serveHealthz(w http.ResponseWriter, _ *http.Request) {
	st := h.Status()
	eligible := h.NodeEligible()
	st.NodeEligible = &eligible
	code := h.write(w, st, st.Healthy && eligible)
	if h.probes != nil {
		h.probes.ObserveHealthz(code)
	}
}

func (h *ProxyHealth) serveLivez(w http.ResponseWriter, _ *http.Request) {
	st := h.Status()
	code := h.write(w, st, st.Healthy)
	if h.probes != nil {
		h.probes.ObserveLivez(code)
	}
}

func (h *ProxyHealth) write(w http.ResponseWriter, st Status, healthy bool) int {
	code := http.StatusOK
	if healthy {
		// kube-proxy reports "now" when healthy: older releases' lastUpdated
		// was the last sync-loop run, even when nothing changed.
		st.LastUpdated = h.clock.Now()
	} else {
		code = http.StatusServiceUnavailable
		h.log.V(4).Info("Answering unhealthy", "status", st)
	}
	body, err := json.Marshal(st)
	if err != nil {
		// Status holds only times, bools and strings: this can't happen.
		body = []byte(`{"error":` + strconv.Quote(err.Error()) + `}`)
	}
	setJSONHeaders(w)
	w.WriteHeader(code)
	_, _ = w.Write(body)
	return code
}

func setJSONHeaders(w http.ResponseWriter) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
}
