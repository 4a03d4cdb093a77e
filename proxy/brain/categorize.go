package brain

import (
	v1 "k8s.io/api/core/v1"

	"github.com/nodenet/nodenet/proxy"
)

// categorize fills sp's endpoint sets from the port's endpoints (sorted,
// de-duplicated), following kube-proxy's CategorizeEndpoints:
//
//   - An endpoint is usable when ready; only when no endpoint is ready
//     anywhere do serving-and-terminating endpoints become usable (KEP-1669).
//   - ClusterEndpoints are the usable endpoints, narrowed by topology
//     hints (topologyMode). It is nil when the port never uses cluster-wide
//     endpoints (iTP Local and no external frontend).
//   - LocalEndpoints are this node's ready endpoints, else this node's
//     serving-and-terminating ones; topology never narrows them. It is nil
//     when no Local policy applies to the port.
//   - InternalEndpoints and ExternalEndpoints pick one of the two per
//     policy; ExternalEndpoints is nil without external frontends.
//   - HasEndpoints is true when some endpoint is ready or serving-and-
//     terminating anywhere; LocalReadyEndpoints counts this node's ready
//     endpoints.
func categorize(sp *proxy.ServicePort, eps []endpoint) {
	usesExternal := sp.UsesExternalFrontends()
	// With eTP Local, traffic from this node's pods to an external
	// frontend may still use the cluster endpoints (kube-proxy's
	// short-circuit), so external frontends need them too.
	usesCluster := !sp.InternalPolicyLocal || usesExternal
	usesLocal := sp.InternalPolicyLocal || (sp.ExternalPolicyLocal && usesExternal)

	var anyReady, localReady, localServingTerminating bool
	for i := range eps {
		ep := &eps[i]
		switch {
		case ep.Ready:
			anyReady = true
			sp.HasEndpoints = true
			if ep.Local {
				localReady = true
				sp.LocalReadyEndpoints++
			}
		case ep.Serving && ep.Terminating:
			sp.HasEndpoints = true
			if ep.Local {
				localServingTerminating = true
			}
		}
	}

	if usesCluster {
		if anyReady {
			mode := topologyMode(eps)
			sp.Topology = mode.String()
			sp.ClusterEndpoints = filter(eps, func(ep *endpoint) bool { return ep.Ready && mode.allows(ep) })
		} else {
			sp.ClusterEndpoints = filter(eps, servingTerminating)
		}
	}
	if usesLocal {
		switch {
		case localReady:
			sp.LocalEndpoints = filter(eps, func(ep *endpoint) bool { return ep.Local && ep.Ready })
		case localServingTerminating:
			sp.LocalEndpoints = filter(eps, func(ep *endpoint) bool { return ep.Local && servingTerminating(ep) })
		}
	}

	sp.InternalEndpoints = sp.ClusterEndpoints
	if sp.InternalPolicyLocal {
		sp.InternalEndpoints = sp.LocalEndpoints
	}
	if usesExternal {
		sp.ExternalEndpoints = sp.ClusterEndpoints
		if sp.ExternalPolicyLocal {
			sp.ExternalEndpoints = sp.LocalEndpoints
		}
	}
}

