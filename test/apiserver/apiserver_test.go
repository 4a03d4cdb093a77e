// Address plan (nothing here is routed; the apiserver only stores it):
//
//	apiserver, etcd client, etcd peer  127.0.0.1:<random ports>
//	service CIDR                       10.96.0.0/12 (the default)
//	Service default/web ClusterIP      10.96.100.10
//	                                   http 80/TCP -> 8080, dns 53/UDP -> 5353
//	Node node-a                        InternalIP 192.0.2.11 (TEST-NET-1)
//	                                   podCIDRs 10.244.1.0/24, fd00:10:244:1::/64
//	EndpointSlice web-1 endpoints      10.244.1.5 (node-a, ready)
//	                                   10.244.1.6 (node-a, not ready; the update
//	                                   makes it ready and adds 10.244.1.7)
package apiserver_test

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/nodenet/nodenet/test/apiserver"
)

const (
	namespace   = "default"
	serviceName = "web"
	nodeName    = "node-a"
	sliceName   = "web-1"
	waitFor     = 10 * time.Second
)

func TestObjectsRoundTripThroughInformers(t *testing.T) {
	begin := time.Now()
	srv := apiserver.StartForTest(t, apiserver.Options{})
	t.Logf("apiserver ready in %s at %s", time.Since(begin).Round(time.Millisecond), srv.URL)
	client := srv.Client()
	ctx := t.Context()

	wantNode := testNode()
	wantService := testService()
	wantSlice := testSlice()
	if _, err := client.CoreV1().Nodes().Create(ctx, wantNode, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create node: %v", err)
	}
	if _, err := client.CoreV1().Services(namespace).Create(ctx, wantService, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create service: %v", err)
	}
	created, err := client.DiscoveryV1().EndpointSlices(namespace).Create(ctx, wantSlice, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create endpointslice: %v", err)
	}

	informerCtx, stopInformers := context.WithCancel(ctx)
	factory := informers.NewSharedInformerFactory(client, 0)
	t.Cleanup(func() {
		stopInformers()
		factory.Shutdown()
	})
	nodes := factory.Core().V1().Nodes()
	services := factory.Core().V1().Services()
	slices := factory.Discovery().V1().EndpointSlices()
	// Informers register with the factory on first Informer() call, and
	// Start only runs registered ones.
	nodes.Informer()
	services.Informer()
	updates := make(chan *discoveryv1.EndpointSlice, 16)
	_, err = slices.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		UpdateFunc: func(_, obj any) {
			if s, ok := obj.(*discoveryv1.EndpointSlice); ok {
				updates <- s
			}
		},
	})
	if err != nil {
		t.Fatalf("add endpointslice handler: %v", err)
	}
	factory.Start(informerCtx.Done())
	for typ, ok := range factory.WaitForCacheSync(informerCtx.Done()) {
		if !ok {
			t.Fatalf("informer cache for %v did not sync", typ)
		}
	}

	t.Run("node keeps podCIDRs, annotations and addresses", func(t *testing.T) {
		got := eventually(t, func() (*corev1.Node, error) { return nodes.Lister().Get(nodeName) })
		if diff := cmp.Diff(nodeView(wantNode), nodeView(got)); diff != "" {
			t.Errorf("node from lister (-want +got):\n%s", diff)
		}
	})

	t.Run("service keeps its ClusterIP and both ports", func(t *testing.T) {
		got := eventually(t, func() (*corev1.Service, error) {
			return services.Lister().Services(namespace).Get(serviceName)
		})
		if diff := cmp.Diff(wantService.Spec.Ports, got.Spec.Ports); diff != "" {
			t.Errorf("service ports (-want +got):\n%s", diff)
		}
		if diff := cmp.Diff([]string{"10.96.100.10"}, got.Spec.ClusterIPs); diff != "" {
			t.Errorf("service ClusterIPs (-want +got):\n%s", diff)
		}
		if got.Spec.Type != corev1.ServiceTypeClusterIP {
			t.Errorf("service type = %q, want ClusterIP", got.Spec.Type)
		}
	})

	t.Run("endpointslice is found by its service-name label", func(t *testing.T) {
		selector := labels.SelectorFromSet(labels.Set{discoveryv1.LabelServiceName: serviceName})
		got := eventually(t, func() ([]*discoveryv1.EndpointSlice, error) {
			list, err := slices.Lister().EndpointSlices(namespace).List(selector)
			if err == nil && len(list) == 0 {
				err = errors.New("no endpointslice yet")
			}
			return list, err
		})
		if len(got) != 1 {
			t.Fatalf("got %d endpointslices for service %s, want 1", len(got), serviceName)
		}
		if diff := cmp.Diff(sliceView(wantSlice), sliceView(got[0])); diff != "" {
			t.Errorf("endpointslice from lister (-want +got):\n%s", diff)
		}
	})

	t.Run("endpointslice update arrives as an update event", func(t *testing.T) {
		want := created.DeepCopy()
		want.Endpoints[1].Conditions.Ready = ptr(true)
		want.Endpoints = append(want.Endpoints, discoveryv1.Endpoint{
			Addresses:  []string{"10.244.1.7"},
			Conditions: discoveryv1.EndpointConditions{Ready: ptr(true)},
			NodeName:   ptr(nodeName),
		})
		updated, err := client.DiscoveryV1().EndpointSlices(namespace).Update(ctx, want, metav1.UpdateOptions{})
		if err != nil {
			t.Fatalf("update endpointslice: %v", err)
		}
		if updated.ResourceVersion == created.ResourceVersion {
			t.Fatalf("update kept resourceVersion %s", created.ResourceVersion)
		}
		got := waitForUpdate(t, updates, updated.ResourceVersion)
		if diff := cmp.Diff(sliceView(want), sliceView(got)); diff != "" {
			t.Errorf("updated endpointslice from event (-want +got):\n%s", diff)
		}
	})

	t.Run("kubeconfig lets another client in with TLS verified", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "kubeconfig")
		if err := srv.WriteKubeconfig(path); err != nil {
			t.Fatal(err)
		}
		cfg, err := clientcmd.BuildConfigFromFlags("", path)
		if err != nil {
			t.Fatalf("load kubeconfig: %v", err)
		}
		if cfg.Insecure || len(cfg.CAData) == 0 {
			t.Errorf("kubeconfig TLS: insecure=%v, %d bytes of CA; want verified", cfg.Insecure, len(cfg.CAData))
		}
		other, err := kubernetes.NewForConfig(cfg)
		if err != nil {
			t.Fatal(err)
		}
		node, err := other.CoreV1().Nodes().Get(ctx, nodeName, metav1.GetOptions{})
		if err != nil {
			t.Fatalf("get node through kubeconfig: %v", err)
		}
		if diff := cmp.Diff(wantNode.Spec.PodCIDRs, node.Spec.PodCIDRs); diff != "" {
			t.Errorf("podCIDRs through kubeconfig (-want +got):\n%s", diff)
		}
		v, err := other.Discovery().ServerVersion()
		if err != nil {
			t.Fatalf("server version: %v", err)
		}
		if v.GitVersion != apiserver.KubeVersion {
			t.Errorf("server version = %q, want %q", v.GitVersion, apiserver.KubeVersion)
		}
	})

	t.Run("requests without the token are refused", func(t *testing.T) {
		tr := &http.Transport{TLSClientConfig: mustTLS(t, srv)}
		defer tr.CloseIdleConnections()
		resp, err := (&http.Client{Transport: tr}).Get(srv.URL + "/readyz")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("anonymous GET /readyz = %s, want 401", resp.Status)
		}
	})

	t.Run("Stop ends the apiserver and removes its dir", func(t *testing.T) {
		stopInformers()
		factory.Shutdown()
		srv.Stop()
		srv.Stop() // idempotent; t.Cleanup calls it a third time
		if _, err := os.Stat(srv.Dir); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("server dir %s after Stop: %v, want not exist", srv.Dir, err)
		}
		short, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		if _, err := client.CoreV1().Nodes().Get(short, nodeName, metav1.GetOptions{}); err == nil {
			t.Error("apiserver still answers after Stop")
		}
	})
}

