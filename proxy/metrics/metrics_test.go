package metrics

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"

	"github.com/nodenet/nodenet/proxy"
)

// kubeProxyNames are the kube-proxy v1.37 metric names this package must
// expose, spelled out in full so a renamed constant can't hide a change.
var kubeProxyNames = []string{
	"kubeproxy_network_programming_duration_seconds",
	"kubeproxy_proxy_healthz_total",
	"kubeproxy_proxy_livez_total",
	"kubeproxy_sync_full_proxy_rules_duration_seconds",
	"kubeproxy_sync_partial_proxy_rules_duration_seconds",
	"kubeproxy_sync_proxy_rules_duration_seconds",
	"kubeproxy_sync_proxy_rules_endpoint_changes_pending",
	"kubeproxy_sync_proxy_rules_endpoint_changes_total",
	"kubeproxy_sync_proxy_rules_last_queued_timestamp_seconds",
	"kubeproxy_sync_proxy_rules_last_timestamp_seconds",
	"kubeproxy_sync_proxy_rules_no_local_endpoints_total",
	"kubeproxy_sync_proxy_rules_service_changes_pending",
	"kubeproxy_sync_proxy_rules_service_changes_total",
}

var nodenetNames = []string{
	"nodenet_proxy_backend_operation_duration_seconds",
	"nodenet_proxy_backend_operations_total",
	"nodenet_proxy_sync_errors_total",
}

// touchAll calls every recording method once so every vector has a child.
func touchAll(m *Metrics, now time.Time) {
	m.ObserveSync(true, 5*time.Millisecond)
	m.ObserveSync(false, 2*time.Millisecond)
	m.ObserveProgramming([]time.Time{now.Add(-time.Second)}, now)
	m.SetPending(1, 2)
	m.AddChanges(3, 4)
	m.Queued(now)
	m.Synced(now)
	m.ObserveOperation("nftables", "transaction", nil, time.Millisecond)
	m.SyncFailed("nftables")
	m.SetNoLocalEndpoints(0, 1)
	m.ObserveHealthz(200)
	m.ObserveLivez(503)
}

func gather(t *testing.T, g prometheus.Gatherer) map[string]*dto.MetricFamily {
	t.Helper()
	mfs, err := g.Gather()
	if err != nil {
		t.Fatalf("gather: %v", err)
	}
	out := make(map[string]*dto.MetricFamily, len(mfs))
	for _, mf := range mfs {
		out[mf.GetName()] = mf
	}
	return out
}

func TestExposedNamesAreKubeProxysAndNodenets(t *testing.T) {
	reg := prometheus.NewRegistry()
	touchAll(New(reg), time.Unix(1000, 0))

	var got []string
	for name := range gather(t, reg) {
		got = append(got, name)
	}
	slices.Sort(got)
	want := slices.Concat(kubeProxyNames, nodenetNames)
	slices.Sort(want)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("exposed metric names (-want +got):\n%s", diff)
	}
}