// applyDSR applies KEP-5100's variation of the KEP-1669 checks to a
// LoadBalancer service's port when DSR is on; it runs before categorize.
//
// kube-proxy winkernel asks two questions before programming a service
// port with load-balancer IPs: are all endpoints terminating, and are all
// non-serving. With DSR and eTP Local it counts only this node's
// endpoints (it skips remote ones in both checks); otherwise it counts
// all. When either answer is yes it programs no node-port and no
// external-IP load balancer (nor the health-check forwarder), while the
// load-balancer-IP load balancer stays, with KEP-1669's endpoints.
//
// In ServicePort terms: when either answer is yes, the port's NodePort is
// 0 and its ExternalIPs are empty on this node; LoadBalancerIPs keep
// ExternalEndpoints as categorize computes them (KEP-1669 already decides
// eTP Local's fallback from local endpoints alone, which is what the
// adapted checks do), so a draining node still lets load-balancer traffic
// finish on its terminating endpoints. HealthCheckNodePort and
// LocalReadyEndpoints are unaffected.
//
// Not adopted from winkernel: it also uses the local-only answers to
// filter the cluster-IP endpoints, which on a node without local
// endpoints lets not-ready endpoints into the cluster-IP load balancer;
// the cluster-IP sets here are kube-proxy's.
//
// KEP-5100's text words the first check the other way round ("local
// endpoints will be skipped when determining if all endpoints are
// terminated"); we follow the code. dsrCounts is where that choice lives.
func applyDSR(sp *proxy.ServicePort, eps []endpoint) {
	// winkernel runs the checks only for ports with load-balancer IPs: a
	// LoadBalancer service still waiting for one keeps its node port.
	if len(sp.LoadBalancerIPs) == 0 {
		return
	}
	if allTerminating, allNonServing := dsrCounts(eps, sp.ExternalPolicyLocal); allTerminating || allNonServing {
		sp.NodePort = 0
		sp.ExternalIPs = nil
	}
}

func servingTerminating(ep *endpoint) bool { return ep.Serving && ep.Terminating }

// dsrCounts answers winkernel's two questions for KEP-5100: are all
// counted endpoints terminating (endpoints neither ready nor terminating
// don't count), and are all non-serving. Only local endpoints count when
// eTP is Local.
func dsrCounts(eps []endpoint, localOnly bool) (allTerminating, allNonServing bool) {
	allTerminating, allNonServing = true, true
	for i := range eps {
		ep := &eps[i]
		if localOnly && !ep.Local {
			continue
		}
		if ep.Ready && !ep.Terminating {
			allTerminating = false
		}
		if ep.Serving {
			allNonServing = false
		}
	}
	return allTerminating, allNonServing
}

// topology is the hint mode kube-proxy picks for a port.
type topology int

const (
	topologyNone topology = iota
	topologySameZone
	topologySameNode
)

// String is the mode's name as ServicePort.Topology reports it: the
// Service API's names for the two preferences.
func (t topology) String() string {
	switch t {
	case topologySameZone:
		return v1.ServiceTrafficDistributionPreferSameZone
	case topologySameNode:
		return v1.ServiceTrafficDistributionPreferSameNode
	}
	return ""
}

// topologyMode follows kube-proxy's topologyModeFromHints: node hints win
// when every ready endpoint has one and one names this node; else zone
// hints when every ready endpoint has one and one names this node's zone;
// else none (every ready endpoint). The Service's trafficDistribution
// (PreferClose and PreferSameZone: each endpoint hinted for its own zone;
// PreferSameNode: for its own node and zone) and topology-mode annotation
// reach the proxy only through the hints the EndpointSlice controller
// writes, so hand-made or mirrored slices without hints, or a Service the
// controller has not caught up with, get every endpoint, as in kube-proxy.
func topologyMode(eps []endpoint) topology {
	anyReady := false
	allNode, forNode := true, false
	allZone, forZone := true, false
	for i := range eps {
		ep := &eps[i]
		if !ep.Ready {
			continue
		}
		anyReady = true
		allNode = allNode && ep.nodeHinted
		forNode = forNode || ep.forNode
		allZone = allZone && ep.zoneHinted
		forZone = forZone || ep.forZone
	}
	switch {
	case !anyReady:
		return topologyNone
	case allNode && forNode:
		return topologySameNode
	case allZone && forZone:
		return topologySameZone
	}
	return topologyNone
}

func (t topology) allows(ep *endpoint) bool {
	switch t {
	case topologySameNode:
		return ep.forNode
	case topologySameZone:
		return ep.forZone
	}
	return true
}

// filter returns the endpoints keep accepts, nil when none.
func filter(eps []endpoint, keep func(*endpoint) bool) []proxy.Endpoint {
	n := 0
	for i := range eps {
		if keep(&eps[i]) {
			n++
		}
	}
	if n == 0 {
		return nil
	}
	out := make([]proxy.Endpoint, 0, n)
	for i := range eps {
		if keep(&eps[i]) {
			out = append(out, eps[i].Endpoint)
		}
	}
	return out
}
