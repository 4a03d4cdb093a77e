// Package metrics holds the proxy's Prometheus metrics. Everything kube-proxy
// exposes that nodenet can fill uses kube-proxy's exact names, types, help
// text (with the "[ALPHA] " prefix k8s.io/component-base adds), labels and
// buckets, so existing kube-proxy dashboards and alerts keep working;
// nodenet's own metrics are prefixed "nodenet_proxy_".
//
// kube-proxy labels most of its metrics by ip_family because a dual-stack
// kube-proxy runs one proxier per family. One nodenet sync programs every
// family at once, so the sync-level metrics (durations, timestamps) are
// recorded once per family the node proxies. Per-change metrics (network
// programming latency, services without local endpoints) belong to one
// family: the family-less methods use the first family given to New and the
// ...For variants name the family.
package metrics

import (
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/nodenet/nodenet/proxy"
)

// kube-proxy's metric subsystem: every kube-proxy metric is kubeproxy_*.
const kubeProxySubsystem = "kubeproxy"

// alpha is how k8s.io/component-base annotates the help of ALPHA metrics;
// kube-proxy's exposition carries it, so ours does too.
const alpha = "[ALPHA] "

// Label values of nodenet_proxy_backend_operations_total's result label.
const (
	ResultSuccess = "success"
	ResultError   = "error"
)

// Traffic-policy label values of kubeproxy_sync_proxy_rules_no_local_endpoints_total.
const (
	TrafficPolicyInternal = "internal"
	TrafficPolicyExternal = "external"
)

// syncBuckets are kube-proxy's buckets for the sync duration histograms:
// 1 ms doubling up to about 16 s.
var syncBuckets = prometheus.ExponentialBuckets(0.001, 2, 15)

// programmingBuckets are kube-proxy's network programming buckets. Like
// component-base's MergeBuckets, they start with a 0 bucket.
func programmingBuckets() []float64 {
	b := []float64{0}
	b = append(b, prometheus.LinearBuckets(0.25, 0.25, 2)...) // 0.25 s, 0.5 s
	b = append(b, prometheus.LinearBuckets(1, 1, 59)...)      // 1 s … 59 s
	b = append(b, prometheus.LinearBuckets(60, 5, 12)...)     // 60 s … 115 s
	b = append(b, prometheus.LinearBuckets(120, 30, 7)...)    // 2 min … 5 min
	return b
}

// operationBuckets cover backend calls from sub-millisecond nftables
// operations to multi-second HNS calls: 0.5 ms doubling up to about 16 s.
var operationBuckets = prometheus.ExponentialBuckets(0.0005, 2, 16)

// Metrics records the proxy's metrics. A nil *Metrics is valid and records
// nothing, so components can take one optionally.
type Metrics struct {
	families []string

	syncDuration        *prometheus.HistogramVec
	syncFullDuration    *prometheus.HistogramVec
	syncPartialDuration *prometheus.HistogramVec
	lastSynced          *prometheus.GaugeVec
	lastQueued          *prometheus.GaugeVec
	programming         *prometheus.HistogramVec
	noLocalEndpoints    *prometheus.GaugeVec

	endpointChangesPending prometheus.Gauge
	endpointChangesTotal   prometheus.Counter
	serviceChangesPending  prometheus.Gauge
	serviceChangesTotal    prometheus.Counter

	healthzTotal *prometheus.CounterVec
	livezTotal   *prometheus.CounterVec

	operations        *prometheus.CounterVec
	operationDuration *prometheus.HistogramVec
	syncErrors        *prometheus.CounterVec
}

