package nodecidr_test

// Address plan: cluster CIDRs 10.244.0.0/16 (node /24s) and
// fd00:10:244::/56 (node /64s); the exhaustion test uses 10.244.0.0/23,
// which holds two /24s.

import (
	"context"
	"fmt"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/nodenet/nodenet/ipam/nodecidr"
	"github.com/nodenet/nodenet/test/apiserver"
)

const leaseNamespace = "default"

var (
	clusterV4 = netip.MustParsePrefix("10.244.0.0/16")
	clusterV6 = netip.MustParsePrefix("fd00:10:244::/56")
)

// running is one allocator started by a test.
type running struct {
	cancel context.CancelFunc
	done   chan struct{} // closed when Run returned
	err    error
}

// stop ends the allocator and waits for Run to return.
func (r *running) stop(t *testing.T) {
	t.Helper()
	r.cancel()
	select {
	case <-r.done:
		if r.err != nil {
			t.Errorf("Run: %v", r.err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Run did not return after its context ended")
	}
}

// start runs an allocator named identity with short lease timings; it is
// stopped when the test ends if the test did not stop it.
func start(t *testing.T, client kubernetes.Interface, identity string, cidrs ...netip.Prefix) *running {
	t.Helper()
	a, err := nodecidr.New(nodecidr.Options{
		Client: client, ClusterCIDRs: cidrs, MaskSizeIPv4: 24, MaskSizeIPv6: 64,
		Namespace: leaseNamespace, Identity: identity,
		LeaseDuration: 2 * time.Second, RenewDeadline: 1500 * time.Millisecond, RetryPeriod: 100 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := &running{cancel: cancel, done: make(chan struct{})}
	go func() {
		r.err = a.Run(ctx)
		close(r.done)
	}()
	t.Cleanup(func() { r.stop(t) })
	return r
}

// waitFor polls cond every 50ms for up to a minute: outcomes, not timings.
func waitFor(t *testing.T, what string, cond func(ctx context.Context) (bool, error)) {
	t.Helper()
	if err := wait.PollUntilContextTimeout(t.Context(), 50*time.Millisecond, time.Minute, true, cond); err != nil {
		t.Fatalf("waiting for %s: %v", what, err)
	}
}

// createNodes creates Nodes prefix-0..n-1 all at once.
func createNodes(t *testing.T, client kubernetes.Interface, prefix string, n int) {
	t.Helper()
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Go(func() {
			node := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-%d", prefix, i)}}
			if _, err := client.CoreV1().Nodes().Create(context.Background(), node, metav1.CreateOptions{}); err != nil {
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("create node: %v", err)
	}
}

// allAssigned waits until every Node has pod CIDRs and returns them.
func allAssigned(t *testing.T, client kubernetes.Interface, want int) []v1.Node {
	t.Helper()
	var nodes []v1.Node
	waitFor(t, fmt.Sprintf("%d Nodes with pod CIDRs", want), func(ctx context.Context) (bool, error) {
		list, err := client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		nodes = list.Items
		done := 0
		for _, n := range nodes {
			if len(n.Spec.PodCIDRs) > 0 {
				done++
			}
		}
		return len(nodes) == want && done == want, nil
	})
	return nodes
}

// checkDistinct fails t unless every Node holds one subnet of each of
// cidrs at the test masks, podCIDR is podCIDRs[0], and no two Nodes'
// subnets overlap (nor any of taken).
func checkDistinct(t *testing.T, nodes []v1.Node, cidrs []netip.Prefix, taken ...netip.Prefix) {
	t.Helper()
	seen := map[netip.Prefix]string{}
	for _, p := range taken {
		seen[p] = "(set by hand)"
	}
	for _, n := range nodes {
		if len(n.Spec.PodCIDRs) != len(cidrs) || n.Spec.PodCIDR != n.Spec.PodCIDRs[0] {
			t.Errorf("node %s: podCIDR %q podCIDRs %v, want one per cluster CIDR %v", n.Name, n.Spec.PodCIDR, n.Spec.PodCIDRs, cidrs)
			continue
		}
		for i, s := range n.Spec.PodCIDRs {
			p := netip.MustParsePrefix(s)
			wantBits := 24
			if p.Addr().Is6() {
				wantBits = 64
			}
			if !cidrs[i].Contains(p.Addr()) || p.Bits() != wantBits {
				t.Errorf("node %s: %s is not a /%d of %s", n.Name, p, wantBits, cidrs[i])
			}
			for q, other := range seen {
				if q.Overlaps(p) {
					t.Errorf("node %s got %s, which overlaps %s of node %s", n.Name, p, q, other)
				}
			}
			seen[p] = n.Name
		}
	}
}

func TestFiftyNodesCreatedAtOnceGetFiftyDistinctSubnets(t *testing.T) {
	client := apiserver.StartForTest(t, apiserver.Options{}).Client()
	start(t, client, "node-a", clusterV4)
	createNodes(t, client, "node", 50)
	nodes := allAssigned(t, client, 50)
	checkDistinct(t, nodes, []netip.Prefix{clusterV4})
	for _, n := range nodes {
		if c := findCondition(&n); c != nil {
			t.Errorf("node %s has condition %+v; a Node that never waited should have none", n.Name, c)
		}
	}
}

func TestTheNextLeaderFinishesWhenTheLeaderIsKilledMidway(t *testing.T) {
	srv := apiserver.StartForTest(t, apiserver.Options{})
	c := srv.Client()
	// node-a's client makes 5 requests a second, so its 50 writes take
	// ten seconds: killed after its first, it leaves most to node-b.
	slow := rest.CopyConfig(srv.RESTConfig())
	slow.QPS, slow.Burst = 5, 1
	first := start(t, kubernetes.NewForConfigOrDie(slow), "node-a", clusterV4)
	waitFor(t, "node-a to lead", holderIs(c, "node-a"))
	start(t, c, "node-b", clusterV4)

	createNodes(t, c, "early", 50)
	waitFor(t, "the leader to assign some subnets", func(ctx context.Context) (bool, error) {
		return countAssigned(ctx, c) > 0, nil
	})
	first.stop(t)
	if n := countAssigned(t.Context(), c); n == 50 {
		t.Fatalf("node-a assigned all 50 before it was stopped; the test needs it stopped mid-way")
	} else {
		t.Logf("node-a stopped after %d of 50", n)
	}
	createNodes(t, c, "late", 10)
	nodes := allAssigned(t, c, 60)
	checkDistinct(t, nodes, []netip.Prefix{clusterV4})
	waitFor(t, "node-b to hold the lease", holderIs(c, "node-b"))
}

func TestAFullClusterCIDRGivesAClearConditionAndEventUntilASubnetFrees(t *testing.T) {
	c := apiserver.StartForTest(t, apiserver.Options{}).Client()
	small := netip.MustParsePrefix("10.244.0.0/23")
	start(t, c, "node-a", small)
	createNodes(t, c, "node", 2)
	allAssigned(t, c, 2)
	createNodes(t, c, "extra", 1)

	var cond *v1.NodeCondition
	waitFor(t, "the unavailable condition on extra-0", func(ctx context.Context) (bool, error) {
		n, err := c.CoreV1().Nodes().Get(ctx, "extra-0", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		cond = findCondition(n)
		return cond != nil, nil
	})
	if cond.Status != v1.ConditionTrue || cond.Reason != nodecidr.ReasonCIDRNotAvailable ||
		!strings.Contains(cond.Message, "no free /24 left in cluster CIDR 10.244.0.0/23") {
		t.Errorf("condition %+v: want True, %s, naming the full cluster CIDR", cond, nodecidr.ReasonCIDRNotAvailable)
	}
	waitFor(t, "a Warning Event on extra-0", func(ctx context.Context) (bool, error) {
		evs, err := c.CoreV1().Events("default").List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=extra-0"})
		if err != nil {
			return false, err
		}
		for _, e := range evs.Items {
			if e.Reason == nodecidr.ReasonCIDRNotAvailable && e.Type == v1.EventTypeWarning && e.InvolvedObject.Kind == "Node" &&
				strings.Contains(e.Message, "10.244.0.0/23") {
				return true, nil
			}
		}
		return false, nil
	})

	// Deleting a Node frees its subnet for the one waiting.
	if err := c.CoreV1().Nodes().Delete(t.Context(), "node-0", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	nodes := allAssigned(t, c, 2)
	checkDistinct(t, nodes, []netip.Prefix{small})
	n, err := c.CoreV1().Nodes().Get(t.Context(), "extra-0", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the condition on extra-0 to clear", func(ctx context.Context) (bool, error) {
		n, err = c.CoreV1().Nodes().Get(ctx, "extra-0", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		cond = findCondition(n)
		return cond != nil && cond.Status == v1.ConditionFalse, nil
	})
	if cond.Reason != nodecidr.ReasonCIDRAssigned || !strings.Contains(cond.Message, n.Spec.PodCIDRs[0]) {
		t.Errorf("cleared condition %+v: want reason %s naming %s", cond, nodecidr.ReasonCIDRAssigned, n.Spec.PodCIDRs[0])
	}
}

func TestDualStackNodesGetOneSubnetOfEachFamily(t *testing.T) {
	c := apiserver.StartForTest(t, apiserver.Options{}).Client()
	start(t, c, "node-a", clusterV4, clusterV6)
	createNodes(t, c, "node", 5)
	checkDistinct(t, allAssigned(t, c, 5), []netip.Prefix{clusterV4, clusterV6})
}

func TestARestartedAllocatorReusesNoSubnet(t *testing.T) {
	c := apiserver.StartForTest(t, apiserver.Options{}).Client()
	// Set by hand (or by an earlier allocator): the first and a half of
	// the fourth /24 are taken.
	byHand := map[string]string{"manual-0": "10.244.0.0/24", "manual-1": "10.244.3.128/25"}
	for name, cidr := range byHand {
		n := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: v1.NodeSpec{PodCIDR: cidr, PodCIDRs: []string{cidr}}}
		if _, err := c.CoreV1().Nodes().Create(t.Context(), n, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	first := start(t, c, "node-a", clusterV4)
	createNodes(t, c, "before", 5)
	allAssigned(t, c, 7)
	first.stop(t)

	start(t, c, "node-a_2", clusterV4) // the agent restarted: a new identity, after the lease runs out
	createNodes(t, c, "after", 5)
	nodes := allAssigned(t, c, 12)
	var allocated []v1.Node
	for _, n := range nodes {
		if byHand[n.Name] == "" {
			allocated = append(allocated, n)
		}
	}
	checkDistinct(t, allocated, []netip.Prefix{clusterV4},
		netip.MustParsePrefix(byHand["manual-0"]), netip.MustParsePrefix(byHand["manual-1"]))
}

func TestNewNamesTheOptionThatIsWrong(t *testing.T) {
	tests := []struct {
		name string
		opts nodecidr.Options
		want string
	}{
		{"no cluster CIDRs", nodecidr.Options{}, "ClusterCIDRs: at least one is required"},
		{"a mask larger than the CIDR", nodecidr.Options{ClusterCIDRs: []netip.Prefix{clusterV4}, MaskSizeIPv4: 8}, "ClusterCIDRs[0] with MaskSizeIPv4: node mask size /8 does not fit"},
		{"two CIDRs of one family", nodecidr.Options{ClusterCIDRs: []netip.Prefix{clusterV4, netip.MustParsePrefix("10.0.0.0/8")}, MaskSizeIPv4: 24}, "ClusterCIDRs[1] 10.0.0.0/8: at most one"},
		{"no namespace", nodecidr.Options{}, "Namespace (of the Lease) is required"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := nodecidr.New(tt.opts)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("New error = %v, want one containing %q", err, tt.want)
			}
		})
	}
}

func findCondition(n *v1.Node) *v1.NodeCondition {
	for i := range n.Status.Conditions {
		if n.Status.Conditions[i].Type == nodecidr.ConditionType {
			return &n.Status.Conditions[i]
		}
	}
	return nil
}

func countAssigned(ctx context.Context, c kubernetes.Interface) int {
	list, err := c.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return 0
	}
	n := 0
	for _, node := range list.Items {
		if len(node.Spec.PodCIDRs) > 0 {
			n++
		}
	}
	return n
}

func holderIs(c kubernetes.Interface, identity string) func(ctx context.Context) (bool, error) {
	return func(ctx context.Context) (bool, error) {
		l, err := c.CoordinationV1().Leases(leaseNamespace).Get(ctx, nodecidr.LeaseName, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		return l.Spec.HolderIdentity != nil && *l.Spec.HolderIdentity == identity, nil
	}
}
