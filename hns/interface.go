package hns

import "context"

// Op names an HNS operation; the simulator counts calls and injects faults
// per Op, and errors carry it.
type Op string

// Operations of Interface.
const (
	OpCreateNetwork         Op = "CreateNetwork"
	OpGetNetworkByID        Op = "GetNetworkByID"
	OpGetNetworkByName      Op = "GetNetworkByName"
	OpListNetworks          Op = "ListNetworks"
	OpDeleteNetwork         Op = "DeleteNetwork"
	OpAddNetworkPolicies    Op = "AddNetworkPolicies"
	OpRemoveNetworkPolicies Op = "RemoveNetworkPolicies"

	OpCreateEndpoint    Op = "CreateEndpoint"
	OpGetEndpointByID   Op = "GetEndpointByID"
	OpGetEndpointByName Op = "GetEndpointByName"
	OpListEndpoints     Op = "ListEndpoints"
	OpDeleteEndpoint    Op = "DeleteEndpoint"

	OpCreateNamespace         Op = "CreateNamespace"
	OpGetNamespace            Op = "GetNamespace"
	OpListNamespaces          Op = "ListNamespaces"
	OpDeleteNamespace         Op = "DeleteNamespace"
	OpAddNamespaceEndpoint    Op = "AddNamespaceEndpoint"
	OpRemoveNamespaceEndpoint Op = "RemoveNamespaceEndpoint"

	OpCreateLoadBalancer Op = "CreateLoadBalancer"
	OpUpdateLoadBalancer Op = "UpdateLoadBalancer"
	OpGetLoadBalancer    Op = "GetLoadBalancer"
	OpListLoadBalancers  Op = "ListLoadBalancers"
	OpDeleteLoadBalancer Op = "DeleteLoadBalancer"

	OpVersion Op = "Version"
)

// writeOps are the operations that change HNS state; "zero writes on a
// correct node" is asserted on these.
var writeOps = map[Op]bool{
	OpCreateNetwork: true, OpDeleteNetwork: true, OpAddNetworkPolicies: true, OpRemoveNetworkPolicies: true,
	OpCreateEndpoint: true, OpDeleteEndpoint: true,
	OpCreateNamespace: true, OpDeleteNamespace: true, OpAddNamespaceEndpoint: true, OpRemoveNamespaceEndpoint: true,
	OpCreateLoadBalancer: true, OpUpdateLoadBalancer: true, OpDeleteLoadBalancer: true,
}

// IsWrite reports whether op changes HNS state.
func (op Op) IsWrite() bool { return writeOps[op] }

// Interface is everything nodenet needs from HNS. Implementations: the hcn
// client (Windows) and Simulator. See the package doc for the shared
// contract (copies, typed errors, concurrency).
type Interface interface {
	// CreateNetwork creates a network. The ID is assigned by HNS; a
	// network of the same name fails with KindAlreadyExists.
	CreateNetwork(ctx context.Context, n *Network) (*Network, error)
	// GetNetworkByID and GetNetworkByName fail with KindNotFound when absent.
	GetNetworkByID(ctx context.Context, id string) (*Network, error)
	GetNetworkByName(ctx context.Context, name string) (*Network, error)
	ListNetworks(ctx context.Context) ([]Network, error)
	// DeleteNetwork fails with KindInUse while endpoints remain on it.
	DeleteNetwork(ctx context.Context, id string) error
	// AddNetworkPolicies appends policies to a network (remote subnet
	// routes as nodes join); RemoveNetworkPolicies removes equal ones.
	AddNetworkPolicies(ctx context.Context, networkID string, policies []NetworkPolicy) error
	RemoveNetworkPolicies(ctx context.Context, networkID string, policies []NetworkPolicy) error

	// CreateEndpoint creates a local endpoint on ep.HostComputeNetwork, or a
	// remote one when ep.Flags has EndpointFlagsRemoteEndpoint.
	CreateEndpoint(ctx context.Context, ep *Endpoint) (*Endpoint, error)
	GetEndpointByID(ctx context.Context, id string) (*Endpoint, error)
	GetEndpointByName(ctx context.Context, name string) (*Endpoint, error)
	// ListEndpoints lists the endpoints of networkID, or of every network
	// when networkID is empty.
	ListEndpoints(ctx context.Context, networkID string) ([]Endpoint, error)
	// DeleteEndpoint deletes even an endpoint a load balancer uses, as
	// HNS does: the load balancer stays, degraded, and loses that traffic.
	DeleteEndpoint(ctx context.Context, id string) error

	CreateNamespace(ctx context.Context, ns *Namespace) (*Namespace, error)
	GetNamespace(ctx context.Context, id string) (*Namespace, error)
	// ListNamespaces lists every namespace of the host, the host's own
	// default one (HostDefaultNamespace picks it) included.
	ListNamespaces(ctx context.Context) ([]Namespace, error)
	// DeleteNamespace detaches any endpoints still attached.
	DeleteNamespace(ctx context.Context, id string) error
	// AddNamespaceEndpoint attaches a local endpoint to a namespace; an
	// endpoint attached elsewhere fails with KindAlreadyExists.
	AddNamespaceEndpoint(ctx context.Context, namespaceID, endpointID string) error
	RemoveNamespaceEndpoint(ctx context.Context, namespaceID, endpointID string) error

	// CreateLoadBalancer programs a load balancer; a frontend (VIP,
	// protocol, external port) already served fails with
	// KindPortAlreadyExists, missing endpoints with KindNotFound, flags the
	// host lacks with KindNotSupported.
	CreateLoadBalancer(ctx context.Context, lb *LoadBalancer) (*LoadBalancer, error)
	// UpdateLoadBalancer replaces load balancer id's definition in place;
	// KindNotSupported unless Features().ModifyLoadbalancer.
	UpdateLoadBalancer(ctx context.Context, id string, lb *LoadBalancer) (*LoadBalancer, error)
	GetLoadBalancer(ctx context.Context, id string) (*LoadBalancer, error)
	ListLoadBalancers(ctx context.Context) ([]LoadBalancer, error)
	DeleteLoadBalancer(ctx context.Context, id string) error

	// Version returns the HNS version; Features derives from it.
	Version(ctx context.Context) (Version, error)
	Features(ctx context.Context) (Features, error)
	// OSBuild returns the Windows build the host runs. It is read from
	// Windows, not from HNS, so it does not fail while HNS restarts;
	// MaxBackendsPerLoadBalancer derives the backend limit from it.
	OSBuild(ctx context.Context) (OSBuild, error)
}