// New creates the metrics and registers them on reg (nil registers nothing:
// values are recorded but not exposed). families are the IP families the
// node proxies, primary first; none means IPv4. New panics if a metric is
// already registered on reg, like prometheus.MustRegister.
func New(reg prometheus.Registerer, families ...proxy.IPFamily) *Metrics {
	if len(families) == 0 {
		families = []proxy.IPFamily{proxy.IPv4}
	}
	m := &Metrics{}
	for _, f := range families {
		m.families = append(m.families, string(f))
	}

	family := []string{"ip_family"}
	m.syncDuration = prometheus.NewHistogramVec(kubeProxyHistogram("sync_proxy_rules_duration_seconds",
		"SyncProxyRules latency in seconds", syncBuckets), family)
	m.syncFullDuration = prometheus.NewHistogramVec(kubeProxyHistogram("sync_full_proxy_rules_duration_seconds",
		"SyncProxyRules latency in seconds for full resyncs", syncBuckets), family)
	m.syncPartialDuration = prometheus.NewHistogramVec(kubeProxyHistogram("sync_partial_proxy_rules_duration_seconds",
		"SyncProxyRules latency in seconds for partial resyncs", syncBuckets), family)
	m.lastSynced = prometheus.NewGaugeVec(prometheus.GaugeOpts(kubeProxyOpts("sync_proxy_rules_last_timestamp_seconds",
		"The last time proxy rules were successfully synced")), family)
	m.lastQueued = prometheus.NewGaugeVec(prometheus.GaugeOpts(kubeProxyOpts("sync_proxy_rules_last_queued_timestamp_seconds",
		"The last time a sync of proxy rules was queued")), family)
	m.programming = prometheus.NewHistogramVec(kubeProxyHistogram("network_programming_duration_seconds",
		"In Cluster Network Programming Latency in seconds", programmingBuckets()), family)
	m.noLocalEndpoints = prometheus.NewGaugeVec(prometheus.GaugeOpts(kubeProxyOpts("sync_proxy_rules_no_local_endpoints_total",
		"Number of services with a Local traffic policy and no endpoints")), []string{"traffic_policy", "ip_family"})

	m.endpointChangesPending = prometheus.NewGauge(prometheus.GaugeOpts(kubeProxyOpts("sync_proxy_rules_endpoint_changes_pending",
		"Pending proxy rules Endpoint changes")))
	m.endpointChangesTotal = prometheus.NewCounter(prometheus.CounterOpts(kubeProxyOpts("sync_proxy_rules_endpoint_changes_total",
		"Cumulative proxy rules Endpoint changes")))
	m.serviceChangesPending = prometheus.NewGauge(prometheus.GaugeOpts(kubeProxyOpts("sync_proxy_rules_service_changes_pending",
		"Pending proxy rules Service changes")))
	m.serviceChangesTotal = prometheus.NewCounter(prometheus.CounterOpts(kubeProxyOpts("sync_proxy_rules_service_changes_total",
		"Cumulative proxy rules Service changes")))

	m.healthzTotal = prometheus.NewCounterVec(prometheus.CounterOpts(kubeProxyOpts("proxy_healthz_total",
		"Cumulative proxy healthz HTTP status")), []string{"code"})
	m.livezTotal = prometheus.NewCounterVec(prometheus.CounterOpts(kubeProxyOpts("proxy_livez_total",
		"Cumulative proxy livez HTTP status")), []string{"code"})

	m.operations = prometheus.NewCounterVec(prometheus.CounterOpts(nodenetOpts("backend_operations_total",
		"Dataplane operations issued by proxy backends, by backend, operation and result (success or error).")),
		[]string{"backend", "operation", "result"})
	m.operationDuration = prometheus.NewHistogramVec(withBuckets(nodenetOpts("backend_operation_duration_seconds",
		"Latency of dataplane operations issued by proxy backends, in seconds."), operationBuckets),
		[]string{"backend", "operation"})
	m.syncErrors = prometheus.NewCounterVec(prometheus.CounterOpts(nodenetOpts("sync_errors_total",
		"Proxy syncs that a backend failed.")), []string{"backend"})

	if reg != nil {
		reg.MustRegister(
			m.syncDuration, m.syncFullDuration, m.syncPartialDuration,
			m.lastSynced, m.lastQueued, m.programming, m.noLocalEndpoints,
			m.endpointChangesPending, m.endpointChangesTotal,
			m.serviceChangesPending, m.serviceChangesTotal,
			m.healthzTotal, m.livezTotal,
			m.operations, m.operationDuration, m.syncErrors,
		)
	}
	return m
}

