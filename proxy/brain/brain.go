// Package brain is the proxy's node-local brain: it implements
// proxy.Handler, keeps the Services, EndpointSlices and this node's Node it
// is given, and turns them into a proxy.State on demand (Snapshot). Every
// readiness, terminating (KEP-1669), traffic-policy, topology and DSR
// (KEP-5100) rule lives here, so the backends only program what they get.
//
// Snapshots are incremental: the brain remembers which services an event
// touched and recomputes only those, keeping every other service's
// ServicePorts (same pointers) from the previous snapshot.
package brain

import (
	"slices"
	"strings"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"

	"github.com/nodenet/nodenet/proxy"
)

// Labels and annotations the brain reads besides the API's own constants.
const (
	// labelServiceProxyName marks a service another proxy implements
	// (kube-proxy skips these too).
	labelServiceProxyName = "service.kubernetes.io/service-proxy-name"
	// annotationPreserveDestination is the Windows annotation that skips
	// DNAT; Windows' documentation and kube-proxy winkernel use exactly
	// this unprefixed key.
	annotationPreserveDestination = "preserve-destination"
)

// Options configure a Brain.
type Options struct {
	// NodeName is this node's Node name: endpoints on it are local.
	NodeName string
	// Families this node runs, primary first (config's
	// EffectiveIPFamilies). Service ports of other families are dropped.
	// Empty means every family.
	Families []proxy.IPFamily
	// DSR is the config's proxy.enableDSR: it applies KEP-5100's endpoint
	// rules to LoadBalancer services (see applyDSR).
	DSR bool
	// Recorder gets a Warning event on a Service or EndpointSlice with bad
	// input, once per object generation; may be nil.
	Recorder record.EventRecorder
	Logger   klog.Logger
	// OnChange is called, without locks held, after each recorded change
	// so the caller can request a sync; may be nil.
	OnChange func()
}

// Brain implements proxy.Handler and computes proxy.States. Its handler
// methods are safe for concurrent use with each other and with Snapshot.
type Brain struct {
	opts  Options
	log   klog.Logger
	start time.Time

	// mu guards what the handlers write.
	mu       sync.Mutex
	services map[types.NamespacedName]*v1.Service
	// slices indexes EndpointSlices by their service, each service's
	// sorted by name: most services have one or two, for which a sorted
	// slice costs a fraction of a map (10k services hold 10k of these).
	slices map[types.NamespacedName][]*discoveryv1.EndpointSlice
	// sliceOwner maps a slice (namespace/name) to the service it was filed
	// under, so a slice whose service label changes leaves its old service.
	sliceOwner map[types.NamespacedName]types.NamespacedName
	zone       string
	synced     bool
	// What changed since the last Snapshot.
	dirty        map[types.NamespacedName]struct{}
	svcPending   map[types.NamespacedName]struct{}
	epPending    int
	triggerTimes []time.Time
	topoChanged  bool
	// unowned are slices without a service label, to report at the next
	// Snapshot; forget are report keys of deleted objects.
	unowned []*discoveryv1.EndpointSlice
	forget  []string

	// snapMu serializes Snapshots and guards what only they touch.
	snapMu sync.Mutex
	// computed holds each service's ServicePorts from the last Snapshot.
	computed map[types.NamespacedName][]*proxy.ServicePort
	state    map[proxy.ServicePortKey]*proxy.ServicePort
	// reported remembers what was last reported per object (resource
	// version and reasons), so each generation warns once.
	reported map[string]string
}

var _ proxy.Handler = (*Brain)(nil)

// New returns an empty Brain.
func New(opts Options) *Brain {
	opts.Families = slices.Clone(opts.Families)
	if len(opts.Families) == 0 {
		opts.Families = []proxy.IPFamily{proxy.IPv4, proxy.IPv6}
	}
	return &Brain{
		opts:       opts,
		log:        opts.Logger,
		start:      time.Now(),
		services:   map[types.NamespacedName]*v1.Service{},
		slices:     map[types.NamespacedName][]*discoveryv1.EndpointSlice{},
		sliceOwner: map[types.NamespacedName]types.NamespacedName{},
		dirty:      map[types.NamespacedName]struct{}{},
		svcPending: map[types.NamespacedName]struct{}{},
		computed:   map[types.NamespacedName][]*proxy.ServicePort{},
		reported:   map[string]string{},
	}
}

// sameGeneration reports an informer resync: the same object again.
func sameGeneration(oldRV, newRV string) bool {
	return oldRV != "" && oldRV == newRV
}

func (b *Brain) changed() {
	if b.opts.OnChange != nil {
		b.opts.OnChange()
	}
}

// OnServiceUpdate records a Service add, update or delete.
func (b *Brain) OnServiceUpdate(old, new *v1.Service) {
	if b.recordService(old, new) {
		b.changed()
	}
}

func (b *Brain) recordService(old, new *v1.Service) bool {
	obj := new
	if obj == nil {
		obj = old
	}
	if obj == nil || (old != nil && new != nil && sameGeneration(old.ResourceVersion, new.ResourceVersion)) {
		return false
	}
	name := types.NamespacedName{Namespace: obj.Namespace, Name: obj.Name}
	b.mu.Lock()
	defer b.mu.Unlock()
	if new == nil {
		if _, ok := b.services[name]; !ok {
			return false
		}
		delete(b.services, name)
		b.forget = append(b.forget, reportKey(kindService, old), familyKey(old))
	} else {
		b.services[name] = new
	}
	b.dirty[name] = struct{}{}
	b.svcPending[name] = struct{}{}
	return true
}