// Two servers started at once (as parallel test packages do) get their own
// ports and their own etcd.
func TestParallelServersAreIsolated(t *testing.T) {
	if testing.Short() {
		t.Skip("starts two servers")
	}
	apiserver.RequireBinaries(t, apiserver.Options{})
	servers := make([]*apiserver.Server, 2)
	errs := make([]error, 2)
	var wg sync.WaitGroup
	for i := range servers {
		wg.Go(func() { servers[i], errs[i] = apiserver.Start(t.Context(), apiserver.Options{}) })
	}
	wg.Wait()
	for i, s := range servers {
		if s != nil {
			t.Cleanup(s.Stop)
		}
		if errs[i] != nil {
			t.Errorf("start server %d: %v", i, errs[i])
		}
	}
	if t.Failed() {
		t.FailNow()
	}
	a, b := servers[0], servers[1]
	if a.URL == b.URL || a.EtcdURL == b.EtcdURL || a.Dir == b.Dir {
		t.Fatalf("servers share an address or dir: %s %s %s / %s %s %s",
			a.URL, a.EtcdURL, a.Dir, b.URL, b.EtcdURL, b.Dir)
	}
	ctx := t.Context()
	if _, err := a.Client().CoreV1().Nodes().Create(ctx, testNode(), metav1.CreateOptions{}); err != nil {
		t.Fatalf("create node on first server: %v", err)
	}
	_, err := b.Client().CoreV1().Nodes().Get(ctx, nodeName, metav1.GetOptions{})
	if err == nil || !strings.Contains(err.Error(), "not found") {
		t.Errorf("second server get node = %v, want not found", err)
	}
}