// kubeProxyOpts names a kube-proxy metric as kube-proxy does: its
// subsystem, and the ALPHA mark on its help.
func kubeProxyOpts(name, help string) prometheus.Opts {
	return prometheus.Opts{Subsystem: kubeProxySubsystem, Name: name, Help: alpha + help}
}

// kubeProxyHistogram is kubeProxyOpts for a histogram.
func kubeProxyHistogram(name, help string, buckets []float64) prometheus.HistogramOpts {
	return withBuckets(kubeProxyOpts(name, help), buckets)
}

// nodenetOpts names one of nodenet's own metrics, nodenet_proxy_*.
func nodenetOpts(name, help string) prometheus.Opts {
	return prometheus.Opts{Namespace: "nodenet", Subsystem: "proxy", Name: name, Help: help}
}

// withBuckets makes o a histogram's options.
func withBuckets(o prometheus.Opts, buckets []float64) prometheus.HistogramOpts {
	return prometheus.HistogramOpts{Namespace: o.Namespace, Subsystem: o.Subsystem, Name: o.Name, Help: o.Help, Buckets: buckets}
}

// ObserveSync records how long one sync took, in the overall histogram and
// in the full or partial one.
func (m *Metrics) ObserveSync(full bool, d time.Duration) {
	if m == nil {
		return
	}
	split := m.syncPartialDuration
	if full {
		split = m.syncFullDuration
	}
	for _, f := range m.families {
		m.syncDuration.WithLabelValues(f).Observe(d.Seconds())
		split.WithLabelValues(f).Observe(d.Seconds())
	}
}

// ObserveProgramming records network programming latency, now minus each
// trigger time (the EndpointSlices' last-change-trigger-time), for the
// primary family. Zero trigger times and ones after now (clock skew with the
// control plane) are skipped.
func (m *Metrics) ObserveProgramming(triggerTimes []time.Time, now time.Time) {
	if m == nil {
		return
	}
	m.ObserveProgrammingFor(proxy.IPFamily(m.families[0]), triggerTimes, now)
}

// ObserveProgrammingFor is ObserveProgramming for the given family.
func (m *Metrics) ObserveProgrammingFor(family proxy.IPFamily, triggerTimes []time.Time, now time.Time) {
	if m == nil {
		return
	}
	h := m.programming.WithLabelValues(string(family))
	for _, t := range triggerTimes {
		if t.IsZero() || t.After(now) {
			continue
		}
		h.Observe(now.Sub(t).Seconds())
	}
}

// SetPending sets how many service and endpoint changes wait for a sync.
func (m *Metrics) SetPending(services, endpoints int) {
	if m == nil {
		return
	}
	m.serviceChangesPending.Set(float64(services))
	m.endpointChangesPending.Set(float64(endpoints))
}

// AddChanges counts service and endpoint changes received.
func (m *Metrics) AddChanges(services, endpoints int) {
	if m == nil {
		return
	}
	// Counters must not go down; a negative delta would panic.
	if services > 0 {
		m.serviceChangesTotal.Add(float64(services))
	}
	if endpoints > 0 {
		m.endpointChangesTotal.Add(float64(endpoints))
	}
}

// Queued records t as the last time a sync was requested.
func (m *Metrics) Queued(t time.Time) {
	if m == nil {
		return
	}
	for _, f := range m.families {
		m.lastQueued.WithLabelValues(f).Set(unixSeconds(t))
	}
}