func TestTypesHelpAndLabelsMatchKubeProxy(t *testing.T) {
	reg := prometheus.NewRegistry()
	touchAll(New(reg), time.Unix(1000, 0))
	mfs := gather(t, reg)

	tests := []struct {
		name   string
		typ    dto.MetricType
		help   string
		labels []string
	}{
		{"kubeproxy_sync_proxy_rules_duration_seconds", dto.MetricType_HISTOGRAM, "[ALPHA] SyncProxyRules latency in seconds", []string{"ip_family"}},
		{"kubeproxy_sync_full_proxy_rules_duration_seconds", dto.MetricType_HISTOGRAM, "[ALPHA] SyncProxyRules latency in seconds for full resyncs", []string{"ip_family"}},
		{"kubeproxy_sync_partial_proxy_rules_duration_seconds", dto.MetricType_HISTOGRAM, "[ALPHA] SyncProxyRules latency in seconds for partial resyncs", []string{"ip_family"}},
		{"kubeproxy_network_programming_duration_seconds", dto.MetricType_HISTOGRAM, "[ALPHA] In Cluster Network Programming Latency in seconds", []string{"ip_family"}},
		{"kubeproxy_sync_proxy_rules_endpoint_changes_pending", dto.MetricType_GAUGE, "[ALPHA] Pending proxy rules Endpoint changes", nil},
		{"kubeproxy_sync_proxy_rules_endpoint_changes_total", dto.MetricType_COUNTER, "[ALPHA] Cumulative proxy rules Endpoint changes", nil},
		{"kubeproxy_sync_proxy_rules_service_changes_pending", dto.MetricType_GAUGE, "[ALPHA] Pending proxy rules Service changes", nil},
		{"kubeproxy_sync_proxy_rules_service_changes_total", dto.MetricType_COUNTER, "[ALPHA] Cumulative proxy rules Service changes", nil},
		{"kubeproxy_sync_proxy_rules_last_queued_timestamp_seconds", dto.MetricType_GAUGE, "[ALPHA] The last time a sync of proxy rules was queued", []string{"ip_family"}},
		{"kubeproxy_sync_proxy_rules_last_timestamp_seconds", dto.MetricType_GAUGE, "[ALPHA] The last time proxy rules were successfully synced", []string{"ip_family"}},
		{"kubeproxy_sync_proxy_rules_no_local_endpoints_total", dto.MetricType_GAUGE, "[ALPHA] Number of services with a Local traffic policy and no endpoints", []string{"ip_family", "traffic_policy"}},
		{"kubeproxy_proxy_healthz_total", dto.MetricType_COUNTER, "[ALPHA] Cumulative proxy healthz HTTP status", []string{"code"}},
		{"kubeproxy_proxy_livez_total", dto.MetricType_COUNTER, "[ALPHA] Cumulative proxy livez HTTP status", []string{"code"}},
		{"nodenet_proxy_backend_operations_total", dto.MetricType_COUNTER, "", []string{"backend", "operation", "result"}},
		{"nodenet_proxy_backend_operation_duration_seconds", dto.MetricType_HISTOGRAM, "", []string{"backend", "operation"}},
		{"nodenet_proxy_sync_errors_total", dto.MetricType_COUNTER, "", []string{"backend"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			mf := mfs[tt.name]
			if mf == nil {
				t.Fatalf("%s is not exposed", tt.name)
			}
			if mf.GetType() != tt.typ {
				t.Errorf("type = %v, want %v", mf.GetType(), tt.typ)
			}
			if tt.help != "" && mf.GetHelp() != tt.help {
				t.Errorf("help = %q, want %q", mf.GetHelp(), tt.help)
			}
			var labels []string
			for _, lp := range mf.GetMetric()[0].GetLabel() {
				labels = append(labels, lp.GetName())
			}
			if diff := cmp.Diff(tt.labels, labels); diff != "" {
				t.Errorf("label names (-want +got):\n%s", diff)
			}
		})
	}
}

func TestSyncDurationsGoToTheOverallAndTheFullOrPartialHistogram(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := New(reg, proxy.IPv4, proxy.IPv6)
	m.ObserveSync(true, 3*time.Millisecond)
	m.ObserveSync(false, 20*time.Millisecond)
	m.ObserveSync(false, 40*time.Millisecond)

	tests := []struct {
		name  string
		count uint64
		sum   float64
	}{
		{"kubeproxy_sync_proxy_rules_duration_seconds", 3, 0.063},
		{"kubeproxy_sync_full_proxy_rules_duration_seconds", 1, 0.003},
		{"kubeproxy_sync_partial_proxy_rules_duration_seconds", 2, 0.06},
	}
	mfs := gather(t, reg)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			metrics := mfs[tt.name].GetMetric()
			if len(metrics) != 2 {
				t.Fatalf("got %d series, want one per family", len(metrics))
			}
			for _, mt := range metrics {
				h := mt.GetHistogram()
				if h.GetSampleCount() != tt.count || !near(h.GetSampleSum(), tt.sum) {
					t.Errorf("%s: count %d sum %g, want %d and %g", mt.GetLabel()[0].GetValue(), h.GetSampleCount(), h.GetSampleSum(), tt.count, tt.sum)
				}
			}
		})
	}

	var bounds []float64
	for _, b := range mfs["kubeproxy_sync_proxy_rules_duration_seconds"].GetMetric()[0].GetHistogram().GetBucket() {
		bounds = append(bounds, b.GetUpperBound())
	}
	want := []float64{0.001, 0.002, 0.004, 0.008, 0.016, 0.032, 0.064, 0.128, 0.256, 0.512, 1.024, 2.048, 4.096, 8.192, 16.384}
	if diff := cmp.Diff(want, bounds); diff != "" {
		t.Errorf("sync buckets (-want +got):\n%s", diff)
	}
}

