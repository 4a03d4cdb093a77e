package hnsnet

import (
	"fmt"
	"net/netip"
	"strings"

	"github.com/nodenet/nodenet/config"
	"github.com/nodenet/nodenet/hns"
	"github.com/nodenet/nodenet/internal/netaddr"
	"github.com/nodenet/nodenet/overlay"
)

// DefaultVXLANPort is the port HNS uses without a VxlanPort policy.
const DefaultVXLANPort = 4789

// maxIsolationID is the largest VNI a RemoteSubnetRoute can carry: its
// IsolationId is 16 bits in the HNS schema.
const maxIsolationID = 1<<16 - 1

// podEndpointPrefix starts the names of pod endpoints (cni/hnsendpoint);
// our own endpoints must never look like one.
const podEndpointPrefix = "nodenet-pod:"

// plan is a validated LocalSpec with everything derived from it.
type plan struct {
	spec    overlay.LocalSpec
	netType hns.NetworkType
	// cidrs and gateways are what the network gets: the IPv4 pod CIDR in
	// overlay mode, every pod CIDR in l2bridge mode.
	cidrs    []netip.Prefix
	gateways []netip.Addr
	// epName and epIP are our own endpoint: the source VIP (overlay) or
	// the host endpoint (l2bridge).
	epName string
	epIP   netip.Addr
	port   uint16
}

// planFor checks spec with no I/O; every failure is a *overlay.SpecError.
func planFor(spec overlay.LocalSpec) (*plan, error) {
	p := &plan{spec: spec, port: spec.Port}
	if p.port == 0 {
		p.port = DefaultVXLANPort
	}
	if spec.Name == "" || strings.HasPrefix(spec.Name, podEndpointPrefix) {
		return nil, &overlay.SpecError{Field: "network.name", Reason: fmt.Sprintf("%q is not a usable HNS network name", spec.Name)}
	}
	if !spec.NodeIP.Is4() {
		return nil, &overlay.SpecError{Field: "nodeIPOverride", Reason: fmt.Sprintf("the node needs an IPv4 address, got %v", spec.NodeIP)}
	}
	if len(spec.PodCIDRs) == 0 || len(spec.Gateways) != len(spec.PodCIDRs) {
		return nil, &overlay.SpecError{Field: "node.spec.podCIDRs", Reason: fmt.Sprintf("want pod CIDRs with one gateway each, got %v and %v", spec.PodCIDRs, spec.Gateways)}
	}
	switch spec.Mode {
	case config.NetworkModeOverlay:
		return p, p.overlay()
	case config.NetworkModeL2Bridge:
		return p, p.l2bridge()
	}
	return nil, &overlay.SpecError{Field: "network.mode", Reason: fmt.Sprintf("%q is not %s or %s", spec.Mode, config.NetworkModeOverlay, config.NetworkModeL2Bridge)}
}

func (p *plan) overlay() error {
	p.netType = hns.NetworkTypeOverlay
	// HNS overlay is IPv4 only; the controller filters already.
	for i, c := range p.spec.PodCIDRs {
		if c.Addr().Is4() {
			p.cidrs, p.gateways = []netip.Prefix{c.Masked()}, []netip.Addr{p.spec.Gateways[i]}
			break
		}
	}
	if len(p.cidrs) == 0 {
		return &overlay.SpecError{Field: "node.spec.podCIDRs", Reason: fmt.Sprintf("overlay mode needs an IPv4 pod CIDR, got %v", p.spec.PodCIDRs)}
	}
	if p.spec.VNI < hns.MinOverlayVSID || p.spec.VNI > maxIsolationID {
		return &overlay.SpecError{Field: "network.vxlan.vni",
			Reason: fmt.Sprintf("VNI %d: Windows overlay needs %d..%d (lower ones are reserved by the host; remote subnet routes carry 16 bits)", p.spec.VNI, hns.MinOverlayVSID, maxIsolationID)}
	}
	if !p.spec.SourceVIP.IsValid() || !p.cidrs[0].Contains(p.spec.SourceVIP) {
		return &overlay.SpecError{Field: "network.sourceVIP", Reason: fmt.Sprintf("source VIP %v must be an address in the pod CIDR %s", p.spec.SourceVIP, p.cidrs[0])}
	}
	p.epName, p.epIP = SourceVIPEndpointName(p.spec.Name), p.spec.SourceVIP
	return nil
}

func (p *plan) l2bridge() error {
	p.netType = hns.NetworkTypeL2Bridge
	if p.spec.SourceVIP.IsValid() {
		return &overlay.SpecError{Field: "network.sourceVIP", Reason: "l2bridge mode has no source VIP; leave it unset"}
	}
	for _, c := range p.spec.PodCIDRs {
		p.cidrs = append(p.cidrs, c.Masked())
	}
	p.gateways = p.spec.Gateways
	first := p.cidrs[0]
	ip, ok := netaddr.AtOffset(first, config.SourceVIPOffset)
	if !ok {
		return &overlay.SpecError{Field: "node.spec.podCIDRs", Reason: fmt.Sprintf("pod CIDR %s is too small for the host endpoint at offset %d", first, config.SourceVIPOffset)}
	}
	p.epName, p.epIP = HostEndpointName(p.spec.Name), ip
	return nil
}

// SourceVIPEndpointName is the name of the overlay source-VIP endpoint on
// network: "<network>_sourcevip". It is ours: an endpoint of this name
// with another address is replaced.
func SourceVIPEndpointName(network string) string { return network + "_sourcevip" }

// HostEndpointName is the name of the l2bridge host endpoint on network:
// "<network>_ep", flannel host-gw's name, so a node moved from flannel
// adopts flannel's endpoint instead of fighting over its address.
func HostEndpointName(network string) string { return network + "_ep" }

// desiredNetwork is the HNS network p asks for.
func (p *plan) desiredNetwork(adapter string) *hns.Network {
	n := &hns.Network{
		Name:          p.spec.Name,
		Type:          p.netType,
		SchemaVersion: hns.V2,
		Policies: []hns.NetworkPolicy{{Type: hns.NetworkPolicyNetAdapterName,
			NetAdapterName: &hns.NetAdapterNamePolicy{NetworkAdapterName: adapter}}},
	}
	var subnets []hns.Subnet
	for i, c := range p.cidrs {
		def := "0.0.0.0/0"
		if c.Addr().Is6() {
			def = "::/0"
		}
		sn := hns.Subnet{IpAddressPrefix: c.String(), Routes: []hns.Route{{NextHop: p.gateways[i].String(), DestinationPrefix: def}}}
		if p.netType == hns.NetworkTypeOverlay {
			sn.Policies = []hns.SubnetPolicy{{Type: hns.SubnetPolicyVSID, Isolation: &hns.IsolationPolicy{IsolationID: p.spec.VNI}}}
		}
		subnets = append(subnets, sn)
	}
	n.Ipams = []hns.IPAM{{Type: "Static", Subnets: subnets}}
	if p.netType == hns.NetworkTypeOverlay {
		// Like flannel: the network goes with the HNS service; the
		// controller's next resync runs EnsureLocal, which builds it again.
		n.Flags = hns.NetworkFlagsEnableNonPersistent
		if p.port != DefaultVXLANPort {
			n.Policies = append(n.Policies, hns.NetworkPolicy{Type: hns.NetworkPolicyVxlanPort, VxlanPort: &hns.VxlanPortPolicy{Port: p.port}})
		}
	}
	return n
}
