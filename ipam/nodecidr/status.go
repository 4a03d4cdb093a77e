package nodecidr

import (
	"context"
	"encoding/json"
	"fmt"
	"net/netip"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
)

// ExhaustedError says a cluster CIDR has no free node subnet left.
type ExhaustedError struct {
	Pool Pool
}

func (e *ExhaustedError) Error() string {
	return fmt.Sprintf("no free /%d left in cluster CIDR %s: all %s are held by Nodes; delete Nodes that are gone or give clusterCIDRs more room",
		e.Pool.Bits(), e.Pool.CIDR(), e.Pool.Size())
}

// pick returns one free subnet per pool, or an *ExhaustedError: a Node
// gets all its families at once (spec.podCIDRs is set only once).
func (l *leader) pick() ([]netip.Prefix, error) {
	used := l.used()
	var out []netip.Prefix
	for _, p := range l.pools {
		next, ok := p.Next(used)
		if !ok {
			return nil, &ExhaustedError{Pool: p}
		}
		out = append(out, next)
	}
	return out, nil
}

// used is every pod CIDR the Nodes hold, plus what this term wrote that
// the informer does not show yet. Entries for Nodes gone are dropped.
func (l *leader) used() []netip.Prefix {
	nodes, _ := l.nodes.List(labels.Everything())
	live := make(map[types.UID]bool, len(nodes))
	var used []netip.Prefix
	for _, n := range nodes {
		live[n.UID] = true
		if len(n.Spec.PodCIDRs) > 0 {
			delete(l.assigned, n.UID)
			used = append(used, parseCIDRs(n.Spec.PodCIDRs, l.log)...)
		}
	}
	for uid, cidrs := range l.assigned {
		if !live[uid] {
			delete(l.assigned, uid)
			continue
		}
		used = append(used, cidrs...)
	}
	return used
}

// parseCIDRs parses a Node's pod CIDRs; the API server validated them, so
// a bad one is only logged.
func parseCIDRs(ss []string, log klog.Logger) []netip.Prefix {
	var out []netip.Prefix
	for _, s := range ss {
		p, err := netip.ParsePrefix(s)
		if err != nil {
			log.Info("Ignoring a pod CIDR that does not parse", "podCIDR", s, "err", err.Error())
			continue
		}
		out = append(out, p.Masked())
	}
	return out
}

// setCondition writes the unavailable condition when it differs from the
// Node's, and records an Event when its status or reason changes. False
// is only written over an existing condition: Nodes that never waited
// don't grow one.
func (l *leader) setCondition(ctx context.Context, node *v1.Node, status v1.ConditionStatus, reason, message string) error {
	cur := condition(node)
	if cur == nil && status == v1.ConditionFalse {
		return nil
	}
	if cur != nil && cur.Status == status && cur.Reason == reason && cur.Message == message {
		return nil
	}
	now := metav1.Now()
	cond := v1.NodeCondition{Type: ConditionType, Status: status, Reason: reason, Message: message,
		LastTransitionTime: now, LastHeartbeatTime: now}
	if cur != nil && cur.Status == status {
		cond.LastTransitionTime = cur.LastTransitionTime
	}
	patch, err := json.Marshal(map[string]any{"status": map[string]any{"conditions": []v1.NodeCondition{cond}}})
	if err != nil {
		return err
	}
	if _, err := l.client.CoreV1().Nodes().Patch(ctx, node.Name, types.StrategicMergePatchType, patch, metav1.PatchOptions{}, "status"); err != nil {
		return ignoreNotFound(fmt.Errorf("set the %s condition: %w", ConditionType, err))
	}
	if cur == nil || cur.Status != status || cur.Reason != reason {
		eventType := v1.EventTypeNormal
		if status == v1.ConditionTrue {
			eventType = v1.EventTypeWarning
			l.log.Info("No pod CIDR for a Node", "node", node.Name, "reason", message)
		}
		// Events about a Node reference it the way the kubelet does.
		l.rec.Event(&v1.ObjectReference{Kind: "Node", Name: node.Name, UID: types.UID(node.Name)}, eventType, reason, message)
	}
	return nil
}