func TestCacheRootFollowsEnvironment(t *testing.T) {
	tests := []struct {
		name              string
		nodenetCache, xdg string
		home              string
		want              string
	}{
		{name: "NODENET_CACHE wins over everything", nodenetCache: "/a", xdg: "/b", home: "/c", want: "/a"},
		{name: "XDG_CACHE_HOME gets a nodenet subdir", xdg: "/b", home: "/c", want: filepath.Join("/b", "nodenet")},
		{name: "HOME falls back to .cache/nodenet", home: "/c", want: filepath.Join("/c", ".cache", "nodenet")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv("NODENET_CACHE", tt.nodenetCache)
			t.Setenv("XDG_CACHE_HOME", tt.xdg)
			t.Setenv("HOME", tt.home)
			t.Setenv("USERPROFILE", tt.home) // os.UserHomeDir on Windows
			got, err := apiserver.CacheRoot()
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Errorf("CacheRoot() = %q, want %q", got, tt.want)
			}
		})
	}
}

// recorder stands in for *testing.T to watch StartForTest give up.
type recorder struct {
	testing.TB
	skipped, fatal string
}

type stopTest struct{}

func (r *recorder) Helper() {}
func (r *recorder) Skipf(format string, args ...any) {
	r.skipped = fmt.Sprintf(format, args...)
	panic(stopTest{})
}
func (r *recorder) Fatalf(format string, args ...any) {
	r.fatal = fmt.Sprintf(format, args...)
	panic(stopTest{})
}

func startWithRecorder(opts apiserver.Options) (r *recorder) {
	r = &recorder{}
	defer func() {
		if v := recover(); v != nil && v != (stopTest{}) {
			panic(v)
		}
	}()
	apiserver.StartForTest(r, opts)
	return r
}

func TestMissingBinariesSkipOnlyOutsideCI(t *testing.T) {
	missing := apiserver.Options{
		KubeAPIServer: filepath.Join(t.TempDir(), "no-kube-apiserver"),
		Etcd:          filepath.Join(t.TempDir(), "no-etcd"),
	}
	t.Run("outside CI the test is skipped", func(t *testing.T) {
		t.Setenv("CI", "")
		r := startWithRecorder(missing)
		if r.skipped == "" || r.fatal != "" {
			t.Errorf("skipped=%q fatal=%q, want a skip", r.skipped, r.fatal)
		}
	})
	t.Run("under CI=true the test fails and says how to build", func(t *testing.T) {
		t.Setenv("CI", "true")
		r := startWithRecorder(missing)
		if r.fatal == "" || r.skipped != "" {
			t.Fatalf("skipped=%q fatal=%q, want a failure", r.skipped, r.fatal)
		}
		if !strings.Contains(r.fatal, "hack/build-kube-binaries.sh") {
			t.Errorf("failure %q does not name hack/build-kube-binaries.sh", r.fatal)
		}
	})
}

