//go:build !windows

// Address plan: a real kube-apiserver and etcd on 127.0.0.1 at random
// ports; ConfigMaps in namespace default.
package apiwait_test

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr/funcr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/nodenet/nodenet/internal/apiwait"
	"github.com/nodenet/nodenet/test/apiserver"
)

// logLines collects what the transport logs.
type logLines struct {
	mu    sync.Mutex
	lines []string
}

func (l *logLines) has(s string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, line := range l.lines {
		if strings.Contains(line, s) {
			return true
		}
	}
	return false
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }

// An informer on a wrapped client rides out an outage without one failed
// list or watch reaching its reflector: the reflector never backs off, so
// a change made after the server returns arrives at once instead of up to
// a minute later.
func TestAnInformerRidesOutAnAPIOutageWithoutFailingToItsReflector(t *testing.T) {
	srv := apiserver.StartForTest(t, apiserver.Options{})
	ctx := t.Context()
	logs := &logLines{}
	rc := srv.RESTConfig()
	apiwait.WrapConfig(rc, apiwait.Options{
		Initial: 50 * time.Millisecond, Max: 200 * time.Millisecond,
		Logger: funcr.New(func(_, args string) {
			logs.mu.Lock()
			defer logs.mu.Unlock()
			logs.lines = append(logs.lines, args)
		}, funcr.Options{}),
	})
	// Count what reaches client-go: every failed request it sees feeds
	// its reflector's backoff.
	var failedToClientGo atomic.Int32
	var firstErr atomic.Value
	held := rc.WrapTransport
	rc.WrapTransport = func(rt http.RoundTripper) http.RoundTripper {
		return roundTripFunc(func(req *http.Request) (*http.Response, error) {
			resp, err := held(rt).RoundTrip(req)
			if err != nil && req.Context().Err() == nil {
				failedToClientGo.Add(1)
				firstErr.CompareAndSwap(nil, err.Error())
			}
			return resp, err
		})
	}
	client, err := kubernetes.NewForConfig(rc)
	if err != nil {
		t.Fatal(err)
	}

	factory := informers.NewSharedInformerFactoryWithOptions(client, 0, informers.WithNamespace("default"))
	informer := factory.Core().V1().ConfigMaps().Informer()
	seen := make(chan string, 10)
	if _, err := informer.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: func(obj any) {
		seen <- obj.(*corev1.ConfigMap).Name
	}}); err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	factory.Start(stop)
	defer factory.Shutdown()
	defer close(stop) // before Shutdown, which waits for the informers
	if !cache.WaitForCacheSync(ctx.Done(), informer.HasSynced) {
		t.Fatal("informer never synced")
	}

	srv.StopAPIServer()
	// The broken watch makes the reflector list again; that list is held.
	if err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		return logs.has("API server unreachable"), nil
	}); err != nil {
		t.Fatal("the reflector never tried the stopped server through the transport")
	}
	if err := srv.StartAPIServer(ctx); err != nil {
		t.Fatal(err)
	}
	admin := srv.Client()
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "after-outage"}}
	if _, err := admin.CoreV1().ConfigMaps("default").Create(ctx, cm, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	timeout := time.After(2 * time.Minute)
	for name := ""; name != "after-outage"; {
		select {
		case name = <-seen:
		case <-timeout:
			t.Fatal("the ConfigMap made after the outage never reached the informer")
		}
	}
	if n := failedToClientGo.Load(); n != 0 {
		t.Errorf("%d requests failed to client-go (first: %v); each one grows its reflector's backoff", n, firstErr.Load())
	}
	if !logs.has("API server reachable again") {
		t.Error("the return of the API server was not logged")
	}
}
