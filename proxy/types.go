package proxy

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// IPFamily is a service port's address family.
type IPFamily string

// The two IP families.
const (
	IPv4 IPFamily = "IPv4"
	IPv6 IPFamily = "IPv6"
)

// FamilyOf returns the family of addr (IPv4 for 4-in-6 mapped addresses).
func FamilyOf(addr netip.Addr) IPFamily {
	if addr.Unmap().Is4() {
		return IPv4
	}
	return IPv6
}

// Protocol is a service port's L4 protocol.
type Protocol string

// The protocols Services support.
const (
	TCP  Protocol = "TCP"
	UDP  Protocol = "UDP"
	SCTP Protocol = "SCTP"
)

// ServiceType is the Service's spec.type (ExternalName services never reach
// a backend).
type ServiceType string

// The proxied service types.
const (
	ClusterIP    ServiceType = "ClusterIP"
	NodePort     ServiceType = "NodePort"
	LoadBalancer ServiceType = "LoadBalancer"
)

// ServicePortName names one port of one Service, like kube-proxy's
// ServicePortName: the Service plus the port's name ("" for an unnamed
// single port) and protocol.
type ServicePortName struct {
	types.NamespacedName
	Port     string
	Protocol Protocol
}

func (n ServicePortName) String() string {
	if n.Port == "" {
		return fmt.Sprintf("%s/%s:%s", n.Namespace, n.Name, n.Protocol)
	}
	return fmt.Sprintf("%s/%s:%s/%s", n.Namespace, n.Name, n.Port, n.Protocol)
}

// ServicePortKey identifies a ServicePort in a State: dual-stack services
// have one ServicePort per family.
type ServicePortKey struct {
	ServicePortName
	Family IPFamily
}

func (k ServicePortKey) String() string { return k.ServicePortName.String() + "/" + string(k.Family) }

// ServicePort is everything a backend needs to program one port of one
// Service in one IP family on this node. Every address in it is of Family.
// A ServicePort is immutable once in a State: backends may keep pointers
// to it, and the brain replaces rather than edits.
type ServicePort struct {
	Key  ServicePortKey
	Type ServiceType

	// Frontends.
	ClusterIP netip.Addr
	Port      uint16
	// NodePort is 0 when the port has none.
	NodePort uint16
	// ExternalIPs are spec.externalIPs of this family.
	ExternalIPs []netip.Addr
	// LoadBalancerIPs are status.loadBalancer.ingress IPs of this family,
	// without those whose ipMode is Proxy (the load balancer, not this
	// node, handles them).
	LoadBalancerIPs []netip.Addr
	// LoadBalancerSourceRanges are spec.loadBalancerSourceRanges of this
	// family; empty means any source may reach the load-balancer IPs.
	LoadBalancerSourceRanges []netip.Prefix

	// SessionAffinity is ClientIP affinity's timeout; 0 means no affinity.
	SessionAffinity time.Duration
	// HealthCheckNodePort serves this node's local endpoint count for
	// eTP Local LoadBalancer services; 0 when none.
	HealthCheckNodePort uint16
	// PreserveDestination is the Service annotation
	// `preserve-destination: "true"` (the unprefixed key Windows documents
	// and kube-proxy winkernel reads): HNS skips DNAT (needs DSR).
	PreserveDestination bool
	// InternalPolicyLocal and ExternalPolicyLocal are iTP/eTP Local.
	InternalPolicyLocal bool
	ExternalPolicyLocal bool
	// TrafficDistribution is the Service's spec.trafficDistribution ("" when
	// unset), carried for status and dumps: like kube-proxy, the brain
	// narrows endpoints by the hints the EndpointSlice controller derives
	// from it, never by the field itself.
	TrafficDistribution string
	// Topology is how the brain narrowed ClusterEndpoints: "" (every
	// usable endpoint), "PreferSameZone" or "PreferSameNode" (kube-proxy's
	// topology modes; no fallback was needed).
	Topology string

	// Endpoint sets, already filtered by readiness, terminating fallback
	// (KEP-1669), traffic policy, topology and the DSR rules (KEP-5100).
	//
	// ClusterEndpoints is what cluster-wide traffic may use (ignoring
	// local-only policies); LocalEndpoints is what Local policies may use.
	// InternalEndpoints is what traffic to the cluster IP uses
	// (LocalEndpoints when iTP Local, else ClusterEndpoints), and
	// ExternalEndpoints is what traffic to node ports, external IPs and
	// load-balancer IPs uses (LocalEndpoints when eTP Local, else
	// ClusterEndpoints). With eTP Local, traffic from this node's own pods
	// to an external frontend may still use ClusterEndpoints (kube-proxy's
	// short-circuit); backends decide.
	ClusterEndpoints  []Endpoint
	LocalEndpoints    []Endpoint
	InternalEndpoints []Endpoint
	ExternalEndpoints []Endpoint
	// HasEndpoints is true when the service has a usable endpoint anywhere
	// in the cluster, even if none may serve this node's traffic: a
	// frontend with no endpoints then drops instead of rejecting.
	HasEndpoints bool
	// LocalReadyEndpoints counts ready endpoints on this node: the health-
	// check node port's answer.
	LocalReadyEndpoints int
}

