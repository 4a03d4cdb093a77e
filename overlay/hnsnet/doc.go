// Package hnsnet is the Windows node network on HNS: it implements
// overlay.Interface with hns.Interface only, so it compiles on every OS
// and is tested against hns.Simulator.
//
// # Overlay mode
//
// Network: type Overlay, named spec.Name, flag EnableNonPersistent, one
// Static IPAM subnet = the IPv4 pod CIDR with a VSID subnet policy = VNI
// and a default route via the gateway; a NetAdapterName policy for the
// uplink; a VxlanPort policy only when the port is not 4789 (a host
// without Features.VxlanPort is a SpecError for network.vxlan.port). VNIs
// below 4096 (and above 65535, the width of a RemoteSubnetRoute's
// IsolationId) are SpecErrors before anything is written.
//
// VtepMAC: the network's DrMacAddress policy, the distributed-router MAC
// HNS assigns to an overlay network and answers VXLAN on. That is what
// flannel's Windows vxlan backend publishes as VtepMAC, so flannel Linux
// nodes put it in their FDB and neighbour entries. It lives as long as the
// network: a restart adopts the network and so the same MAC.
//
// Source VIP: a local endpoint named SourceVIPEndpointName(network)
// ("<network>_sourcevip") with spec.SourceVIP (prefix length of the pod
// CIDR) and the uplink's MAC, no policies: what kube-proxy winkernel's
// newSourceVIP creates (a local endpoint, MAC = host MAC; its
// ProviderAddress is used for remote endpoints only). An endpoint of that
// name with another address is ours and is replaced; an unnamed
// endpoint outside any namespace already holding the address is
// kube-proxy's and is adopted.
//
// Remote nodes: one RemoteSubnetRoute network policy each
// (DestinationPrefix = its IPv4 pod CIDR, IsolationId = VNI,
// ProviderAddress = its node IP, DistributedRouterMacAddress = its VTEP
// MAC, dash form). Every RemoteSubnetRoute on our network is ours.
// SyncRemotes reads the network once and batches removals into one
// RemoveNetworkPolicies and additions into one AddNetworkPolicies: a join
// or a leave is 1 write, an IP or MAC change 2, a first build 1.
//
// # L2Bridge mode
//
// Network: type L2Bridge with every pod CIDR (gateway default route each)
// and NetAdapterName. The host endpoint, HostEndpointName(network)
// ("<network>_ep", flannel host-gw's name), takes the address at
// config.SourceVIPOffset and is attached to the host: flannel does it with
// HNS v1's HostAttach(1) (compartment 1); hns.Interface expresses it in
// the v2 way, as membership of the host's existing default namespace
// (ListNamespaces + hns.HostDefaultNamespace, then AddNamespaceEndpoint;
// one is created only on a host that lists none; an endpoint whose
// HostComputeNamespace is set is attached and left alone). IPv4
// forwarding is turned on for the host vNIC (and the host endpoint's own
// interface when listed) through Options.Forwarding, as flannel host-gw
// does: without it the node cannot reach its pods. Remote nodes
// get host routes (package hostroute), not HNS policies: pod CIDR via the
// node IP on the interface holding this node's IP. A route is ours when
// it is IPv4, on that interface and has metric RouteMetric; only ours are
// deleted.
//
// # Readiness
//
// HNS answers CreateNetwork before the network is usable. Like flannel's
// Windows backends, EnsureLocal then waits (Options.ReadyTimeout, polling
// every Options.ReadyPollInterval) for an Overlay network's provider
// address (its ProviderAddress policy, the management IP) and, in both
// modes, for the host interface holding the management IP (else the
// node IP); when the wait runs out it returns a *NotReadyError and the
// controller retries.
//
// # Adoption
//
// An existing network of spec.Name is compared field by field (type,
// subnet, VNI, VXLAN port, adapter); equal means adopted with zero writes.
// A difference is a *overlay.MismatchError and no write, unless
// spec.AllowRecreate: then it is deleted and created again, but only when
// no endpoint but our own is on it; with pod (or remote) endpoints on it
// the error wraps the mismatch and says so.
//
// # Adapters
//
// The uplink is spec.ExternalInterface, else the adapter holding
// spec.NodeIP. Once an HNS network holds an adapter, Windows moves its
// address to the host vNIC "vEthernet (<adapter>)"; NetAdapterName must
// name the physical adapter, so that name maps back.
package hnsnet
