// Address plan: cluster IPs in 10.96.0.0/16, endpoints in 10.244.1.0/24.
package source

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2/ktesting"
)

func service(name, clusterIP string, labels map[string]string) *v1.Service {
	return &v1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name, Labels: labels, ResourceVersion: "1"},
		Spec: v1.ServiceSpec{
			ClusterIP: clusterIP,
			Ports:     []v1.ServicePort{{Port: 80, Protocol: v1.ProtocolTCP}},
		},
	}
}

func slice(name, svc string, labels map[string]string) *discoveryv1.EndpointSlice {
	l := map[string]string{discoveryv1.LabelServiceName: svc}
	for k, v := range labels {
		l[k] = v
	}
	return &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Namespace: "default", Name: name, Labels: l, ResourceVersion: "1"},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{"10.244.1.5"}}},
	}
}

func node(name string) *v1.Node {
	return &v1.Node{ObjectMeta: metav1.ObjectMeta{
		Name:            name,
		Labels:          map[string]string{v1.LabelTopologyZone: "zone-a"},
		Annotations:     map[string]string{"nodenet.io/test": "yes"},
		ResourceVersion: "1",
	}}
}

// runInformers starts an informer source on client for node-a and waits
// for OnSynced.
func runInformers(t *testing.T, client *fake.Clientset) (*recorder, []string) {
	t.Helper()
	rec := newRecorder(t)
	src := NewInformers(InformerOptions{Client: client, NodeName: "node-a", Logger: ktesting.NewLogger(t, ktesting.NewConfig())})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- src.Run(ctx, rec) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	initial := rec.takeUntil("synced")
	return rec, initial
}

func TestInformersDeliverKubeProxysObjectsThenSynced(t *testing.T) {
	client := fake.NewClientset(
		service("web", "10.96.0.10", nil),
		service("headless", v1.ClusterIPNone, nil),
		service("other-proxy", "10.96.0.11", map[string]string{labelServiceProxyName: "someone-else"}),
		slice("web-1", "web", nil),
		slice("headless-1", "headless", map[string]string{v1.IsHeadlessService: ""}),
		node("node-a"),
		node("node-b"),
	)
	_, initial := runInformers(t, client)
	// The three informers deliver concurrently: only the set is fixed.
	got := slices.Sorted(slices.Values(initial[:len(initial)-1]))
	want := []string{"add EndpointSlice default/web-1", "add Node node-a", "add Service default/web"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("initial objects (-want +got):\n%s", diff)
	}
}

