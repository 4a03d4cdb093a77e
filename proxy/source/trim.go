package source

import (
	"sync"

	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// What the proxy reads of its objects (proxy/brain, proxy/healthcheck and
// this package's filters); the informers' transform keeps only these, so
// the caches — most of the proxy's memory in a large cluster — hold what
// is used and nothing else. A field read anywhere in the proxy must be
// kept here too: TestTrimKeepsWhatTheBrainReads compares the brain's
// output for realistic objects before and after.
//
//   - every object: name, namespace, UID and resource version (change
//     detection, Events), deletion timestamp;
//   - Service: the labels and annotation below, spec type, cluster IPs,
//     ports (name, protocol, port, node port), external IPs, source
//     ranges, session affinity, traffic policies, health-check node
//     port, trafficDistribution; status: load-balancer ingress IP and
//     IP mode;
//   - EndpointSlice: the labels and annotation below, address type, ports
//     (name, protocol, port), per endpoint its addresses, conditions,
//     node name, zone and hints;
//   - Node (only this node's): labels (topology) and spec (taints).
//
// kube-proxy v1.37.1 drops only managedFields
// (cmd/kube-proxy/app/server.go, its trimManagedFields); it reads about the
// same fields.
var (
	serviceLabels      = []string{labelServiceProxyName, labelHeadless}
	serviceAnnotations = []string{annotationPreserveDestination}
	sliceLabels        = []string{discoveryv1.LabelServiceName, labelHeadless}
	sliceAnnotations   = []string{v1.EndpointsLastChangeTriggerTime}
)

// annotationPreserveDestination is the Windows annotation the brain reads
// (proxy/brain: annotationPreserveDestination).
const annotationPreserveDestination = "preserve-destination"

// maxInterned bounds the interner: past it (node churn over a long life)
// it starts afresh; strings already shared stay valid.
const maxInterned = 1 << 16

// trimmer is the informers' transform. It also shares what repeats across
// objects: one copy of each namespace, node name and zone string, and one
// true and one false for the endpoint conditions, instead of a copy per
// endpoint (10k slices × 10 endpoints hold 100k of each). Cached objects
// are read-only for every informer user, so sharing is safe.
type trimmer struct {
	mu      sync.Mutex
	strings map[string]*string
}

func newTrimmer() *trimmer { return &trimmer{strings: map[string]*string{}} }

// Shared condition values; never written through.
var (
	sharedTrue  = new(true)
	sharedFalse = new(false)
)

// transform trims one object as the informers store it; other types pass
// unchanged. It runs on each reflector's goroutine, so the interner locks.
func (t *trimmer) transform(obj any) (any, error) {
	switch o := obj.(type) {
	case *v1.Service:
		t.service(o)
	case *discoveryv1.EndpointSlice:
		t.slice(o)
	case *v1.Node:
		trimMeta(&o.ObjectMeta)
		o.Annotations = nil
		o.Status = v1.NodeStatus{}
	}
	return obj, nil
}

func (t *trimmer) service(s *v1.Service) {
	trimMeta(&s.ObjectMeta)
	s.Labels = keep(s.Labels, serviceLabels)
	s.Annotations = keep(s.Annotations, serviceAnnotations)
	t.mu.Lock()
	s.Namespace = t.intern(s.Namespace)
	t.mu.Unlock()
	spec := &s.Spec
	spec.Selector = nil
	spec.ExternalName = ""
	spec.LoadBalancerIP = ""
	spec.LoadBalancerClass = nil
	spec.IPFamilies = nil
	spec.IPFamilyPolicy = nil
	spec.AllocateLoadBalancerNodePorts = nil
	for i := range spec.Ports {
		spec.Ports[i].TargetPort = intstr.IntOrString{}
		spec.Ports[i].AppProtocol = nil
	}
	for i := range s.Status.LoadBalancer.Ingress {
		ing := &s.Status.LoadBalancer.Ingress[i]
		ing.Hostname, ing.Ports = "", nil
	}
	s.Status.Conditions = nil
}

func (t *trimmer) slice(s *discoveryv1.EndpointSlice) {
	trimMeta(&s.ObjectMeta)
	s.Labels = keep(s.Labels, sliceLabels)
	s.Annotations = keep(s.Annotations, sliceAnnotations)
	for i := range s.Ports {
		s.Ports[i].AppProtocol = nil
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	s.Namespace = t.intern(s.Namespace)
	for i := range s.Endpoints {
		ep := &s.Endpoints[i]
		ep.TargetRef, ep.Hostname, ep.DeprecatedTopology = nil, nil, nil
		c := &ep.Conditions
		c.Ready, c.Serving, c.Terminating = shareBool(c.Ready), shareBool(c.Serving), shareBool(c.Terminating)
		ep.NodeName, ep.Zone = t.internPtr(ep.NodeName), t.internPtr(ep.Zone)
	}
}

// trimMeta keeps the metadata every object needs (identity, resource
// version, deletion) and its labels and annotations, which the caller
// filters: managed fields, owner references, finalizers and the rest go.
func trimMeta(m *metav1.ObjectMeta) {
	*m = metav1.ObjectMeta{
		Name:              m.Name,
		Namespace:         m.Namespace,
		UID:               m.UID,
		ResourceVersion:   m.ResourceVersion,
		Generation:        m.Generation,
		CreationTimestamp: m.CreationTimestamp,
		DeletionTimestamp: m.DeletionTimestamp,
		Labels:            m.Labels,
		Annotations:       m.Annotations,
	}
}

// keep returns the entries of m under keys: nil when there are none, m
// itself when nothing is dropped.
func keep(m map[string]string, keys []string) map[string]string {
	var out map[string]string
	n := 0
	for _, k := range keys {
		if v, ok := m[k]; ok {
			if out == nil {
				out = make(map[string]string, len(keys))
			}
			out[k] = v
			n++
		}
	}
	if n == len(m) && n > 0 {
		return m
	}
	return out
}

func shareBool(b *bool) *bool {
	switch {
	case b == nil:
		return nil
	case *b:
		return sharedTrue
	default:
		return sharedFalse
	}
}

// intern returns the shared copy of s; t.mu is held.
func (t *trimmer) intern(s string) string {
	if s == "" {
		return ""
	}
	return *t.internPtr(&s)
}

// internPtr returns a shared pointer to a string equal to *p; t.mu is
// held.
func (t *trimmer) internPtr(p *string) *string {
	if p == nil {
		return nil
	}
	if q, ok := t.strings[*p]; ok {
		return q
	}
	if len(t.strings) >= maxInterned {
		t.strings = map[string]*string{}
	}
	t.strings[*p] = p
	return p
}
