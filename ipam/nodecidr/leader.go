package nodecidr

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"strings"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
)

// conflictRetries bounds the re-reads of one Node whose write met a
// newer version; then the Node goes back on the queue.
const conflictRetries = 3

// leader is one term's work: its own Node informer (listed after the
// lease was won, so it sees every earlier leader's writes) and a queue
// of Node names worked one at a time, so two Nodes never race for a
// subnet.
type leader struct {
	client kubernetes.Interface
	pools  []Pool
	rec    record.EventRecorder
	log    klog.Logger
	nodes  corelisters.NodeLister
	queue  workqueue.TypedRateLimitingInterface[string]
	// assigned holds what this term wrote, by Node UID, until the
	// informer shows it: without it a lagging cache would offer the same
	// subnet to the next Node.
	assigned map[types.UID][]netip.Prefix
}

func newLeader(client kubernetes.Interface, pools []Pool, rec record.EventRecorder, log klog.Logger) *leader {
	return &leader{
		client: client, pools: pools, rec: rec, log: log,
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[string](),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: "nodenet-pod-cidr-allocator"}),
		assigned: map[types.UID][]netip.Prefix{},
	}
}

// run watches Nodes and works the queue until ctx ends.
func (l *leader) run(ctx context.Context) {
	defer l.queue.ShutDown()
	factory := informers.NewSharedInformerFactory(l.client, 0)
	defer factory.Shutdown()
	inf := factory.Core().V1().Nodes()
	l.nodes = inf.Lister()
	_, err := inf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { l.enqueue(obj) },
		UpdateFunc: func(_, obj any) { l.enqueue(obj) },
		// A deleted Node's subnets are free again: retry every waiting Node.
		DeleteFunc: func(any) { l.enqueueWaiting() },
	})
	if err != nil {
		l.log.Error(err, "Watching Nodes")
		return
	}
	factory.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), inf.Informer().HasSynced) {
		return
	}
	go func() {
		<-ctx.Done()
		l.queue.ShutDown()
	}()
	for l.next(ctx) {
	}
}

// enqueue queues a Node that needs work: no pod CIDRs yet, or a True
// unavailable condition left to clear.
func (l *leader) enqueue(obj any) {
	n, ok := obj.(*v1.Node)
	if ok && (len(n.Spec.PodCIDRs) == 0 || conditionTrue(n)) {
		l.queue.Add(n.Name)
	}
}

func (l *leader) enqueueWaiting() {
	nodes, _ := l.nodes.List(labels.Everything())
	for _, n := range nodes {
		l.enqueue(n)
	}
}

func conditionTrue(n *v1.Node) bool {
	c := condition(n)
	return c != nil && c.Status == v1.ConditionTrue
}

func condition(n *v1.Node) *v1.NodeCondition {
	for i := range n.Status.Conditions {
		if n.Status.Conditions[i].Type == ConditionType {
			return &n.Status.Conditions[i]
		}
	}
	return nil
}

func (l *leader) next(ctx context.Context) bool {
	name, quit := l.queue.Get()
	if quit {
		return false
	}
	defer l.queue.Done(name)
	if err := l.sync(ctx, name); err != nil && ctx.Err() == nil {
		l.log.Error(err, "Assigning a pod CIDR; will retry", "node", name)
		l.queue.AddRateLimited(name)
		return true
	}
	l.queue.Forget(name)
	return true
}

// sync gives the Node its pod CIDRs if it has none, re-reading it when
// the write meets a newer version.
func (l *leader) sync(ctx context.Context, name string) error {
	node, err := l.nodes.Get(name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	for range conflictRetries {
		if len(node.Spec.PodCIDRs) > 0 {
			l.remember(node)
			return l.setCondition(ctx, node, v1.ConditionFalse, ReasonCIDRAssigned,
				"pod CIDRs "+strings.Join(node.Spec.PodCIDRs, ","))
		}
		cidrs, err := l.pick()
		var full *ExhaustedError
		if errors.As(err, &full) {
			return l.setCondition(ctx, node, v1.ConditionTrue, ReasonCIDRNotAvailable, full.Error())
		}
		if err != nil {
			return err
		}
		updated, err := l.patch(ctx, node, cidrs)
		switch {
		case err == nil:
			l.assigned[updated.UID] = cidrs
			l.log.Info("Assigned pod CIDRs", "node", name, "podCIDRs", cidrs)
			node = updated
		case apierrors.IsNotFound(err):
			return nil
		case apierrors.IsConflict(err):
			if node, err = l.client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{}); err != nil {
				return ignoreNotFound(err)
			}
		default:
			return fmt.Errorf("set spec.podCIDRs to %v: %w", cidrs, err)
		}
	}
	return fmt.Errorf("node %s kept changing while its pod CIDRs were set", name)
}

func ignoreNotFound(err error) error {
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

// patch sets spec.podCIDRs and spec.podCIDR on the version of node read;
// the resourceVersion makes the API server refuse it (409) if the Node
// changed since.
func (l *leader) patch(ctx context.Context, node *v1.Node, cidrs []netip.Prefix) (*v1.Node, error) {
	strs := make([]string, len(cidrs))
	for i, c := range cidrs {
		strs[i] = c.String()
	}
	patch, err := json.Marshal(map[string]any{
		"metadata": map[string]any{"resourceVersion": node.ResourceVersion},
		"spec":     map[string]any{"podCIDR": strs[0], "podCIDRs": strs},
	})
	if err != nil {
		return nil, err
	}
	return l.client.CoreV1().Nodes().Patch(ctx, node.Name, types.MergePatchType, patch, metav1.PatchOptions{})
}

// remember records pod CIDRs a Node holds that the informer may not show
// yet (read fresh after a conflict).
func (l *leader) remember(node *v1.Node) {
	if cached, err := l.nodes.Get(node.Name); err == nil && cached.UID == node.UID && len(cached.Spec.PodCIDRs) > 0 {
		return
	}
	l.assigned[node.UID] = parseCIDRs(node.Spec.PodCIDRs, l.log)
}