func TestInformersDeliverChanges(t *testing.T) {
	ctx := context.Background()
	client := fake.NewClientset(service("web", "10.96.0.10", nil), slice("web-1", "web", nil), node("node-a"), node("node-b"))
	rec, _ := runInformers(t, client)
	svcs := client.CoreV1().Services("default")
	eps := client.DiscoveryV1().EndpointSlices("default")
	nodes := client.CoreV1().Nodes()

	steps := []struct {
		name string
		do   func() error
		want []string
	}{
		{
			name: "a new Service is an add",
			do: func() error {
				_, err := svcs.Create(ctx, service("api", "10.96.0.12", nil), metav1.CreateOptions{})
				return err
			},
			want: []string{"add Service default/api"},
		},
		{
			name: "a changed Service is an update",
			do: func() error {
				svc := service("web", "10.96.0.10", nil)
				svc.ResourceVersion = "2"
				svc.Spec.Ports[0].Port = 8080
				_, err := svcs.Update(ctx, svc, metav1.UpdateOptions{})
				return err
			},
			want: []string{"update Service default/web"},
		},
		{
			name: "a Service that becomes headless is a delete",
			do: func() error {
				svc := service("api", v1.ClusterIPNone, nil)
				svc.ResourceVersion = "3"
				_, err := svcs.Update(ctx, svc, metav1.UpdateOptions{})
				return err
			},
			want: []string{"delete Service default/api"},
		},
		{
			name: "a Service another proxy claims is not delivered",
			do: func() error {
				_, err := svcs.Create(ctx, service("mesh", "10.96.0.13", map[string]string{labelServiceProxyName: "mesh"}), metav1.CreateOptions{})
				return err
			},
		},
		{
			name: "a headless Service's EndpointSlice is not delivered",
			do: func() error {
				_, err := eps.Create(ctx, slice("api-1", "api", map[string]string{v1.IsHeadlessService: ""}), metav1.CreateOptions{})
				return err
			},
		},
		{
			name: "a changed EndpointSlice is an update",
			do: func() error {
				s := slice("web-1", "web", nil)
				s.ResourceVersion = "2"
				s.Endpoints[0].Addresses = []string{"10.244.1.6"}
				_, err := eps.Update(ctx, s, metav1.UpdateOptions{})
				return err
			},
			want: []string{"update EndpointSlice default/web-1"},
		},
		{
			name: "another node's change is not delivered",
			do: func() error {
				n := node("node-b")
				n.Labels[v1.LabelTopologyZone] = "zone-b"
				_, err := nodes.Update(ctx, n, metav1.UpdateOptions{})
				return err
			},
		},
		{
			name: "this node's change is an update",
			do: func() error {
				n := node("node-a")
				n.ResourceVersion = "2"
				n.Labels[v1.LabelTopologyZone] = "zone-b"
				_, err := nodes.Update(ctx, n, metav1.UpdateOptions{})
				return err
			},
			want: []string{"update Node node-a"},
		},
		{
			name: "a deleted EndpointSlice is a delete",
			do:   func() error { return eps.Delete(ctx, "web-1", metav1.DeleteOptions{}) },
			want: []string{"delete EndpointSlice default/web-1"},
		},
		{
			name: "a deleted Service is a delete",
			do:   func() error { return svcs.Delete(ctx, "web", metav1.DeleteOptions{}) },
			want: []string{"delete Service default/web"},
		},
		{
			name: "this node's deletion is a delete",
			do:   func() error { return nodes.Delete(ctx, "node-a", metav1.DeleteOptions{}) },
			want: []string{"delete Node node-a"},
		},
	}
	for i, step := range steps {
		if err := step.do(); err != nil {
			t.Fatalf("%s: %v", step.name, err)
		}
		// Each informer delivers in order: once a sentinel of each kind
		// has arrived, everything the step caused has.
		want := append(slices.Clone(step.want), sentinels(ctx, t, client, i)...)
		got := rec.take(len(want))
		if diff := cmp.Diff(sorted(want), sorted(got)); diff != "" {
			t.Errorf("%s (-want +got):\n%s", step.name, diff)
		}
	}
}

