package proxy

import (
	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
)

// Handler receives the cluster objects the proxy reads, from informers or
// from a folder of manifests (package source). For each method old is nil
// on add and new is nil on delete. Implementations record the change and
// return at once: the work happens in the next sync.
type Handler interface {
	OnServiceUpdate(old, new *v1.Service)
	OnEndpointSliceUpdate(old, new *discoveryv1.EndpointSlice)
	// OnNodeUpdate is called for this node's Node only (its topology
	// labels decide zone-aware routing).
	OnNodeUpdate(old, new *v1.Node)
	// OnSynced is called once every initial object has been delivered: the
	// proxy must not program a partial view of the cluster before it.
	OnSynced()
}
