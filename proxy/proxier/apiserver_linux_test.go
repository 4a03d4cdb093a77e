package proxier_test

import (
	"context"
	"fmt"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/ktesting"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/knftables"

	"github.com/nodenet/nodenet/proxy"
	"github.com/nodenet/nodenet/proxy/brain"
	"github.com/nodenet/nodenet/proxy/metrics"
	"github.com/nodenet/nodenet/proxy/nftables"
	"github.com/nodenet/nodenet/proxy/proxier"
	"github.com/nodenet/nodenet/proxy/source"
	"github.com/nodenet/nodenet/test/apiserver"
)

const (
	nodeName = "node-a"
	ns       = "default"
	// follow bounds each wait for the proxy to catch up: generous, it is
	// a deadline and not a measurement.
	follow = 30 * time.Second
)

// fixture is a proxier fed by informers on a real kube-apiserver,
// programming the nftables backend's table into knftables' Fake.
type fixture struct {
	client  kubernetes.Interface
	nft     *knftables.Fake
	reg     *prometheus.Registry
	proxier *proxier.Proxier
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	srv := apiserver.StartForTest(t, apiserver.Options{})
	client := srv.Client()
	ctx := t.Context()
	node := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: nodeName, Labels: map[string]string{v1.LabelTopologyZone: "zone-a"}}}
	if _, err := client.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create node: %v", err)
	}

	logger := ktesting.NewLogger(t, ktesting.NewConfig(ktesting.Verbosity(2)))
	backend, fake := newBackend(t, logger)
	reg := prometheus.NewRegistry()
	p, err := proxier.New(proxier.Options{
		Source:        source.NewInformers(source.InformerOptions{Client: client, NodeName: nodeName, Logger: logger}),
		Backend:       backend,
		Brain:         brain.Options{NodeName: nodeName, Families: []proxy.IPFamily{proxy.IPv4}, Logger: logger},
		MinSyncPeriod: 100 * time.Millisecond,
		SyncPeriod:    time.Hour, // only the changes under test cause syncs
		Metrics:       metrics.New(reg, proxy.IPv4),
		Logger:        logger,
	})
	if err != nil {
		t.Fatalf("proxier: %v", err)
	}
	runCtx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Run(runCtx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("proxier run: %v", err)
		}
	})
	f := &fixture{client: client, nft: fake, reg: reg, proxier: p}
	f.waitFor(t, "the first sync", func() bool { return p.Syncs() > 0 })
	return f
}

// newBackend returns the nftables backend of an IPv4 node of a cluster
// with pods in 10.244.0.0/16 and services in 10.96.0.0/12, writing into
// knftables' Fake.
func newBackend(t *testing.T, logger klog.Logger) (*nftables.Backend, *knftables.Fake) {
	t.Helper()
	fake := knftables.NewFake(knftables.InetFamily, nftables.TableName)
	backend, err := nftables.New(nftables.Options{
		NFT:               fake,
		Families:          []proxy.IPFamily{proxy.IPv4},
		LocalTrafficCIDRs: []netip.Prefix{netip.MustParsePrefix("10.244.0.0/16")},
		ServiceCIDRs:      []netip.Prefix{netip.MustParsePrefix("10.96.0.0/12")},
		Logger:            logger,
	})
	if err != nil {
		t.Fatalf("nftables backend: %v", err)
	}
	return backend, fake
}

func (f *fixture) waitFor(t *testing.T, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(follow)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s; table:\n%s", follow, what, f.nft.Dump())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// programmed counts network_programming_duration_seconds observations.
func (f *fixture) programmed(t *testing.T) uint64 {
	t.Helper()
	families, err := f.reg.Gather()
	if err != nil {
		t.Fatalf("gather metrics: %v", err)
	}
	for _, mf := range families {
		if mf.GetName() != "kubeproxy_network_programming_duration_seconds" {
			continue
		}
		var n uint64
		for _, m := range mf.GetMetric() {
			n += m.GetHistogram().GetSampleCount()
		}
		return n
	}
	return 0
}

func service(name string, port int32) *v1.Service {
	return &v1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: v1.ServiceSpec{
			Type:  v1.ServiceTypeClusterIP,
			Ports: []v1.ServicePort{{Name: "http", Port: port, Protocol: v1.ProtocolTCP, TargetPort: intstr.FromString("http")}},
		},
	}
}

// slice returns service's EndpointSlice holding ips, all serving on
// port, stamped with a change trigger time so the programming latency is
// measured.
func slice(svc string, port int32, ips ...string) *discoveryv1.EndpointSlice {
	s := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{
			Name: svc + "-abc", Namespace: ns,
			Labels:      map[string]string{discoveryv1.LabelServiceName: svc},
			Annotations: map[string]string{v1.EndpointsLastChangeTriggerTime: time.Now().UTC().Format(time.RFC3339Nano)},
		},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: ptr.To("http"), Port: ptr.To(port), Protocol: ptr.To(v1.ProtocolTCP)}},
	}
	for _, ip := range ips {
		s.Endpoints = append(s.Endpoints, discoveryv1.Endpoint{
			Addresses:  []string{ip},
			Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)},
			NodeName:   ptr.To(nodeName),
		})
	}
	return s
}