// Equal reports whether a and b hold the same values in every field (a
// test keeps it in step with the struct): the brain uses it to tell a
// changed port from a recomputed one, backends to skip unchanged ports.
func (a *ServicePort) Equal(b *ServicePort) bool {
	return a.Key == b.Key &&
		a.Type == b.Type &&
		a.ClusterIP == b.ClusterIP &&
		a.Port == b.Port &&
		a.NodePort == b.NodePort &&
		slices.Equal(a.ExternalIPs, b.ExternalIPs) &&
		slices.Equal(a.LoadBalancerIPs, b.LoadBalancerIPs) &&
		slices.Equal(a.LoadBalancerSourceRanges, b.LoadBalancerSourceRanges) &&
		a.SessionAffinity == b.SessionAffinity &&
		a.HealthCheckNodePort == b.HealthCheckNodePort &&
		a.PreserveDestination == b.PreserveDestination &&
		a.InternalPolicyLocal == b.InternalPolicyLocal &&
		a.ExternalPolicyLocal == b.ExternalPolicyLocal &&
		a.TrafficDistribution == b.TrafficDistribution &&
		a.Topology == b.Topology &&
		slices.Equal(a.ClusterEndpoints, b.ClusterEndpoints) &&
		slices.Equal(a.LocalEndpoints, b.LocalEndpoints) &&
		slices.Equal(a.InternalEndpoints, b.InternalEndpoints) &&
		slices.Equal(a.ExternalEndpoints, b.ExternalEndpoints) &&
		a.HasEndpoints == b.HasEndpoints &&
		a.LocalReadyEndpoints == b.LocalReadyEndpoints
}

// UsesExternalFrontends reports whether the port has any frontend besides
// its cluster IP.
func (sp *ServicePort) UsesExternalFrontends() bool {
	return sp.NodePort != 0 || len(sp.ExternalIPs) > 0 || len(sp.LoadBalancerIPs) > 0
}

// Endpoint is one backend address of a service port, with its target port
// already resolved (named ports resolve per endpoint).
type Endpoint struct {
	IP netip.Addr
	// NodeName is the endpoint's node ("" when the slice doesn't say).
	NodeName string
	// Zone is the endpoint's zone ("" when the slice doesn't say).
	Zone string
	// Port comes after the strings so it packs with the flags: 64 bytes,
	// not 72, times every endpoint of every service held (issue 16).
	Port uint16
	// Local is true when the endpoint is on this node.
	Local bool
	// Ready, Serving and Terminating are the EndpointSlice conditions, with
	// the API defaults applied (nil ready/serving means true).
	Ready, Serving, Terminating bool
}

// AddrPort returns the endpoint's IP and port.
func (e Endpoint) AddrPort() netip.AddrPort { return netip.AddrPortFrom(e.IP, e.Port) }

func (e Endpoint) String() string { return e.AddrPort().String() }

// State is the complete node-local proxy state: every service port this
// node must program. A State is immutable once handed to a backend.
type State struct {
	ServicePorts map[ServicePortKey]*ServicePort
	// NodeName and the node's zone, as the brain saw them.
	NodeName string
	Zone     string
}

// Update is what a Backend gets on each sync.
type Update struct {
	// State is the full node-local state.
	State *State
	// Changed holds the keys of service ports added, changed or removed
	// since the last successful sync (a removed key is absent from State).
	// A backend may program only these, unless Full is set.
	Changed map[ServicePortKey]struct{}
	// Full asks the backend to re-program everything: the first sync, the
	// periodic resync, and every sync after a failed one.
	Full bool
}

// Backend programs the node's dataplane from the brain's state.
type Backend interface {
	// Name names the backend in logs and metrics ("nftables", "hns").
	Name() string
	// Sync makes the dataplane match update.State. It must be idempotent
	// and must leave what it did not get to intact: on error the runner
	// retries with Full set.
	Sync(ctx context.Context, update Update) error
}
