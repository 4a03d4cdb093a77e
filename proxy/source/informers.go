package source

import (
	"context"
	"errors"
	"fmt"
	"time"

	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"github.com/nodenet/nodenet/proxy"
)

// InformerOptions configure a source reading the cluster.
type InformerOptions struct {
	Client kubernetes.Interface
	// NodeName is this node: only its Node is watched.
	NodeName string
	// ResyncPeriod redelivers every object as an update this often (0:
	// never), like kube-proxy's configSyncPeriod.
	ResyncPeriod time.Duration
	Logger       klog.Logger
}

// NewInformers returns a source that watches Services, EndpointSlices
// (discovery/v1) and this node's Node with informers. When the API server
// is unreachable the informers keep their last state: nothing is deleted
// until the server says so.
func NewInformers(opts InformerOptions) Interface {
	if opts.Logger.GetSink() == nil {
		opts.Logger = klog.Background()
	}
	return &informerSource{opts: opts, log: opts.Logger.WithName("source")}
}

type informerSource struct {
	opts InformerOptions
	log  klog.Logger
}

func (s *informerSource) Run(ctx context.Context, h proxy.Handler) error {
	switch {
	case s.opts.Client == nil:
		return errors.New("informer source: no client")
	case s.opts.NodeName == "":
		return errors.New("informer source: no node name")
	}
	ctx, cancel := context.WithCancel(ctx)
	serial := &serialHandler{h: h}

	svcSelector, sliceSelector, err := selectors()
	if err != nil {
		cancel()
		return err
	}
	nodeSelector := fields.OneTermEqualSelector(metav1.ObjectNameField, s.opts.NodeName).String()
	// One trimmer for all three informers, so they share its strings.
	trim := newTrimmer()
	factory := func(tweak func(*metav1.ListOptions)) informers.SharedInformerFactory {
		return informers.NewSharedInformerFactoryWithOptions(s.opts.Client, s.opts.ResyncPeriod,
			informers.WithTransform(trim.transform),
			informers.WithTweakListOptions(tweak))
	}
	factories := []informers.SharedInformerFactory{
		factory(func(o *metav1.ListOptions) {
			o.LabelSelector = svcSelector
			o.FieldSelector = fields.OneTermNotEqualSelector("spec.clusterIP", v1.ClusterIPNone).String()
		}),
		factory(func(o *metav1.ListOptions) { o.LabelSelector = sliceSelector }),
		factory(func(o *metav1.ListOptions) { o.FieldSelector = nodeSelector }),
	}
	// Cancel first, then wait for the informers: no call to h after Run.
	defer func() {
		cancel()
		for _, f := range factories {
			f.Shutdown()
		}
	}()

	handlers := []struct {
		informer cache.SharedIndexInformer
		handler  cache.ResourceEventHandler
	}{
		{factories[0].Core().V1().Services().Informer(), serviceHandler(serial)},
		{factories[1].Discovery().V1().EndpointSlices().Informer(), sliceHandler(serial)},
		{factories[2].Core().V1().Nodes().Informer(), nodeHandler(serial, s.opts.NodeName)},
	}
	var synced []cache.DoneChecker
	for _, hh := range handlers {
		reg, err := hh.informer.AddEventHandlerWithOptions(hh.handler, cache.HandlerOptions{Logger: &s.log})
		if err != nil {
			return fmt.Errorf("informer source: %w", err)
		}
		synced = append(synced, reg.HasSyncedChecker())
	}
	for _, f := range factories {
		f.StartWithContext(ctx)
	}
	s.log.Info("Waiting for Services, EndpointSlices and this node's Node", "node", s.opts.NodeName)
	if !cache.WaitFor(ctx, "", synced...) {
		return nil // ctx done
	}
	s.log.Info("Initial objects delivered")
	serial.OnSynced()
	<-ctx.Done()
	return nil
}

// selectors returns kube-proxy's label selectors for Services and
// EndpointSlices.
func selectors() (svc, slice string, err error) {
	noProxyName, err := labels.NewRequirement(labelServiceProxyName, selection.DoesNotExist, nil)
	if err != nil {
		return "", "", fmt.Errorf("informer source: %w", err)
	}
	noHeadless, err := labels.NewRequirement(labelHeadless, selection.DoesNotExist, nil)
	if err != nil {
		return "", "", fmt.Errorf("informer source: %w", err)
	}
	return labels.NewSelector().Add(*noProxyName).String(), labels.NewSelector().Add(*noHeadless).String(), nil
}

// The handlers turn informer callbacks into Handler calls. An object that
// fails the filter counts as absent, so an update that makes an object
// match (or stop matching) is an add (or a delete), as a server-side
// selector would make it.

func serviceHandler(h proxy.Handler) cache.ResourceEventHandler {
	filter := func(obj any) *v1.Service {
		if svc, ok := unwrap(obj).(*v1.Service); ok && wantService(svc) {
			return svc
		}
		return nil
	}
	return updates(filter, h.OnServiceUpdate)
}

func sliceHandler(h proxy.Handler) cache.ResourceEventHandler {
	filter := func(obj any) *discoveryv1.EndpointSlice {
		if slice, ok := unwrap(obj).(*discoveryv1.EndpointSlice); ok && wantSlice(slice) {
			return slice
		}
		return nil
	}
	return updates(filter, h.OnEndpointSliceUpdate)
}

func nodeHandler(h proxy.Handler, nodeName string) cache.ResourceEventHandler {
	filter := func(obj any) *v1.Node {
		if node, ok := unwrap(obj).(*v1.Node); ok && node.Name == nodeName {
			return node
		}
		return nil
	}
	return updates(filter, h.OnNodeUpdate)
}

// updates adapts one object type's callbacks to an old/new update func.
func updates[T any](filter func(any) *T, update func(old, new *T)) cache.ResourceEventHandler {
	return cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			if o := filter(obj); o != nil {
				update(nil, o)
			}
		},
		UpdateFunc: func(oldObj, newObj any) {
			if old, o := filter(oldObj), filter(newObj); old != nil || o != nil {
				update(old, o)
			}
		},
		DeleteFunc: func(obj any) {
			if o := filter(obj); o != nil {
				update(o, nil)
			}
		},
	}
}

// unwrap returns the last known state of a deleted object whose delete
// event was missed (a tombstone).
func unwrap(obj any) any {
	if tombstone, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		return tombstone.Obj
	}
	return obj
}