// TestRulesFollowTheAPIServer drives create, update and delete of a
// Service and its EndpointSlice through a real kube-apiserver and checks
// that the table follows within the sync that observes each slice change:
// the moment network_programming_duration_seconds counts the change, the
// rules are already in place.
func TestRulesFollowTheAPIServer(t *testing.T) {
	f := newFixture(t)
	ctx := t.Context()
	services := f.client.CoreV1().Services(ns)
	slices := f.client.DiscoveryV1().EndpointSlices(ns)

	svc, err := services.Create(ctx, service("web", 80), metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create service: %v", err)
	}
	clusterIP := svc.Spec.ClusterIP
	before := f.programmed(t)
	if _, err := slices.Create(ctx, slice("web", 8080, "10.244.1.5", "10.244.1.6"), metav1.CreateOptions{}); err != nil {
		t.Fatalf("create slice: %v", err)
	}
	f.waitFor(t, "the new slice's programming to be recorded", func() bool { return f.programmed(t) > before })
	dump := f.nft.Dump()
	for _, want := range []string{clusterIP, "10.244.1.5", "10.244.1.6", "8080", "default/web/tcp/80"} {
		if !strings.Contains(dump, want) {
			t.Errorf("after create, the table lacks %q:\n%s", want, dump)
		}
	}
	if sp := f.proxier.State().ServicePorts[webKey()]; sp == nil || len(sp.InternalEndpoints) != 2 {
		t.Errorf("after create, the programmed state has %+v, want web with 2 endpoints", sp)
	}

	// Scale: one endpoint replaced by another.
	before = f.programmed(t)
	if _, err := slices.Update(ctx, slice("web", 8080, "10.244.1.6", "10.244.1.7"), metav1.UpdateOptions{}); err != nil {
		t.Fatalf("update slice: %v", err)
	}
	f.waitFor(t, "the slice update's programming to be recorded", func() bool { return f.programmed(t) > before })
	dump = f.nft.Dump()
	if strings.Contains(dump, "10.244.1.5") || !strings.Contains(dump, "10.244.1.7") {
		t.Errorf("after the update, want 10.244.1.7 and no 10.244.1.5:\n%s", dump)
	}

	// Change the service port: the old frontend goes, the new one comes.
	svc, err = services.Get(ctx, "web", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("get service: %v", err)
	}
	svc.Spec.Ports[0].Port = 81
	if _, err := services.Update(ctx, svc, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("update service: %v", err)
	}
	// (An emptied chain is deleted by a later sync, as in kube-proxy: the
	// kernel may still hold a reference for a moment. What routes traffic
	// is the elements.)
	f.waitFor(t, "the new service port", func() bool {
		d := f.nft.Dump()
		return elements(d, "default/web/tcp/81") > 0 && elements(d, "default/web/tcp/80") == 0
	})

	// Delete both: nothing of the service stays.
	if err := slices.Delete(ctx, "web-abc", metav1.DeleteOptions{}); err != nil {
		t.Fatalf("delete slice: %v", err)
	}
	if err := services.Delete(ctx, "web", metav1.DeleteOptions{}); err != nil {
		t.Fatalf("delete service: %v", err)
	}
	f.waitFor(t, "the service to leave the table", func() bool {
		d := f.nft.Dump()
		return elements(d, "default/web/") == 0 && elements(d, clusterIP) == 0
	})
	for key := range f.proxier.State().ServicePorts {
		if key.Name == "web" {
			t.Errorf("after delete, the programmed state still has %v", key)
		}
	}
}

func webKey() proxy.ServicePortKey {
	return proxy.ServicePortKey{
		ServicePortName: proxy.ServicePortName{NamespacedName: typesName("web"), Port: "http", Protocol: proxy.TCP},
		Family:          proxy.IPv4,
	}
}

// TestManyServicesOneSync creates services in a burst and checks the
// min sync period coalesces them: every one is programmed, in fewer syncs
// than changes.
func TestManyServicesOneSync(t *testing.T) {
	f := newFixture(t)
	ctx := t.Context()
	const n = 20
	start := f.proxier.Syncs()
	for i := range n {
		name := fmt.Sprintf("burst-%d", i)
		if _, err := f.client.CoreV1().Services(ns).Create(ctx, service(name, 80), metav1.CreateOptions{}); err != nil {
			t.Fatalf("create %s: %v", name, err)
		}
		if _, err := f.client.DiscoveryV1().EndpointSlices(ns).Create(ctx, slice(name, 8080, fmt.Sprintf("10.244.2.%d", i+1)), metav1.CreateOptions{}); err != nil {
			t.Fatalf("create slice %s: %v", name, err)
		}
	}
	f.waitFor(t, "every burst service", func() bool {
		st := f.proxier.State()
		if st == nil {
			return false
		}
		count := 0
		for key, sp := range st.ServicePorts {
			if strings.HasPrefix(key.Name, "burst-") && len(sp.InternalEndpoints) == 1 {
				count++
			}
		}
		return count == n
	})
	if syncs := f.proxier.Syncs() - start; syncs >= 2*n {
		t.Errorf("%d changes took %d syncs: the min sync period did not coalesce them", 2*n, syncs)
	}
}

func typesName(name string) types.NamespacedName {
	return types.NamespacedName{Namespace: ns, Name: name}
}

// elements counts the table's map and set elements that mention s.
func elements(dump, s string) int {
	n := 0
	for line := range strings.Lines(dump) {
		if strings.HasPrefix(line, "add element ") && strings.Contains(line, s) {
			n++
		}
	}
	return n
}