// OnEndpointSliceUpdate records an EndpointSlice add, update or delete.
// Slices of headless services, FQDN slices and slices without a service
// label are not proxied.
func (b *Brain) OnEndpointSliceUpdate(old, new *discoveryv1.EndpointSlice) {
	if b.recordSlice(old, new) {
		b.changed()
	}
}

func (b *Brain) recordSlice(old, new *discoveryv1.EndpointSlice) bool {
	obj := new
	if obj == nil {
		obj = old
	}
	if obj == nil || (old != nil && new != nil && sameGeneration(old.ResourceVersion, new.ResourceVersion)) {
		return false
	}
	key := types.NamespacedName{Namespace: obj.Namespace, Name: obj.Name}
	svcName, ok := types.NamespacedName{}, false
	if new != nil {
		svcName, ok = sliceService(new)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	owner, owned := b.sliceOwner[key]
	if owned && (!ok || owner != svcName) {
		b.dropSlice(key, owner)
	}
	if new == nil {
		b.forget = append(b.forget, reportKey(kindSlice, old))
	} else if new.Labels[discoveryv1.LabelServiceName] == "" && !headlessSlice(new) {
		b.unowned = append(b.unowned, new)
	}
	if !ok {
		return owned
	}
	list := b.slices[svcName]
	if i, found := sliceIndex(list, key.Name); found {
		list[i] = new
	} else {
		b.slices[svcName] = slices.Insert(list, i, new)
	}
	b.sliceOwner[key] = svcName
	b.dirty[svcName] = struct{}{}
	b.epPending++
	if t, ok := triggerTime(new); ok && t.After(b.start) {
		b.triggerTimes = append(b.triggerTimes, t)
	}
	return true
}

// dropSlice removes a slice from its service's index; b.mu is held.
func (b *Brain) dropSlice(key, owner types.NamespacedName) {
	delete(b.sliceOwner, key)
	list := b.slices[owner]
	if i, found := sliceIndex(list, key.Name); found {
		list = slices.Delete(list, i, i+1)
		if len(list) == 0 {
			delete(b.slices, owner)
		} else {
			b.slices[owner] = list
		}
	}
	b.dirty[owner] = struct{}{}
	b.epPending++
}

// sliceIndex finds the slice called name in list, sorted by name.
func sliceIndex(list []*discoveryv1.EndpointSlice, name string) (int, bool) {
	return slices.BinarySearchFunc(list, name, func(s *discoveryv1.EndpointSlice, name string) int {
		return strings.Compare(s.Name, name)
	})
}

// sliceService returns the service a slice belongs to, or false when the
// proxy must ignore the slice.
func sliceService(s *discoveryv1.EndpointSlice) (types.NamespacedName, bool) {
	name := s.Labels[discoveryv1.LabelServiceName]
	if name == "" || headlessSlice(s) {
		return types.NamespacedName{}, false
	}
	if s.AddressType != discoveryv1.AddressTypeIPv4 && s.AddressType != discoveryv1.AddressTypeIPv6 {
		return types.NamespacedName{}, false
	}
	return types.NamespacedName{Namespace: s.Namespace, Name: name}, true
}

func headlessSlice(s *discoveryv1.EndpointSlice) bool {
	_, ok := s.Labels[v1.IsHeadlessService]
	return ok
}

// triggerTime returns the slice's last-change-trigger-time annotation.
func triggerTime(s *discoveryv1.EndpointSlice) (time.Time, bool) {
	v, ok := s.Annotations[v1.EndpointsLastChangeTriggerTime]
	if !ok {
		return time.Time{}, false
	}
	t, err := time.Parse(time.RFC3339Nano, v)
	return t, err == nil
}

// OnNodeUpdate records this node's topology labels; a zone change makes
// the next Snapshot recompute every service. Other nodes are ignored.
func (b *Brain) OnNodeUpdate(old, new *v1.Node) {
	zone := ""
	if new != nil {
		if b.opts.NodeName != "" && new.Name != b.opts.NodeName {
			return
		}
		zone = new.Labels[v1.LabelTopologyZone]
	} else if old == nil || (b.opts.NodeName != "" && old.Name != b.opts.NodeName) {
		return
	}
	b.mu.Lock()
	changed := zone != b.zone
	if changed {
		b.zone = zone
		b.topoChanged = true
	}
	b.mu.Unlock()
	if changed {
		b.changed()
	}
}

// OnSynced records that every initial object was delivered.
func (b *Brain) OnSynced() {
	b.mu.Lock()
	b.synced = true
	b.mu.Unlock()
	b.changed()
}

// Synced reports whether OnSynced was called.
func (b *Brain) Synced() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.synced
}

// Pending returns the changes recorded since the last Snapshot: services
// whose Service changed, and EndpointSlice changes (the
// sync_proxy_rules_{service,endpoint}_changes_pending gauges).
func (b *Brain) Pending() (services, endpoints int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.svcPending), b.epPending
}
