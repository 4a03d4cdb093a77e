package overlay

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"
)

// EventComponent is the source of the Events nodenet records.
const EventComponent = "nodenet-agent"

// nodeStatus writes what an operator sees on this Node: flannel's
// annotations, the NetworkUnavailable condition and Events. Each is
// written only when it changes, so a steady node makes no API writes.
type nodeStatus struct {
	client   kubernetes.Interface
	recorder record.EventRecorder
	ref      *v1.ObjectReference
	log      klog.Logger

	mu       sync.Mutex
	peers    map[string]string // node → last reported problem
	onceKeys map[string]bool
	// offline is the condition last set without an API server (nil
	// client), which has no Node to keep it on.
	offline *v1.NodeCondition
}

func newNodeStatus(client kubernetes.Interface, rec record.EventRecorder, node string, log klog.Logger) *nodeStatus {
	return &nodeStatus{
		client:   client,
		recorder: rec,
		// Events about a Node reference it the way the kubelet does.
		ref:      &v1.ObjectReference{Kind: "Node", Name: node, UID: types.UID(node)},
		log:      log,
		peers:    map[string]string{},
		onceKeys: map[string]bool{},
	}
}

// newRecorder returns an EventRecorder that writes Events through client
// (to log, with no client), and the function that stops it.
func newRecorder(client kubernetes.Interface, log klog.Logger) (record.EventRecorder, func()) {
	b := record.NewBroadcaster()
	if client == nil {
		b.StartStructuredLogging(0)
	} else {
		b.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: client.CoreV1().Events("")})
	}
	return b.NewRecorder(scheme.Scheme, v1.EventSource{Component: EventComponent}), b.Shutdown
}

// setCondition sets NetworkUnavailable on self when status, reason or
// message differ from what the Node has, and records an Event when the
// status or reason changes.
func (s *nodeStatus) setCondition(ctx context.Context, self *v1.Node, status v1.ConditionStatus, reason, message string) {
	var cur *v1.NodeCondition
	for i := range self.Status.Conditions {
		if self.Status.Conditions[i].Type == v1.NodeNetworkUnavailable {
			cur = &self.Status.Conditions[i]
		}
	}
	if cur != nil && cur.Status == status && cur.Reason == reason && cur.Message == message {
		return
	}
	if s.client == nil {
		// No API server: the Node is a manifest, so the condition lives
		// here, as a log line and an Event to the recorder.
		s.mu.Lock()
		prev := s.offline
		s.offline = &v1.NodeCondition{Type: v1.NodeNetworkUnavailable, Status: status, Reason: reason, Message: message}
		s.mu.Unlock()
		if prev != nil && prev.Status == status && prev.Reason == reason && prev.Message == message {
			return
		}
		s.log.V(1).Info("NetworkUnavailable condition (not written: no API server)", "status", status, "reason", reason, "message", message)
		s.recordCondition(prev, status, reason, message)
		return
	}
	now := metav1.Now()
	cond := v1.NodeCondition{
		Type: v1.NodeNetworkUnavailable, Status: status, Reason: reason, Message: message,
		LastTransitionTime: now, LastHeartbeatTime: now,
	}
	if cur != nil && cur.Status == status {
		cond.LastTransitionTime = cur.LastTransitionTime
	}
	patch, err := json.Marshal(map[string]any{"status": map[string]any{"conditions": []v1.NodeCondition{cond}}})
	if err == nil {
		_, err = s.client.CoreV1().Nodes().Patch(ctx, self.Name, types.StrategicMergePatchType, patch, metav1.PatchOptions{}, "status")
	}
	if err != nil {
		// The condition is a report, not the network: log and go on.
		s.log.Error(err, "Setting the NetworkUnavailable condition", "status", status, "reason", reason)
		return
	}
	s.recordCondition(cur, status, reason, message)
}

// recordCondition records an Event when the condition's status or reason
// changes from cur.
func (s *nodeStatus) recordCondition(cur *v1.NodeCondition, status v1.ConditionStatus, reason, message string) {
	if cur == nil || cur.Status != status || cur.Reason != reason {
		eventType := v1.EventTypeNormal
		if status == v1.ConditionTrue {
			eventType = v1.EventTypeWarning
		}
		s.recorder.Event(s.ref, eventType, reason, message)
	}
}

// ensureAnnotations merges want into self's annotations when any differs.
func (s *nodeStatus) ensureAnnotations(ctx context.Context, self *v1.Node, want map[string]string) error {
	diff := map[string]string{}
	for k, v := range want {
		if have, ok := self.Annotations[k]; !ok || have != v {
			diff[k] = v
		}
	}
	if len(diff) == 0 {
		return nil
	}
	if s.client == nil {
		s.log.V(1).Info("Node annotations (not written: no API server)", "annotations", diff)
		return nil
	}
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": diff}})
	if err != nil {
		return err
	}
	if _, err := s.client.CoreV1().Nodes().Patch(ctx, self.Name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		return fmt.Errorf("publishing this node's flannel annotations: %w", err)
	}
	s.log.Info("Published node annotations", "annotations", diff)
	return nil
}

// peerProblem logs and records (once per distinct message) why a peer
// is not routed to.
func (s *nodeStatus) peerProblem(p *PeerProblem) {
	s.mu.Lock()
	seen := s.peers[p.Node] == p.Message
	s.peers[p.Node] = p.Message
	s.mu.Unlock()
	if seen {
		return
	}
	s.log.Info("Warning: remote node not routed", "peer", p.Node, "reason", p.Reason, "problem", p.Message)
	// Only misconfigurations become Events. A node that is still joining
	// (no pod CIDR, address or annotations yet) is normal, and an Event
	// from every other node about it would be N API writes per join.
	switch p.Reason {
	case PeerMalformedAnnotation, PeerVNIMismatch, PeerBackendMismatch:
		s.recorder.Eventf(s.ref, v1.EventTypeWarning, p.Reason, "node %s: %s", p.Node, p.Message)
	}
}

// peerOK forgets a peer's problem once it is routable again.
func (s *nodeStatus) peerOK(node string) {
	s.mu.Lock()
	delete(s.peers, node)
	s.mu.Unlock()
}

// warn logs a warning about this node and records it as an Event.
func (s *nodeStatus) warn(reason, message string) {
	s.log.Info("Warning: "+message, "reason", reason)
	s.recorder.Event(s.ref, v1.EventTypeWarning, reason, message)
}

// once reports true the first time it sees key: for warnings worth
// logging once per distinct situation, not on every resync.
func (s *nodeStatus) once(key string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.onceKeys[key] {
		return false
	}
	s.onceKeys[key] = true
	return true
}
