package agent

import (
	"context"
	"fmt"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"

	"github.com/nodenet/nodenet/overlay"
)

// ConfigError is New's error for a config the agent refuses to run
// (configHardFail): its message names every field.
type ConfigError struct {
	File   string
	Config *LoadedConfig
}

func (e *ConfigError) Error() string { return fmt.Sprintf("%s: %v", e.File, e.Config.Err()) }

// Unwrap returns the *config.InvalidError.
func (e *ConfigError) Unwrap() error { return e.Config.Err() }

// maxEventMessage is the API server's limit on an Event message.
const maxEventMessage = 1024

// RecordConfigError records e as a Warning Event on this Node, so an
// operator sees why the agent won't start without reading its log. It is
// best effort, bounded by timeout: a missing kubeconfig or an unreachable
// API server only costs the Event. o are the Options given to New; an
// offline agent (Options.Offline) records nothing.
func RecordConfigError(e *ConfigError, o Options, timeout time.Duration) error {
	if o.Offline() {
		return nil // no API server to record it on; the error is on stderr
	}
	node := e.Config.Config.NodeName
	if node == "" {
		return fmt.Errorf("no node name to record the config error on")
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	rc, err := restConfig(ctx, o, e.Config.Config.ServiceCIDRs, klog.Background())
	if err != nil {
		return err
	}
	client, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return fmt.Errorf("API client: %w", err)
	}
	msg := "nodenet-agent refuses to start (configHardFail): " + e.Error()
	if len(msg) > maxEventMessage {
		msg = msg[:maxEventMessage-3] + "..."
	}
	now := metav1.Now()
	// Events about a Node live in "default", as kubelet's do.
	_, err = client.CoreV1().Events(metav1.NamespaceDefault).Create(ctx, &v1.Event{
		ObjectMeta:     metav1.ObjectMeta{GenerateName: node + ".", Namespace: metav1.NamespaceDefault},
		InvolvedObject: v1.ObjectReference{Kind: "Node", Name: node, UID: nodeUID(node)},
		Reason:         ReasonInvalidConfig,
		Message:        msg,
		Type:           v1.EventTypeWarning,
		Source:         v1.EventSource{Component: overlay.EventComponent, Host: node},
		FirstTimestamp: now,
		LastTimestamp:  now,
		Count:          1,
	}, metav1.CreateOptions{})
	return err
}
