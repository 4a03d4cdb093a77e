package cni

import (
	"context"
	"net/netip"
	"slices"

	current "github.com/containernetworking/cni/pkg/types/100"

	"github.com/nodenet/nodenet/config"
)

// NodeNetwork is what the agent knows about this node's network once the
// network exists. The CNI server refuses ADD (code 11, try again later)
// until the agent has handed it one, so a pod is never wired into a network
// that isn't there yet.
type NodeNetwork struct {
	// Mode is overlay or l2bridge.
	Mode config.NetworkMode
	// Name is the Linux bridge's device name, or the HNS network's name.
	Name string
	// ID is the HNS network's ID on Windows; empty on Linux.
	ID string
	// PodCIDRs are this node's pod CIDRs (Node.spec.podCIDRs) of the
	// effective IP families, primary first.
	PodCIDRs []netip.Prefix
	// Gateways are the pods' gateways, one per PodCIDRs entry in the same
	// order (config.GatewayOffset into the CIDR).
	Gateways []netip.Addr
	// SourceVIP is the overlay source VIP (reserved in the IPv4 pod CIDR);
	// the zero Addr in l2bridge mode.
	SourceVIP netip.Addr
	// Reserved are more pod-CIDR addresses the node network uses itself
	// (the Windows l2bridge host endpoint); IPAM never hands them out.
	Reserved []netip.Addr
	// MTU is the pods' interface MTU, VXLAN overhead already subtracted in
	// overlay mode.
	MTU int
	// ClusterCIDRs and ServiceCIDRs are the effective cluster-wide CIDRs.
	ClusterCIDRs []netip.Prefix
	ServiceCIDRs []netip.Prefix
	// NodeIPs are this node's own addresses; NodeSubnets the subnets of the
	// uplink they sit on (traffic to them is not NATed).
	NodeIPs     []netip.Addr
	NodeSubnets []netip.Prefix
	// DNS is the fallback DNS for pods whose runtime sends none.
	DNS DNS
	// EnableDSR is the proxy's DSR setting; pods get loopback DSR with it
	// on Windows.
	EnableDSR bool
}

// DNS is a pod's resolver configuration.
type DNS struct {
	Nameservers []string
	Domain      string
	Search      []string
	Options     []string
}

// IsEmpty reports whether d sets nothing.
func (d DNS) IsEmpty() bool {
	return len(d.Nameservers) == 0 && d.Domain == "" && len(d.Search) == 0 && len(d.Options) == 0
}

// PortMapping is a hostPort from the runtime's portMappings capability.
type PortMapping struct {
	HostPort      int
	ContainerPort int
	// Protocol is "tcp", "udp" or "sctp" (lowercase, as the runtime sends).
	Protocol string
	// HostIP limits the mapping to one node address; empty means all.
	HostIP string
}

// Address is one allocated pod address: the IP with its pod CIDR's prefix
// length, and that CIDR's gateway.
type Address struct {
	IP      netip.Prefix
	Gateway netip.Addr
}

// Attachment names one pod interface: the key of every allocation and of
// every piece of wiring (CNI's container ID + ifname).
type Attachment struct {
	ContainerID string
	IfName      string
}

// Pod is one CNI request's pod, as the wiring needs it.
type Pod struct {
	Attachment
	// Netns is CNI_NETNS: a netns path on Linux, the HCN namespace GUID on
	// Windows. Empty on a DEL after the runtime already dropped it.
	Netns string
	// Namespace, Name and UID come from CNI_ARGS (K8S_POD_*); empty when the
	// runtime doesn't send them.
	Namespace, Name, UID string
	// Addresses are the pod's allocated addresses, primary family first.
	Addresses []Address
	// PortMappings and DNS come from the runtime config capabilities.
	PortMappings []PortMapping
	DNS          DNS
}

// Wiring connects pods to the node network: a veth into the node bridge on
// Linux (cni/vethbridge), an HNS endpoint attached to the pod's namespace
// on Windows (cni/hnsendpoint). The server serializes calls per container
// ID; calls for different containers run concurrently.
type Wiring interface {
	// Ready returns nil when the network nw describes exists on this host,
	// or an error saying what is missing.
	Ready(ctx context.Context, nw *NodeNetwork) error
	// Add wires pod with pod.Addresses and returns the CNI result
	// (interfaces, IPs, routes, DNS). It must be idempotent: an ADD retried
	// for the same attachment returns the same wiring. On failure it undoes
	// what it did.
	Add(ctx context.Context, nw *NodeNetwork, pod *Pod) (*current.Result, error)
	// Check compares the host with what Add made (prev, and pod.Addresses)
	// and returns an error describing any drift.
	Check(ctx context.Context, nw *NodeNetwork, pod *Pod, prev *current.Result) error
	// Del removes the pod's wiring, found by its attachment alone
	// (pod.Addresses is not set: GC has nothing but the attachment). It does
	// nothing if the wiring is absent and must work when pod.Netns is empty
	// or already gone.
	Del(ctx context.Context, nw *NodeNetwork, pod *Pod) error
	// List returns every attachment this wiring has on the host, for GC.
	List(ctx context.Context, nw *NodeNetwork) ([]Attachment, error)
}

// reserved returns every pod-CIDR address IPAM must not hand out besides
// the gateways: the source VIP and Reserved.
func (nw *NodeNetwork) reserved() []netip.Addr {
	out := slices.Clone(nw.Reserved)
	if nw.SourceVIP.IsValid() {
		out = append(out, nw.SourceVIP)
	}
	return out
}
