package overlay_test

// Address plan: as in controller_test.go.

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2/ktesting"

	"github.com/nodenet/nodenet/overlay"
	"github.com/nodenet/nodenet/overlay/hnsnet"
	"github.com/nodenet/nodenet/overlay/hostroute"
)

// staticNodes is a NodeSource holding Nodes in memory; set replaces one
// and tells the controller.
type staticNodes struct {
	mu      sync.Mutex
	nodes   map[string]*v1.Node
	changed chan struct{}
}

func newStaticNodes(nodes ...*v1.Node) *staticNodes {
	s := &staticNodes{nodes: map[string]*v1.Node{}, changed: make(chan struct{}, 1)}
	for _, n := range nodes {
		s.nodes[n.Name] = n
	}
	return s
}

func (s *staticNodes) Get(name string) (*v1.Node, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if n, ok := s.nodes[name]; ok {
		return n, nil
	}
	return nil, apierrors.NewNotFound(v1.Resource("nodes"), name)
}

func (s *staticNodes) List(sel labels.Selector) ([]*v1.Node, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []*v1.Node
	for _, n := range s.nodes {
		if sel.Matches(labels.Set(n.Labels)) {
			out = append(out, n)
		}
	}
	return out, nil
}

func (s *staticNodes) Run(ctx context.Context, changed func()) error {
	for {
		changed()
		select {
		case <-ctx.Done():
			return nil
		case <-s.changed:
		}
	}
}

func (s *staticNodes) set(n *v1.Node) {
	s.mu.Lock()
	s.nodes[n.Name] = n
	s.mu.Unlock()
	s.changed <- struct{}{}
}

// TestControllerReadsNodesWithoutAnAPIServer runs the controller on a
// NodeSource and no client, as an agent whose Nodes come from a manifest
// folder: it builds the network and follows the peers, writes nothing
// (there is no client to write with), and records the condition's Event
// once, not on every reconcile.
func TestControllerReadsNodesWithoutAnAPIServer(t *testing.T) {
	w := newWinNode(t, "")
	nodes := newStaticNodes(
		testNode("n1", "10.244.1.0/24", "192.168.77.11", nil),
		flannelPeer("n2", "10.244.2.0/24", "192.168.77.12", "5a:7f:1e:70:e8:54", 4096),
	)
	dp, err := hnsnet.New(hnsnet.Options{HNS: w.sim, HostRoutes: hostroute.NewFake(), Adapters: w.adapters})
	if err != nil {
		t.Fatal(err)
	}
	ctrl, err := overlay.NewController(overlay.ControllerOptions{
		Config: w.cfg, Nodes: nodes, Dataplane: dp, Recorder: w.recorder,
		RetryBackoff: wait.Backoff{Duration: 10 * time.Millisecond, Factor: 2, Steps: 5, Cap: 100 * time.Millisecond},
		Logger:       ktesting.NewLogger(t, ktesting.NewConfig()),
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- ctrl.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("controller: %v", err)
		}
	}()

	eventually(t, "the network is ready with a route to n2", func() bool {
		return ctrl.Local() != nil && slices.Equal(w.routes(t), []string{"10.244.2.0/24→192.168.77.12/5a-7f-1e-70-e8-54"})
	})
	nodes.set(flannelPeer("n2", "10.244.2.0/24", "192.168.77.22", "5a:7f:1e:70:e8:54", 4096))
	eventually(t, "n2's new address is routed", func() bool {
		return slices.Equal(w.routes(t), []string{"10.244.2.0/24→192.168.77.22/5a-7f-1e-70-e8-54"})
	})
	if n := strings.Count(strings.Join(w.events(), "\n"), overlay.ReasonReady); n != 1 {
		t.Errorf("%d %s events after several reconciles, want 1: %v", n, overlay.ReasonReady, w.events())
	}
}

// TestControllerReconcileOnce builds the network in one call, without
// Run: a one-shot view (nodenetctl proxy render).
func TestControllerReconcileOnce(t *testing.T) {
	w := newWinNode(t, "")
	dp, err := hnsnet.New(hnsnet.Options{HNS: w.sim, HostRoutes: hostroute.NewFake(), Adapters: w.adapters})
	if err != nil {
		t.Fatal(err)
	}
	ctrl, err := overlay.NewController(overlay.ControllerOptions{
		Config: w.cfg, Dataplane: dp, Recorder: record.NewFakeRecorder(10), Logger: ktesting.NewLogger(t, ktesting.NewConfig()),
		Nodes: newStaticNodes(testNode("n1", "", "192.168.77.11", nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := ctrl.Reconcile(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := ctrl.Ready(); err == nil || !strings.Contains(err.Error(), "podCIDRs") {
		t.Errorf("Ready() = %v, want the missing pod CIDR", err)
	}
	if _, err := overlay.NewController(overlay.ControllerOptions{Config: w.cfg, Dataplane: dp}); err == nil {
		t.Error("a controller with neither Client nor Nodes was built")
	}
}
