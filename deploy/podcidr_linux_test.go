package deploy_test

import (
	"context"
	"net/netip"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	"github.com/nodenet/nodenet/ipam/nodecidr"
	"github.com/nodenet/nodenet/test/apiserver"
)

// TestThePodCIDRAllocatorRunsWithTheAgentsRightsAlone runs the real
// allocator as the agent's service account (token bound to node-a) on an
// API server that authorizes with RBAC and enforces the node policy, with
// deploy/ applied: the shipped rights are enough to win the Lease, set
// other Nodes' pod CIDRs and report a full cluster CIDR.
func TestThePodCIDRAllocatorRunsWithTheAgentsRightsAlone(t *testing.T) {
	apiserver.RequireBinaries(t, apiserver.Options{})
	srv := apiserver.StartForTest(t, apiserver.Options{KubeAPIServer: withRBAC(t)})
	ctx := t.Context()
	admin := srv.Client()
	applyAll(t, srv, mustRender(t, "."))
	// Nodes first, so the policy is in force once a write is refused.
	for _, name := range []string{"node-a", "node-b", "node-c"} {
		n := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: map[string]string{"node.alpha.kubernetes.io/ttl": "0"}}}
		if _, err := admin.CoreV1().Nodes().Create(ctx, n, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	asAgent := agentClient(t, srv.RESTConfig(), "node-a")
	waitPolicy(t, asAgent)

	// A /23 holds two /24s: node-a and node-b get them, node-c waits.
	alloc, err := nodecidr.New(nodecidr.Options{
		Client: asAgent, ClusterCIDRs: []netip.Prefix{netip.MustParsePrefix("10.244.0.0/23")}, MaskSizeIPv4: 24,
		Namespace: namespace, Identity: "node-a",
		LeaseDuration: 2 * time.Second, RenewDeadline: 1500 * time.Millisecond, RetryPeriod: 100 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- alloc.Run(runCtx) }()
	t.Cleanup(func() { cancel(); <-done })

	err = wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		nodes, err := admin.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		assigned, waiting := 0, 0
		for _, n := range nodes.Items {
			if len(n.Spec.PodCIDRs) > 0 {
				assigned++
			}
			for _, c := range n.Status.Conditions {
				if c.Type == nodecidr.ConditionType && c.Status == v1.ConditionTrue {
					waiting++
				}
			}
		}
		return assigned == 2 && waiting == 1, nil
	})
	if err != nil {
		t.Fatalf("two Nodes assigned and one reported unavailable, as the agent: %v", err)
	}
	lease, err := admin.CoordinationV1().Leases(namespace).Get(ctx, nodecidr.LeaseName, metav1.GetOptions{})
	if err != nil || lease.Spec.HolderIdentity == nil || *lease.Spec.HolderIdentity != "node-a" {
		t.Errorf("Lease %s/%s: %v, %v; want it held by node-a", namespace, nodecidr.LeaseName, lease, err)
	}
}

// waitPolicy waits until the node policy refuses a dry-run label on
// another Node: the API server loads policies asynchronously.
func waitPolicy(t *testing.T, c kubernetes.Interface) {
	t.Helper()
	err := wait.PollUntilContextTimeout(t.Context(), 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		_, err := c.CoreV1().Nodes().Patch(ctx, "node-b", types.MergePatchType, []byte(`{"metadata":{"labels":{"example.com/x":"y"}}}`),
			metav1.PatchOptions{DryRun: []string{metav1.DryRunAll}})
		return apierrors.IsForbidden(err) && strings.Contains(err.Error(), deniedOtherNode), nil
	})
	if err != nil {
		t.Fatalf("the node policy never took effect: %v", err)
	}
}
