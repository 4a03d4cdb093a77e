package nodecidr

// Address plan: cluster CIDR 10.244.0.0/16, node /24s.

import (
	"net/netip"
	"slices"
	"testing"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"
	corelisters "k8s.io/client-go/listers/core/v1"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"
)

// A write that meets a newer Node (another allocator set its pod CIDRs
// first) is not retried blindly: the Node is read again, its pod CIDRs
// are taken as used, and the next Node gets a different subnet even
// though the cache still shows the first without any.
func TestAConflictRereadsTheNodeAndNeverHandsItsSubnetOut(t *testing.T) {
	n1 := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", UID: "uid-1", ResourceVersion: "1"}}
	n2 := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n2", UID: "uid-2", ResourceVersion: "1"}}
	client := fake.NewClientset(n1.DeepCopy(), n2.DeepCopy())
	nodesGVR := schema.GroupVersionResource{Version: "v1", Resource: "nodes"}
	var patched []string
	client.PrependReactor("patch", "nodes", func(a k8stesting.Action) (bool, runtime.Object, error) {
		name := a.(k8stesting.PatchAction).GetName()
		patched = append(patched, name)
		if name != "n1" || len(patched) > 1 {
			return false, nil, nil
		}
		// Someone else got there first, with the subnet this leader picks.
		other := n1.DeepCopy()
		other.ResourceVersion = "2"
		other.Spec.PodCIDR, other.Spec.PodCIDRs = "10.244.0.0/24", []string{"10.244.0.0/24"}
		if err := client.Tracker().Update(nodesGVR, other, ""); err != nil {
			t.Fatal(err)
		}
		return true, nil, apierrors.NewConflict(schema.GroupResource{Resource: "nodes"}, name, nil)
	})
	// A cache that never catches up: only the leader's own record helps.
	indexer := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	for _, n := range []*v1.Node{n1, n2} {
		if err := indexer.Add(n); err != nil {
			t.Fatal(err)
		}
	}
	pool, err := NewPool(netip.MustParsePrefix("10.244.0.0/16"), 24)
	if err != nil {
		t.Fatal(err)
	}
	l := newLeader(client, []Pool{pool}, record.NewFakeRecorder(10), klog.Background())
	l.nodes = corelisters.NewNodeLister(indexer)

	for _, name := range []string{"n1", "n2"} {
		if err := l.sync(t.Context(), name); err != nil {
			t.Fatalf("sync %s: %v", name, err)
		}
	}
	if want := []string{"n1", "n2"}; !slices.Equal(patched, want) {
		t.Errorf("patched %v, want %v: n1 once (refused), never again once read back with pod CIDRs", patched, want)
	}
	got, err := client.CoreV1().Nodes().Get(t.Context(), "n2", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got.Spec.PodCIDRs, []string{"10.244.1.0/24"}) {
		t.Errorf("n2 got %v, want 10.244.1.0/24 (10.244.0.0/24 is n1's)", got.Spec.PodCIDRs)
	}
}