func TestNetworkProgrammingUsesKubeProxysBucketsAndSkipsZeroAndFutureTriggers(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := New(reg)
	now := time.Unix(10_000, 0)
	m.ObserveProgramming([]time.Time{
		now.Add(-2 * time.Second),
		{},                   // no annotation
		now.Add(time.Minute), // control-plane clock ahead of ours
		now.Add(-90 * time.Second),
	}, now)
	m.ObserveProgrammingFor(proxy.IPv6, []time.Time{now.Add(-time.Second)}, now)

	mf := gather(t, reg)["kubeproxy_network_programming_duration_seconds"]
	byFamily := map[string]*dto.Histogram{}
	for _, mt := range mf.GetMetric() {
		byFamily[mt.GetLabel()[0].GetValue()] = mt.GetHistogram()
	}
	if h := byFamily["IPv4"]; h.GetSampleCount() != 2 || !near(h.GetSampleSum(), 92) {
		t.Errorf("IPv4: count %d sum %g, want 2 and 92", h.GetSampleCount(), h.GetSampleSum())
	}
	if h := byFamily["IPv6"]; h.GetSampleCount() != 1 || !near(h.GetSampleSum(), 1) {
		t.Errorf("IPv6: count %d sum %g, want 1 and 1", h.GetSampleCount(), h.GetSampleSum())
	}

	want := []float64{0, 0.25, 0.5}
	for s := 1; s <= 59; s++ {
		want = append(want, float64(s))
	}
	for s := 60; s <= 115; s += 5 {
		want = append(want, float64(s))
	}
	for s := 120; s <= 300; s += 30 {
		want = append(want, float64(s))
	}
	var got []float64
	for _, b := range byFamily["IPv4"].GetBucket() {
		got = append(got, b.GetUpperBound())
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("network programming buckets (-want +got):\n%s", diff)
	}
}