// Synced records t as the last time a sync succeeded.
func (m *Metrics) Synced(t time.Time) {
	if m == nil {
		return
	}
	for _, f := range m.families {
		m.lastSynced.WithLabelValues(f).Set(unixSeconds(t))
	}
}

// ObserveOperation counts one backend dataplane operation (op names the
// call, e.g. "create_load_balancer" or "nft_transaction") and its latency.
func (m *Metrics) ObserveOperation(backend, op string, err error, d time.Duration) {
	if m == nil {
		return
	}
	result := ResultSuccess
	if err != nil {
		result = ResultError
	}
	m.operations.WithLabelValues(backend, op, result).Inc()
	m.operationDuration.WithLabelValues(backend, op).Observe(d.Seconds())
}

// SyncFailed counts one failed sync of backend.
func (m *Metrics) SyncFailed(backend string) {
	if m == nil {
		return
	}
	m.syncErrors.WithLabelValues(backend).Inc()
}

// SetNoLocalEndpoints sets, for the primary family, how many service ports
// have an internal or external Local traffic policy and no local endpoints.
func (m *Metrics) SetNoLocalEndpoints(internal, external int) {
	if m == nil {
		return
	}
	m.SetNoLocalEndpointsFor(proxy.IPFamily(m.families[0]), internal, external)
}

// SetNoLocalEndpointsFor is SetNoLocalEndpoints for the given family.
func (m *Metrics) SetNoLocalEndpointsFor(family proxy.IPFamily, internal, external int) {
	if m == nil {
		return
	}
	m.noLocalEndpoints.WithLabelValues(TrafficPolicyInternal, string(family)).Set(float64(internal))
	m.noLocalEndpoints.WithLabelValues(TrafficPolicyExternal, string(family)).Set(float64(external))
}

// SetNoLocalEndpointsFromState counts, per family the metrics were created
// for, the service ports of st that have endpoints in the cluster and a
// Local policy but no local endpoints, as kube-proxy does when it decides to
// drop that traffic.
func (m *Metrics) SetNoLocalEndpointsFromState(st *proxy.State) {
	if m == nil {
		return
	}
	type counts struct{ internal, external int }
	byFamily := make(map[proxy.IPFamily]*counts, len(m.families))
	for _, f := range m.families {
		byFamily[proxy.IPFamily(f)] = &counts{}
	}
	if st != nil {
		for _, sp := range st.ServicePorts {
			c := byFamily[sp.Key.Family]
			if c == nil || !sp.HasEndpoints || len(sp.LocalEndpoints) > 0 {
				continue
			}
			if sp.InternalPolicyLocal {
				c.internal++
			}
			if sp.ExternalPolicyLocal {
				c.external++
			}
		}
	}
	for f, c := range byFamily {
		m.SetNoLocalEndpointsFor(f, c.internal, c.external)
	}
}

// ObserveHealthz counts one /healthz answer by HTTP status code.
func (m *Metrics) ObserveHealthz(code int) {
	if m == nil {
		return
	}
	m.healthzTotal.WithLabelValues(strconv.Itoa(code)).Inc()
}

// ObserveLivez counts one /livez answer by HTTP status code.
func (m *Metrics) ObserveLivez(code int) {
	if m == nil {
		return
	}
	m.livezTotal.WithLabelValues(strconv.Itoa(code)).Inc()
}

// NewRegistry returns a registry with the Go runtime and process collectors,
// as kube-proxy's /metrics has them. Use prometheus.NewRegistry for one
// without.
func NewRegistry() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	)
	return reg
}

// Handler serves g in the Prometheus exposition formats, for /metrics.
func Handler(g prometheus.Gatherer) http.Handler {
	// A collector failing (e.g. process metrics on an odd platform) should
	// not hide every other metric.
	return promhttp.HandlerFor(g, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError})
}

// unixSeconds is what prometheus.Gauge.SetToCurrentTime stores.
func unixSeconds(t time.Time) float64 {
	return float64(t.UnixNano()) / 1e9
}