func testNode() *corev1.Node {
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name:        nodeName,
			Labels:      map[string]string{"kubernetes.io/hostname": nodeName},
			Annotations: map[string]string{"nodenet.io/test": "round-trip"},
		},
		Spec: corev1.NodeSpec{
			PodCIDR:  "10.244.1.0/24",
			PodCIDRs: []string{"10.244.1.0/24", "fd00:10:244:1::/64"},
		},
		Status: corev1.NodeStatus{
			Addresses: []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "192.0.2.11"}},
		},
	}
}

func testService() *corev1.Service {
	return &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: serviceName, Namespace: namespace},
		Spec: corev1.ServiceSpec{
			Type:      corev1.ServiceTypeClusterIP,
			ClusterIP: "10.96.100.10",
			Selector:  map[string]string{"app": serviceName},
			Ports: []corev1.ServicePort{
				{Name: "http", Protocol: corev1.ProtocolTCP, Port: 80, TargetPort: intstr.FromInt32(8080)},
				{Name: "dns", Protocol: corev1.ProtocolUDP, Port: 53, TargetPort: intstr.FromInt32(5353)},
			},
		},
	}
}

func testSlice() *discoveryv1.EndpointSlice {
	return &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{
			Name:      sliceName,
			Namespace: namespace,
			Labels: map[string]string{
				discoveryv1.LabelServiceName: serviceName,
				discoveryv1.LabelManagedBy:   "nodenet-test",
			},
		},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints: []discoveryv1.Endpoint{
			{Addresses: []string{"10.244.1.5"}, Conditions: discoveryv1.EndpointConditions{Ready: ptr(true)}, NodeName: ptr(nodeName)},
			{Addresses: []string{"10.244.1.6"}, Conditions: discoveryv1.EndpointConditions{Ready: ptr(false)}, NodeName: ptr(nodeName)},
		},
		Ports: []discoveryv1.EndpointPort{
			{Name: ptr("http"), Protocol: ptr(corev1.ProtocolTCP), Port: ptr[int32](8080)},
			{Name: ptr("dns"), Protocol: ptr(corev1.ProtocolUDP), Port: ptr[int32](5353)},
		},
	}
}

// nodeView is what a network agent reads from a Node; server-set fields
// (uid, taints from admission, timestamps) stay out of the comparison.
type nodeViewT struct {
	Annotations map[string]string
	PodCIDR     string
	PodCIDRs    []string
	Addresses   []corev1.NodeAddress
}

func nodeView(n *corev1.Node) nodeViewT {
	return nodeViewT{n.Annotations, n.Spec.PodCIDR, n.Spec.PodCIDRs, n.Status.Addresses}
}

type sliceViewT struct {
	Labels      map[string]string
	AddressType discoveryv1.AddressType
	Endpoints   []discoveryv1.Endpoint
	Ports       []discoveryv1.EndpointPort
}

func sliceView(s *discoveryv1.EndpointSlice) sliceViewT {
	return sliceViewT{s.Labels, s.AddressType, s.Endpoints, s.Ports}
}

// eventually polls get until it succeeds; informers fill their caches
// asynchronously even after the initial sync.
func eventually[T any](t *testing.T, get func() (T, error)) T {
	t.Helper()
	deadline := time.Now().Add(waitFor)
	for {
		v, err := get()
		if err == nil {
			return v
		}
		if time.Now().After(deadline) {
			t.Fatalf("not in informer cache after %s: %v", waitFor, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func waitForUpdate(t *testing.T, updates <-chan *discoveryv1.EndpointSlice, resourceVersion string) *discoveryv1.EndpointSlice {
	t.Helper()
	timeout := time.After(waitFor)
	for {
		select {
		case s := <-updates:
			if s.Name == sliceName && s.ResourceVersion == resourceVersion {
				return s
			}
		case <-timeout:
			t.Fatalf("no update event for endpointslice %s at resourceVersion %s within %s",
				sliceName, resourceVersion, waitFor)
		}
	}
}

// mustTLS is the verified TLS setup of the admin config, without the token.
func mustTLS(t *testing.T, srv *apiserver.Server) *tls.Config {
	t.Helper()
	cfg, err := rest.TLSConfigFor(srv.RESTConfig())
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

func ptr[T any](v T) *T { return &v }