// sentinels makes one change of each kind and returns the calls they
// cause.
func sentinels(ctx context.Context, t *testing.T, client *fake.Clientset, i int) []string {
	t.Helper()
	name := fmt.Sprintf("sentinel-%d", i)
	if _, err := client.CoreV1().Services("default").Create(ctx, service(name, "10.96.1.1", nil), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := client.DiscoveryV1().EndpointSlices("default").Create(ctx, slice(name+"-1", name, nil), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	n := node("node-a")
	n.ResourceVersion = name
	call := "update Node node-a"
	if _, err := client.CoreV1().Nodes().Update(ctx, n, metav1.UpdateOptions{}); apierrors.IsNotFound(err) {
		_, err = client.CoreV1().Nodes().Create(ctx, n, metav1.CreateOptions{})
		call = "add Node node-a"
		if err != nil {
			t.Fatal(err)
		}
	} else if err != nil {
		t.Fatal(err)
	}
	return []string{"add Service default/" + name, "add EndpointSlice default/" + name + "-1", call}
}

func sorted(s []string) []string { return slices.Sorted(slices.Values(s)) }

func TestInformerHandlersTranslateCallbacks(t *testing.T) {
	web := service("web", "10.96.0.10", nil)
	web2 := web.DeepCopy()
	web2.ResourceVersion = "2"
	headless := service("web", v1.ClusterIPNone, nil)
	headless.ResourceVersion = "3"
	s1 := slice("web-1", "web", nil)
	nodeA, nodeB := node("node-a"), node("node-b")

	tests := []struct {
		name string
		do   func(svc, sl, nd cache.ResourceEventHandler)
		want []string
	}{
		{
			name: "a delete seen only as a tombstone is still a delete",
			do: func(svc, sl, nd cache.ResourceEventHandler) {
				svc.OnAdd(web, true)
				svc.OnDelete(cache.DeletedFinalStateUnknown{Key: "default/web", Obj: web})
				sl.OnAdd(s1, true)
				sl.OnDelete(cache.DeletedFinalStateUnknown{Key: "default/web-1", Obj: s1})
				nd.OnAdd(nodeA, true)
				nd.OnDelete(cache.DeletedFinalStateUnknown{Key: "node-a", Obj: nodeA})
			},
			want: []string{
				"add Service default/web", "delete Service default/web",
				"add EndpointSlice default/web-1", "delete EndpointSlice default/web-1",
				"add Node node-a", "delete Node node-a",
			},
		},
		{
			name: "a tombstone of an object that was filtered out is dropped",
			do: func(svc, sl, nd cache.ResourceEventHandler) {
				svc.OnDelete(cache.DeletedFinalStateUnknown{Key: "default/web", Obj: headless})
				nd.OnDelete(cache.DeletedFinalStateUnknown{Key: "node-b", Obj: nodeB})
				svc.OnDelete(cache.DeletedFinalStateUnknown{Key: "default/odd", Obj: "not a service"})
			},
		},
		{
			name: "updates into and out of the filter are adds and deletes",
			do: func(svc, sl, nd cache.ResourceEventHandler) {
				svc.OnUpdate(headless, web)
				svc.OnUpdate(web, web2)
				svc.OnUpdate(web2, headless)
				svc.OnUpdate(headless, headless)
			},
			want: []string{"add Service default/web", "update Service default/web", "delete Service default/web"},
		},
		{
			name: "other nodes are dropped",
			do: func(svc, sl, nd cache.ResourceEventHandler) {
				nd.OnAdd(nodeB, true)
				nd.OnUpdate(nodeB, nodeB)
				nd.OnDelete(nodeB)
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := newRecorder(t)
			tt.do(serviceHandler(rec), sliceHandler(rec), nodeHandler(rec, "node-a"))
			if diff := cmp.Diff(tt.want, rec.calls); diff != "" {
				t.Errorf("calls (-want +got):\n%s", diff)
			}
		})
	}
}

// TestInformersKeepObjectsThroughAnAPIOutage cuts every watch and fails
// every list and watch for a while: nothing is deleted, and a change made
// once the API is back is delivered.
func TestInformersKeepObjectsThroughAnAPIOutage(t *testing.T) {
	ctx := context.Background()
	client := fake.NewClientset(service("web", "10.96.0.10", nil), slice("web-1", "web", nil), node("node-a"))
	var (
		outage   atomic.Bool
		failures = make(chan struct{}, 100)
		mu       sync.Mutex
		watchers []watch.Interface
	)
	down := errors.New("connection refused")
	fail := func(k8stesting.Action) (bool, runtime.Object, error) {
		if outage.Load() {
			failures <- struct{}{}
			return true, nil, down
		}
		return false, nil, nil
	}
	client.PrependReactor("list", "*", fail)
	client.PrependWatchReactor("*", func(action k8stesting.Action) (bool, watch.Interface, error) {
		if outage.Load() {
			failures <- struct{}{}
			return true, nil, down
		}
		w := action.(k8stesting.WatchActionImpl)
		wi, err := client.Tracker().Watch(action.GetResource(), action.GetNamespace(), w.ListOptions)
		mu.Lock()
		watchers = append(watchers, wi)
		mu.Unlock()
		return true, wi, err
	})
	rec, _ := runInformers(t, client)

	outage.Store(true)
	mu.Lock()
	for _, w := range watchers {
		w.Stop()
	}
	mu.Unlock()
	// Several failed attempts: the informers noticed the outage.
	for range 3 {
		select {
		case <-failures:
		case <-time.After(hang):
			t.Fatal("no list or watch attempt during the outage")
		}
	}
	if got := rec.String(); got != "[]" {
		t.Errorf("calls during the outage: %s", got)
	}
	outage.Store(false)
	s := service("web", "10.96.0.10", nil)
	s.ResourceVersion = "2"
	s.Spec.Ports[0].Port = 8080
	if _, err := client.CoreV1().Services("default").Update(ctx, s, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	// Once back, the informers list again: that may redeliver every
	// object as an update, and must delete none.
	rec.waitFor(func() bool {
		o := rec.object("Service default/web")
		return o != nil && o.GetResourceVersion() == "2"
	})
	for _, call := range rec.drain() {
		if strings.HasPrefix(call, "delete") {
			t.Errorf("after the outage: %s", call)
		}
	}
	for _, id := range []string{"EndpointSlice default/web-1", "Node node-a"} {
		if rec.object(id) == nil {
			t.Errorf("%s is gone after the outage", id)
		}
	}
}

func TestInformersNeedAClientAndANodeName(t *testing.T) {
	ctx := context.Background()
	if err := NewInformers(InformerOptions{NodeName: "node-a"}).Run(ctx, newRecorder(t)); err == nil {
		t.Error("no client: no error")
	}
	if err := NewInformers(InformerOptions{Client: fake.NewClientset()}).Run(ctx, newRecorder(t)); err == nil {
		t.Error("no node name: no error")
	}
}