func TestGaugesAndCountersHoldWhatWasRecorded(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := New(reg, proxy.IPv6, proxy.IPv4)
	m.SetPending(1, 2)
	m.SetPending(3, 4) // replaces
	m.AddChanges(5, 6)
	m.AddChanges(1, 0)
	m.AddChanges(-1, -1) // ignored: counters only grow
	m.Queued(time.Unix(1700000000, 500_000_000))
	m.Synced(time.Unix(1700000001, 0))
	m.SetNoLocalEndpoints(2, 7) // primary family: IPv6
	m.SetNoLocalEndpointsFor(proxy.IPv4, 1, 0)
	m.ObserveHealthz(200)
	m.ObserveHealthz(200)
	m.ObserveHealthz(503)
	m.ObserveLivez(200)

	const want = `
# HELP kubeproxy_sync_proxy_rules_endpoint_changes_pending [ALPHA] Pending proxy rules Endpoint changes
# TYPE kubeproxy_sync_proxy_rules_endpoint_changes_pending gauge
kubeproxy_sync_proxy_rules_endpoint_changes_pending 4
# HELP kubeproxy_sync_proxy_rules_endpoint_changes_total [ALPHA] Cumulative proxy rules Endpoint changes
# TYPE kubeproxy_sync_proxy_rules_endpoint_changes_total counter
kubeproxy_sync_proxy_rules_endpoint_changes_total 6
# HELP kubeproxy_sync_proxy_rules_service_changes_pending [ALPHA] Pending proxy rules Service changes
# TYPE kubeproxy_sync_proxy_rules_service_changes_pending gauge
kubeproxy_sync_proxy_rules_service_changes_pending 3
# HELP kubeproxy_sync_proxy_rules_service_changes_total [ALPHA] Cumulative proxy rules Service changes
# TYPE kubeproxy_sync_proxy_rules_service_changes_total counter
kubeproxy_sync_proxy_rules_service_changes_total 6
# HELP kubeproxy_sync_proxy_rules_last_queued_timestamp_seconds [ALPHA] The last time a sync of proxy rules was queued
# TYPE kubeproxy_sync_proxy_rules_last_queued_timestamp_seconds gauge
kubeproxy_sync_proxy_rules_last_queued_timestamp_seconds{ip_family="IPv4"} 1.7000000005e+09
kubeproxy_sync_proxy_rules_last_queued_timestamp_seconds{ip_family="IPv6"} 1.7000000005e+09
# HELP kubeproxy_sync_proxy_rules_last_timestamp_seconds [ALPHA] The last time proxy rules were successfully synced
# TYPE kubeproxy_sync_proxy_rules_last_timestamp_seconds gauge
kubeproxy_sync_proxy_rules_last_timestamp_seconds{ip_family="IPv4"} 1.700000001e+09
kubeproxy_sync_proxy_rules_last_timestamp_seconds{ip_family="IPv6"} 1.700000001e+09
# HELP kubeproxy_sync_proxy_rules_no_local_endpoints_total [ALPHA] Number of services with a Local traffic policy and no endpoints
# TYPE kubeproxy_sync_proxy_rules_no_local_endpoints_total gauge
kubeproxy_sync_proxy_rules_no_local_endpoints_total{ip_family="IPv4",traffic_policy="external"} 0
kubeproxy_sync_proxy_rules_no_local_endpoints_total{ip_family="IPv4",traffic_policy="internal"} 1
kubeproxy_sync_proxy_rules_no_local_endpoints_total{ip_family="IPv6",traffic_policy="external"} 7
kubeproxy_sync_proxy_rules_no_local_endpoints_total{ip_family="IPv6",traffic_policy="internal"} 2
# HELP kubeproxy_proxy_healthz_total [ALPHA] Cumulative proxy healthz HTTP status
# TYPE kubeproxy_proxy_healthz_total counter
kubeproxy_proxy_healthz_total{code="200"} 2
kubeproxy_proxy_healthz_total{code="503"} 1
# HELP kubeproxy_proxy_livez_total [ALPHA] Cumulative proxy livez HTTP status
# TYPE kubeproxy_proxy_livez_total counter
kubeproxy_proxy_livez_total{code="200"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want),
		"kubeproxy_sync_proxy_rules_endpoint_changes_pending",
		"kubeproxy_sync_proxy_rules_endpoint_changes_total",
		"kubeproxy_sync_proxy_rules_service_changes_pending",
		"kubeproxy_sync_proxy_rules_service_changes_total",
		"kubeproxy_sync_proxy_rules_last_queued_timestamp_seconds",
		"kubeproxy_sync_proxy_rules_last_timestamp_seconds",
		"kubeproxy_sync_proxy_rules_no_local_endpoints_total",
		"kubeproxy_proxy_healthz_total",
		"kubeproxy_proxy_livez_total",
	); err != nil {
		t.Error(err)
	}
}

func TestBackendOperationsAreCountedByResult(t *testing.T) {
	tests := []struct {
		name        string
		calls       []error
		wantSuccess float64
		wantError   float64
	}{
		{name: "a success counts as success", calls: []error{nil}, wantSuccess: 1},
		{name: "an error counts as error", calls: []error{errors.New("boom")}, wantError: 1},
		{name: "mixed calls count separately", calls: []error{nil, errors.New("a"), nil, errors.New("b"), nil}, wantSuccess: 3, wantError: 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			reg := prometheus.NewRegistry()
			m := New(reg)
			for _, err := range tt.calls {
				m.ObserveOperation("hns", "create_load_balancer", err, 10*time.Millisecond)
			}
			if got := testutil.ToFloat64(m.operations.WithLabelValues("hns", "create_load_balancer", ResultSuccess)); got != tt.wantSuccess {
				t.Errorf("success = %g, want %g", got, tt.wantSuccess)
			}
			if got := testutil.ToFloat64(m.operations.WithLabelValues("hns", "create_load_balancer", ResultError)); got != tt.wantError {
				t.Errorf("error = %g, want %g", got, tt.wantError)
			}
			h := gather(t, reg)["nodenet_proxy_backend_operation_duration_seconds"].GetMetric()[0].GetHistogram()
			if h.GetSampleCount() != uint64(len(tt.calls)) {
				t.Errorf("duration samples = %d, want %d", h.GetSampleCount(), len(tt.calls))
			}
		})
	}
}

func TestSyncFailuresAreCountedPerBackend(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := New(reg)
	m.SyncFailed("nftables")
	m.SyncFailed("nftables")
	m.SyncFailed("hns")
	const want = `
# HELP nodenet_proxy_sync_errors_total Proxy syncs that a backend failed.
# TYPE nodenet_proxy_sync_errors_total counter
nodenet_proxy_sync_errors_total{backend="hns"} 1
nodenet_proxy_sync_errors_total{backend="nftables"} 2
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "nodenet_proxy_sync_errors_total"); err != nil {
		t.Error(err)
	}
}

