package hns

// This file mirrors the HNS v2 schema (HostComputeNetwork, -Endpoint,
// -LoadBalancer and their settings). JSON names and omitempty behavior match
// hcn's so that translating to and from hcn is a JSON round trip. IP
// addresses and prefixes are strings, as HNS stores them.

// SchemaVersion is the HNS schema version an object was written with.
type SchemaVersion struct {
	Major int `json:",omitempty"`
	Minor int `json:",omitempty"`
}

// V2 is the schema version nodenet writes.
var V2 = SchemaVersion{Major: 2, Minor: 0}

// NetworkType is the HNS network driver.
type NetworkType string

// Network types nodenet knows. Only Overlay and L2Bridge are created by
// nodenet; the others appear on hosts and must be listed without error.
const (
	NetworkTypeNAT         NetworkType = "NAT"
	NetworkTypeTransparent NetworkType = "Transparent"
	NetworkTypeL2Bridge    NetworkType = "L2Bridge"
	NetworkTypeL2Tunnel    NetworkType = "L2Tunnel"
	NetworkTypeICS         NetworkType = "ICS"
	NetworkTypePrivate     NetworkType = "Private"
	NetworkTypeOverlay     NetworkType = "Overlay"
)

// NetworkFlags are HNS network flags.
type NetworkFlags uint32

// Network flags.
const (
	// NetworkFlagsEnableNonPersistent makes the network vanish when the HNS
	// service restarts (what flannel uses on Windows).
	NetworkFlagsEnableNonPersistent NetworkFlags = 8
	NetworkFlagsDisableHostPort     NetworkFlags = 1024
	NetworkFlagsEnableIov           NetworkFlags = 8192
)

// Route is a route of a subnet or an endpoint.
type Route struct {
	NextHop           string `json:",omitempty"`
	DestinationPrefix string `json:",omitempty"`
	Metric            uint16 `json:",omitempty"`
}

// Subnet is an address range of a network's IPAM.
type Subnet struct {
	IpAddressPrefix string         `json:",omitempty"` //nolint:revive // HNS schema name.
	Policies        []SubnetPolicy `json:",omitempty"`
	Routes          []Route        `json:",omitempty"`
	Flags           uint32         `json:",omitempty"`
}

// IPAM is one address-management block of a network.
type IPAM struct {
	Type    string   `json:",omitempty"` // "Static" or "DHCP"
	Subnets []Subnet `json:",omitempty"`
}

// MacRange is a range of MAC addresses.
type MacRange struct {
	StartMacAddress string `json:",omitempty"`
	EndMacAddress   string `json:",omitempty"`
}

// MacPool holds the MAC ranges HNS assigns endpoint MACs from.
type MacPool struct {
	Ranges []MacRange `json:",omitempty"`
}

// DNS is DNS configuration of a network or endpoint.
type DNS struct {
	Domain     string   `json:",omitempty"`
	Search     []string `json:",omitempty"`
	ServerList []string `json:",omitempty"`
	Options    []string `json:",omitempty"`
}

// Network is an HNS HostComputeNetwork.
type Network struct {
	ID            string          `json:"ID,omitempty"`
	Name          string          `json:",omitempty"`
	Type          NetworkType     `json:",omitempty"`
	Policies      []NetworkPolicy `json:",omitempty"`
	MacPool       MacPool         `json:",omitempty"`
	DNS           DNS             `json:"Dns,omitempty"`
	Ipams         []IPAM          `json:",omitempty"`
	Flags         NetworkFlags    `json:",omitempty"`
	SchemaVersion SchemaVersion   `json:",omitempty"`
}

// Subnets returns every subnet of every IPAM block of the network.
func (n *Network) Subnets() []Subnet {
	var out []Subnet
	for _, ipam := range n.Ipams {
		out = append(out, ipam.Subnets...)
	}
	return out
}

// IPConfig is one address of an endpoint.
type IPConfig struct {
	IpAddress    string `json:",omitempty"` //nolint:revive // HNS schema name.
	PrefixLength uint8  `json:",omitempty"`
}

// EndpointFlags are HNS endpoint flags.
type EndpointFlags uint32

// EndpointFlagsRemoteEndpoint marks an endpoint that lives on another host
// (a remote pod or node, used as a load-balancer backend).
const EndpointFlagsRemoteEndpoint EndpointFlags = 1

// Endpoint is an HNS HostComputeEndpoint, local (a pod or host vNIC) or
// remote (flag RemoteEndpoint).
type Endpoint struct {
	ID                   string           `json:"ID,omitempty"`
	Name                 string           `json:",omitempty"`
	HostComputeNetwork   string           `json:",omitempty"` // network ID
	HostComputeNamespace string           `json:",omitempty"` // namespace ID, set by HNS on attach
	Policies             []EndpointPolicy `json:",omitempty"`
	IpConfigurations     []IPConfig       `json:",omitempty"` //nolint:revive // HNS schema name.
	DNS                  DNS              `json:"Dns,omitempty"`
	Routes               []Route          `json:",omitempty"`
	MacAddress           string           `json:",omitempty"`
	Flags                EndpointFlags    `json:",omitempty"`
	SchemaVersion        SchemaVersion    `json:",omitempty"`
}

