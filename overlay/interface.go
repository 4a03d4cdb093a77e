package overlay

import (
	"context"
	"net"
	"net/netip"

	"github.com/nodenet/nodenet/config"
)

// Interface is this node's network dataplane. Implementations:
// hnsnet.Network (Windows, on the hns interface) and linuxnet.Network
// (Linux, on netlink).
//
// Every method is idempotent: called again with the same input on a host
// that is already right, it only reads. Calls are serialized by the caller
// (Controller); implementations need not be safe for concurrent use.
type Interface interface {
	// EnsureLocal creates this node's network, or adopts an existing one
	// that matches spec without writing to it, and returns what pods and
	// the proxy need. It re-creates owned parts that disappeared (the
	// source-VIP endpoint, a deleted bridge address).
	//
	// An existing network of spec.Name that differs in something that
	// cannot be changed in place (type, subnet, VNI, port, adapter) is a
	// *MismatchError and nothing is written, unless spec.AllowRecreate,
	// in which case it is deleted and created again. A spec the platform
	// cannot run (an Overlay VNI below 4096 on Windows, an uplink adapter
	// that does not exist) is a *SpecError, also with nothing written.
	EnsureLocal(ctx context.Context, spec LocalSpec) (*LocalNetwork, error)

	// SyncRemotes makes the routes to other nodes' pod subnets exactly
	// remotes: it adds what is missing, replaces what changed (a node's
	// IP or VTEP MAC) and removes what no entry asks for, including
	// leftovers from an earlier run. It must follow a successful
	// EnsureLocal. The cost of a change is proportional to the change,
	// not to the cluster: one node joining is a constant number of writes.
	SyncRemotes(ctx context.Context, remotes []RemoteNode) (SyncResult, error)

	// Check reports whether the network EnsureLocal returned still exists
	// as returned (nil) or what is wrong, with reads only: the cheap probe
	// behind the agent's readiness. Repair is EnsureLocal's job; the
	// Controller runs it on every resync.
	Check(ctx context.Context) error
}

// LocalSpec is everything a dataplane needs to build this node's network.
// Controller fills it from the one config and this node's Node object;
// nothing in it is configured anywhere else.
type LocalSpec struct {
	// Mode is overlay or l2bridge.
	Mode config.NetworkMode
	// Name is the HNS network name (Windows) or the bridge device name
	// (Linux), from network.name.
	Name string
	// PodCIDRs are this node's pod CIDRs (Node.spec.podCIDRs) of the
	// effective IP families, primary first. Overlay: IPv4 only.
	PodCIDRs []netip.Prefix
	// Gateways are the pods' gateways, one per PodCIDRs entry, at
	// config.GatewayOffset.
	Gateways []netip.Addr
	// NodeIP is this node's IPv4 underlay address: the VTEP (Linux) or
	// provider address (Windows) in overlay mode, the next hop other
	// nodes use to reach this node's pods in l2bridge mode.
	NodeIP netip.Addr
	// NodeIPv6 is this node's IPv6 underlay address when it runs IPv6 in
	// l2bridge mode: the next hop of other nodes' routes to its IPv6 pod
	// CIDR. Invalid otherwise.
	NodeIPv6 netip.Addr
	// ExternalInterface is the uplink adapter (network.externalInterface);
	// empty means the one holding NodeIP.
	ExternalInterface string
	// VNI and Port are the VXLAN settings of overlay mode.
	VNI  uint32
	Port uint16
	// MTU is the pods' MTU; 0 derives it from the uplink (minus
	// VXLANOverhead in overlay mode).
	MTU int
	// SourceVIP is the overlay source VIP (Windows creates an endpoint
	// with it); invalid in l2bridge mode. The l2bridge host endpoint on
	// Windows uses the same reserved offset.
	SourceVIP netip.Addr
	// AllowRecreate lets EnsureLocal replace a mismatching network.
	AllowRecreate bool
}

// VXLANOverhead is the outer IPv4 + UDP + VXLAN + inner Ethernet header
// size that overlay mode takes from the uplink MTU (flannel's 50 bytes).
const VXLANOverhead = 50

// LocalNetwork is the network EnsureLocal made or adopted: the facts the
// CNI server and the proxy take over in memory.
type LocalNetwork struct {
	Mode config.NetworkMode
	// Name is the HNS network name or Linux bridge name; ID the HNS
	// network ID (empty on Linux).
	Name string
	ID   string
	// PodCIDRs and Gateways as in LocalSpec.
	PodCIDRs []netip.Prefix
	Gateways []netip.Addr
	// SourceVIP is the address of the source-VIP endpoint (Windows
	// overlay), the proxy's SNAT address for service traffic; invalid
	// where the dataplane has none.
	SourceVIP netip.Addr
	// SourceVIPEndpointID is the HNS endpoint that holds SourceVIP.
	SourceVIPEndpointID string
	// Reserved are pod-CIDR addresses the dataplane uses itself (source
	// VIP, the l2bridge host endpoint); IPAM must never hand them out.
	Reserved []netip.Addr
	// MTU is the pods' MTU.
	MTU int
	// VtepMAC is this node's VTEP MAC in overlay mode, published in
	// flannel's backend-data annotation.
	VtepMAC net.HardwareAddr
	// NodeIP is the underlay address, published as flannel's public-ip;
	// NodeIPv6 the IPv6 one (public-ipv6), when the node has one.
	NodeIP   netip.Addr
	NodeIPv6 netip.Addr
	// Uplink is the adapter NodeIP sits on; NodeSubnets its subnets.
	Uplink      string
	NodeSubnets []netip.Prefix
	// Writes is how many dataplane writes this call made (0 when an
	// existing network was adopted as is).
	Writes int
}

// RemoteNode is another node as the mesh needs it, read from its Node
// object (see RemoteFromNode).
type RemoteNode struct {
	// Name is the Node's name.
	Name string
	// PodCIDRs are its pod CIDRs of this node's effective families.
	PodCIDRs []netip.Prefix
	// NodeIP is its underlay address: flannel's public-ip annotation
	// (public-ip-overwrite first), else its InternalIP.
	NodeIP netip.Addr
	// NodeIPv6 is its IPv6 underlay address (flannel's public-ipv6, else
	// an IPv6 InternalIP), the next hop to its IPv6 pod CIDR in l2bridge
	// mode; invalid when it has none.
	NodeIPv6 netip.Addr
	// VtepMAC is its VTEP MAC from flannel's backend-data (overlay mode;
	// a node without one cannot be reached through the overlay yet).
	VtepMAC net.HardwareAddr
}

// SyncResult says what SyncRemotes did.
type SyncResult struct {
	// Added, Updated and Removed count remote nodes.
	Added, Updated, Removed int
	// Writes is the number of dataplane writes (HNS calls, netlink
	// messages) it took.
	Writes int
}
