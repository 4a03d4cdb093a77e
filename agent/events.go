package agent

import (
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/record"

	"github.com/nodenet/nodenet/overlay"
)

// ReasonInvalidConfig is the Node Event reason for config problems the
// agent ran with anyway (configHardFail: false).
const ReasonInvalidConfig = "InvalidConfig"

// events is the agent's one Event recorder: the network controller (Node
// condition changes, peer problems), the brain (bad Services) and the HNS
// backend (features it skipped) all record through it.
type events struct {
	recorder record.EventRecorder
	shutdown func()
	node     *v1.ObjectReference
}

// newEvents records through client, or, with none (offline), to the log.
func newEvents(client kubernetes.Interface, nodeName string) *events {
	b := record.NewBroadcaster()
	if client == nil {
		b.StartStructuredLogging(0)
	} else {
		b.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: client.CoreV1().Events("")})
	}
	return &events{
		recorder: b.NewRecorder(scheme.Scheme, v1.EventSource{Component: overlay.EventComponent, Host: nodeName}),
		shutdown: b.Shutdown,
		node:     &v1.ObjectReference{Kind: "Node", Name: nodeName, UID: nodeUID(nodeName)},
	}
}

// nodeUID is the UID kubelet gives a Node in Event references: its name.
func nodeUID(name string) types.UID { return types.UID(name) }

// configProblems records each config error the agent runs with as a
// Warning Event on this Node.
func (e *events) configProblems(l *LoadedConfig) {
	for _, fe := range l.Errors {
		e.recorder.Eventf(e.node, v1.EventTypeWarning, ReasonInvalidConfig, "config: %s (running anyway: configHardFail is false)", fe.Error())
	}
}