// IsRemote reports whether the endpoint stands for an address on another host.
func (e *Endpoint) IsRemote() bool { return e.Flags&EndpointFlagsRemoteEndpoint != 0 }

// IPs returns the endpoint's addresses in order.
func (e *Endpoint) IPs() []string {
	out := make([]string, 0, len(e.IpConfigurations))
	for _, c := range e.IpConfigurations {
		out = append(out, c.IpAddress)
	}
	return out
}

// NamespaceType is the kind of an HNS namespace.
type NamespaceType string

// Namespace types.
const (
	NamespaceTypeHost         NamespaceType = "Host"
	NamespaceTypeHostDefault  NamespaceType = "HostDefault"
	NamespaceTypeGuest        NamespaceType = "Guest"
	NamespaceTypeGuestDefault NamespaceType = "GuestDefault"
)

// Namespace is an HNS HostComputeNamespace (a pod's network compartment).
// EndpointIDs lists the endpoints attached to it.
type Namespace struct {
	ID   string
	Type NamespaceType
	// Compartment is the network compartment (hcn's NamespaceId); the
	// host's default compartment is 1.
	Compartment uint32
	EndpointIDs []string
}

// Protocol is an IP protocol number as HNS stores it.
type Protocol uint32

// Protocols.
const (
	ProtocolTCP  Protocol = 6
	ProtocolUDP  Protocol = 17
	ProtocolSCTP Protocol = 132
)

func (p Protocol) String() string {
	switch p {
	case ProtocolTCP:
		return "TCP"
	case ProtocolUDP:
		return "UDP"
	case ProtocolSCTP:
		return "SCTP"
	}
	return "proto-" + itoa(uint64(p))
}

// LoadBalancerFlags are flags of a whole load balancer.
type LoadBalancerFlags uint32

// Load balancer flags.
const (
	// LoadBalancerFlagsDSR enables direct server return: the backend sees the
	// client's address and replies to it directly.
	LoadBalancerFlagsDSR  LoadBalancerFlags = 1
	LoadBalancerFlagsIPv6 LoadBalancerFlags = 2
)

// PortMappingFlags are flags of one load-balancer port mapping.
type PortMappingFlags uint32

// Port mapping flags (hcn defines the first four; kube-proxy defines
// VipExternalIP = 16 itself).
const (
	// PortMappingFlagsILB limits the frontend to traffic from this host's
	// endpoints (internal load balancer).
	PortMappingFlagsILB PortMappingFlags = 1
	// PortMappingFlagsLocalRoutedVIP lets the host itself reach the frontend.
	PortMappingFlagsLocalRoutedVIP PortMappingFlags = 2
	// PortMappingFlagsUseMux makes node-port/ingress traffic DSR through the
	// mux, needed with PreserveDIP.
	PortMappingFlagsUseMux PortMappingFlags = 4
	// PortMappingFlagsPreserveDIP delivers packets with the VIP as
	// destination instead of DNATing to the backend.
	PortMappingFlagsPreserveDIP PortMappingFlags = 8
	// PortMappingFlagsVipExternalIP marks a frontend reachable from outside
	// the node (node ports, external IPs, load-balancer ingress IPs).
	PortMappingFlagsVipExternalIP PortMappingFlags = 16
)

// Distribution selects how a load balancer spreads connections.
type Distribution uint32

// Distribution types.
const (
	DistributionNone             Distribution = 0 // per connection
	DistributionSourceIPProtocol Distribution = 1 // per client IP and protocol
	DistributionSourceIP         Distribution = 2 // per client IP (session affinity ClientIP)
)

// PortMapping is one frontend port of a load balancer.
type PortMapping struct {
	Protocol         Protocol         `json:",omitempty"`
	InternalPort     uint16           `json:",omitempty"`
	ExternalPort     uint16           `json:",omitempty"`
	DistributionType Distribution     `json:",omitempty"`
	Flags            PortMappingFlags `json:",omitempty"`
}

// LoadBalancer is an HNS HostComputeLoadBalancer ("policy list" in HNS v1).
// An empty FrontendVIPs means every address of the host (node ports).
type LoadBalancer struct {
	ID                   string            `json:"ID,omitempty"`
	HostComputeEndpoints []string          `json:",omitempty"` // endpoint IDs
	SourceVIP            string            `json:",omitempty"`
	FrontendVIPs         []string          `json:",omitempty"`
	PortMappings         []PortMapping     `json:",omitempty"`
	SchemaVersion        SchemaVersion     `json:",omitempty"`
	Flags                LoadBalancerFlags `json:",omitempty"`
}