func TestNoLocalEndpointsFromStateCountsLikeKubeProxy(t *testing.T) {
	local := []proxy.Endpoint{{Local: true, Ready: true}}
	port := func(name string, fam proxy.IPFamily, itp, etp, hasEndpoints bool, localEPs []proxy.Endpoint) *proxy.ServicePort {
		return &proxy.ServicePort{
			Key:                 proxy.ServicePortKey{ServicePortName: proxy.ServicePortName{Port: name, Protocol: proxy.TCP}, Family: fam},
			InternalPolicyLocal: itp,
			ExternalPolicyLocal: etp,
			HasEndpoints:        hasEndpoints,
			LocalEndpoints:      localEPs,
		}
	}
	tests := []struct {
		name  string
		ports []*proxy.ServicePort
		// internal/external per family
		want map[string][2]float64
	}{
		{
			name: "an empty state counts zero in every family",
			want: map[string][2]float64{"IPv4": {0, 0}, "IPv6": {0, 0}},
		},
		{
			name: "local policies without local endpoints count per policy and family",
			ports: []*proxy.ServicePort{
				port("a", proxy.IPv4, true, false, true, nil),
				port("b", proxy.IPv4, true, true, true, nil),
				port("c", proxy.IPv6, false, true, true, nil),
			},
			want: map[string][2]float64{"IPv4": {2, 1}, "IPv6": {0, 1}},
		},
		{
			name: "ports with local endpoints, cluster policies or no endpoints at all don't count",
			ports: []*proxy.ServicePort{
				port("a", proxy.IPv4, true, true, true, local),
				port("b", proxy.IPv4, false, false, true, nil),
				port("c", proxy.IPv4, true, true, false, nil),
			},
			want: map[string][2]float64{"IPv4": {0, 0}, "IPv6": {0, 0}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := New(nil, proxy.IPv4, proxy.IPv6)
			st := &proxy.State{ServicePorts: map[proxy.ServicePortKey]*proxy.ServicePort{}}
			for _, sp := range tt.ports {
				st.ServicePorts[sp.Key] = sp
			}
			m.SetNoLocalEndpointsFromState(st)
			for fam, w := range tt.want {
				gotI := testutil.ToFloat64(m.noLocalEndpoints.WithLabelValues(TrafficPolicyInternal, fam))
				gotE := testutil.ToFloat64(m.noLocalEndpoints.WithLabelValues(TrafficPolicyExternal, fam))
				if gotI != w[0] || gotE != w[1] {
					t.Errorf("%s: internal %g external %g, want %g and %g", fam, gotI, gotE, w[0], w[1])
				}
			}
		})
	}
}

func TestANilMetricsRecordsNothingAndDoesNotPanic(t *testing.T) {
	var m *Metrics
	touchAll(m, time.Unix(1000, 0))
	m.ObserveProgrammingFor(proxy.IPv6, []time.Time{time.Unix(1, 0)}, time.Unix(2, 0))
	m.SetNoLocalEndpointsFor(proxy.IPv6, 1, 1)
	m.SetNoLocalEndpointsFromState(&proxy.State{})
}

func TestEachMetricsOwnsItsRegistry(t *testing.T) {
	// No package-level state: two instances on two registries don't clash
	// and don't see each other's values.
	r1, r2 := prometheus.NewRegistry(), prometheus.NewRegistry()
	m1, _ := New(r1), New(r2)
	m1.SyncFailed("hns")
	if n, err := testutil.GatherAndCount(r2, "nodenet_proxy_sync_errors_total"); err != nil || n != 0 {
		t.Errorf("second registry has %d sync error series (err %v), want 0", n, err)
	}
	if n, err := testutil.GatherAndCount(r1, "nodenet_proxy_sync_errors_total"); err != nil || n != 1 {
		t.Errorf("first registry has %d sync error series (err %v), want 1", n, err)
	}
}

func TestHandlerServesTheExpositionWithRuntimeCollectorsOnlyWhenAsked(t *testing.T) {
	tests := []struct {
		name        string
		reg         *prometheus.Registry
		wantRuntime bool
	}{
		{name: "a plain registry has only proxy metrics", reg: prometheus.NewRegistry()},
		{name: "NewRegistry adds Go and process metrics", reg: NewRegistry(), wantRuntime: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := New(tt.reg)
			m.Synced(time.Unix(42, 0))
			srv := httptest.NewServer(Handler(tt.reg))
			defer srv.Close()
			resp, err := http.Get(srv.URL + "/metrics")
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("status %d", resp.StatusCode)
			}
			text := string(body)
			if !strings.Contains(text, `kubeproxy_sync_proxy_rules_last_timestamp_seconds{ip_family="IPv4"} 42`) {
				t.Errorf("exposition lacks the last sync timestamp:\n%s", text)
			}
			if got := strings.Contains(text, "go_goroutines "); got != tt.wantRuntime {
				t.Errorf("go_goroutines present = %v, want %v", got, tt.wantRuntime)
			}
		})
	}
}

func near(a, b float64) bool {
	d := a - b
	return d < 1e-9 && d > -1e-9
}
