package hns

import (
	"fmt"
	"hash/fnv"
	"net/netip"
	"slices"
	"strings"
)

// The tracer answers "what would this host do with this packet" from the
// simulator's state, so proxy and network tests assert on outcomes rather
// than on calls. It models HNS/VFP as kube-proxy winkernel
// (pkg/proxy/winkernel/proxier.go, hns.go), hnslib's schema comments
// (hcn/hcnloadbalancer.go, hcn/hcnpolicy.go) and Microsoft Learn
// ("Windows container network drivers") describe it; each function below
// cites its part, and says "unsourced:" where the model goes beyond them:
//
// Frontend match: a load balancer matches when protocol and destination
// port equal a port mapping's Protocol/ExternalPort and the destination is
// one of FrontendVIPs (empty FrontendVIPs: any address of a host adapter,
// i.e. node ports). Which load balancers apply depends on where the packet
// enters:
//   - from a local endpoint (a pod): every load balancer;
//   - from the host: VIP load balancers, and host-address ones only with
//     LocalRoutedVIP;
//   - from outside the node: never ILB ones; VIP ones only with
//     VipExternalIP or when the VIP is a host address; host-address ones
//     always.
//
// Backend choice: every listed endpoint is possible; with DistributionType
// SourceIP (SourceIPProtocol) the client IP (and protocol) hashes to one.
//
// Rewrites per backend: the destination becomes backend:InternalPort, except
// with PreserveDIP where the destination IP stays the VIP. With the DSR flag
// the source is kept and the backend replies straight to the client;
// without it the source is SNATed to SourceVIP when set (overlay's source
// VIP, or the node IP).
//
// Delivery: a local backend is delivered on its vSwitch port; a remote one
// on an Overlay network is VXLAN-encapsulated to its provider address (its
// ProviderAddress policy, else the network's RemoteSubnetRoute covering it)
// with the subnet's VSID; on L2Bridge it is routed on the underlay.
//
// Endpoint ACLs (sim_acl.go): a sending endpoint's Out rules see the
// packet as sent, a receiving local endpoint's In rules the packet as
// delivered; an endpoint with any ACL denies what no rule allows.
//
// With no matching load balancer the packet is routed: to a local endpoint,
// through a RemoteSubnetRoute, to the host, or out of the external adapter,
// where the sending endpoint's OutBoundNAT policy SNATs it to the host
// address unless the destination is in Exceptions (or, with Destinations,
// only when it is in Destinations).

// Entry says where a traced packet enters the host.
type Entry int

// Entries.
const (
	// FromEndpoint: sent by a local endpoint; Packet.Src is its address.
	FromEndpoint Entry = iota
	// FromHost: sent by the host itself (node processes, hostNetwork pods).
	FromHost
	// FromExternal: arrived on the host's external adapter.
	FromExternal
)

func (e Entry) String() string {
	return [...]string{"endpoint", "host", "external"}[e]
}

// Packet is a flow's first packet. Addresses are in HNS's string form.
type Packet struct {
	Protocol Protocol
	Src      string
	SrcPort  uint16
	Dst      string
	DstPort  uint16
}

func (p Packet) String() string {
	return fmt.Sprintf("%s %s:%d -> %s:%d", p.Protocol, p.Src, p.SrcPort, p.Dst, p.DstPort)
}

// Target says where a delivery ends.
type Target string

// Targets.
const (
	TargetLocalEndpoint  Target = "local-endpoint"
	TargetRemoteEndpoint Target = "remote-endpoint"
	TargetHost           Target = "host"
	TargetExternal       Target = "external"
)

// Encapsulation is the VXLAN wrapping of a packet sent to another host.
type Encapsulation struct {
	ProviderAddress string
	VSID            uint32
}

// Delivery is one possible outcome of a traced packet.
type Delivery struct {
	Target Target
	// EndpointID is the receiving endpoint, if any.
	EndpointID string
	// Packet is the packet as the receiver sees it.
	Packet Packet
	// DSR: the receiver replies to the client directly, bypassing this
	// host's load balancer.
	DSR bool
	// Encap is set when the packet leaves in a VXLAN tunnel.
	Encap *Encapsulation
}

// Trace is the result of tracing a packet.
type Trace struct {
	// LoadBalancerID is the load balancer that matched, if any.
	LoadBalancerID string
	// Deliveries are the possible outcomes (one per reachable backend for a
	// load balancer, one for routed packets); empty when dropped.
	Deliveries []Delivery
	// Dropped says why no delivery is possible.
	Dropped string
	// Steps explains the decisions, for test failure messages.
	Steps []string
}

func (t *Trace) step(format string, args ...any) {
	t.Steps = append(t.Steps, fmt.Sprintf(format, args...))
}

func (t *Trace) String() string { return strings.Join(t.Steps, "\n") }

// Backends returns the receiving endpoint IDs of the deliveries.
func (t *Trace) Backends() []string {
	var out []string
	for _, d := range t.Deliveries {
		out = append(out, d.EndpointID)
	}
	return out
}

// tracePacket is a Packet with parsed addresses.
type tracePacket struct {
	Packet
	src, dst netip.Addr
}

// Trace follows a packet entering at from through the simulated host.
// It does not count as an HNS call. An error means the question itself is
// malformed (bad address, unknown sender); a dropped packet is a Trace.
func (s *Simulator) Trace(from Entry, p Packet) (*Trace, error) {
	src, err := netip.ParseAddr(p.Src)
	if err != nil {
		return nil, fmt.Errorf("trace: source %q: %w", p.Src, err)
	}
	dst, err := netip.ParseAddr(p.Dst)
	if err != nil {
		return nil, fmt.Errorf("trace: destination %q: %w", p.Dst, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	t := &Trace{}
	t.step("%s enters from %s", p, from)
	var sender *Endpoint
	if from == FromEndpoint {
		if sender = s.localEndpointWithIP(src); sender == nil {
			return nil, fmt.Errorf("trace: no local endpoint has source address %s", src)
		}
		t.step("sender is endpoint %s", sender.ID)
	}
	pkt := tracePacket{Packet: p, src: src, dst: dst}
	if sender != nil && outboundBlocked(t, sender, pkt) {
		return t, nil
	}
	if lb := s.matchLoadBalancer(from, pkt); lb != nil {
		s.traceLoadBalancer(t, lb, pkt)
		return t, nil
	}
	t.step("no load balancer matches")
	s.traceRoute(t, from, sender, pkt)
	return t, nil
}

func (s *Simulator) localEndpointWithIP(a netip.Addr) *Endpoint {
	for _, id := range sortedIDs(s.endpoints) {
		ep := s.endpoints[id]
		if !ep.IsRemote() && endpointHas(ep, a) {
			return ep
		}
	}
	return nil
}

func endpointHas(ep *Endpoint, a netip.Addr) bool {
	for _, ipc := range ep.IpConfigurations {
		if x, err := netip.ParseAddr(ipc.IpAddress); err == nil && x == a {
			return true
		}
	}
	return false
}

func (s *Simulator) hostAddress(a netip.Addr) bool {
	for _, ad := range s.opts.HostAdapters {
		for _, ip := range ad.IPs {
			if x, err := netip.ParseAddr(ip); err == nil && x == a {
				return true
			}
		}
	}
	return false
}

// firstHostAddress is the node IP outbound NAT uses for a family.
func (s *Simulator) firstHostAddress(is6 bool) string {
	for _, ad := range s.opts.HostAdapters {
		for _, ip := range ad.IPs {
			if x, err := netip.ParseAddr(ip); err == nil && x.Is6() == is6 {
				return x.String()
			}
		}
	}
	return ""
}

func (s *Simulator) matchLoadBalancer(from Entry, p tracePacket) *LoadBalancer {
	for _, id := range sortedIDs(s.lbs) {
		lb := s.lbs[id]
		for _, pm := range lb.PortMappings {
			if pm.Protocol != p.Protocol || pm.ExternalPort != p.DstPort {
				continue
			}
			if s.frontendApplies(from, lb, pm, p.dst) {
				return lb
			}
		}
	}
	return nil
}

// frontendApplies says whether a packet entering at from for dst reaches
// this load balancer frontend. Sources: no FrontendVIPs is a node port
// (kube-proxy winkernel proxier.go creates node-port load balancers with
// vip "" and one per IP family, hns.go getLoadBalancer); LocalRoutedVIP
// "enables VIP access from the host" and ILB "enables internal
// loadbalancing" (hnslib hcn.LoadBalancerPortMappingFlags); kube-proxy
// sets VipExternalIP on exactly the frontends reachable from outside
// (node ports, external IPs, load-balancer ingress IPs) and never on
// cluster IPs (proxier.go syncProxyRules). unsourced: that HNS matches a
// non-host VIP from outside only with VipExternalIP (inferred from that
// use; Microsoft publishes no definition of the flag), and that a node
// port reaches the host only with LocalRoutedVIP.
func (s *Simulator) frontendApplies(from Entry, lb *LoadBalancer, pm PortMapping, dst netip.Addr) bool {
	if len(lb.FrontendVIPs) == 0 {
		if !s.hostAddress(dst) || dst.Is6() != (lb.Flags&LoadBalancerFlagsIPv6 != 0) {
			return false
		}
		return from != FromHost || pm.Flags&PortMappingFlagsLocalRoutedVIP != 0
	}
	if !slices.ContainsFunc(lb.FrontendVIPs, func(v string) bool {
		x, err := netip.ParseAddr(v)
		return err == nil && x == dst
	}) {
		return false
	}
	if from != FromExternal {
		return true
	}
	if pm.Flags&PortMappingFlagsILB != 0 {
		return false
	}
	return pm.Flags&PortMappingFlagsVipExternalIP != 0 || s.hostAddress(dst)
}

// traceLoadBalancer applies a matched load balancer. Sources:
// SourceIP/SourceIPProtocol distribution pins a client IP (and protocol)
// to one backend (hnslib hcn.LoadBalancerDistribution); the destination
// becomes the backend's address and InternalPort, except with
// PreserveDIP, which "delivers packets with destination IP as the VIP"
// (hcn.LoadBalancerPortMappingFlags); DSR (hcn.LoadBalancerFlagsDSR,
// "Direct Server Return") keeps the client's source; otherwise the source
// is SNATed to SourceVIP, the overlay source VIP or the node IP (kube-proxy
// winkernel proxier.go syncProxyRules on choosing SourceVIP). HNS keeps
// a load balancer with no backends, holding its port (kubernetes PR
// 137530). unsourced: that its packets are dropped, and the simulator's
// hash for the pinned backend (HNS's is not published).
func (s *Simulator) traceLoadBalancer(t *Trace, lb *LoadBalancer, p tracePacket) {
	t.LoadBalancerID = lb.ID
	pm := lb.PortMappings[0]
	for _, x := range lb.PortMappings {
		if x.Protocol == p.Protocol && x.ExternalPort == p.DstPort {
			pm = x
		}
	}
	t.step("load balancer %s matches (flags=%s portFlags=%s)", lb.ID, lbFlagNames(lb.Flags), portFlagNames(pm.Flags))
	backends := lb.HostComputeEndpoints
	if len(backends) == 0 {
		t.Dropped = "load balancer has no backends"
		t.step("dropped: %s", t.Dropped)
		return
	}
	if pm.DistributionType != DistributionNone {
		key := p.src.String()
		if pm.DistributionType == DistributionSourceIPProtocol {
			key += "/" + p.Protocol.String()
		}
		h := fnv.New32a()
		h.Write([]byte(key))
		backends = []string{backends[int(h.Sum32()%uint32(len(backends)))]}
		t.step("session affinity (%s) pins %s to endpoint %s", distributionName(pm.DistributionType), key, backends[0])
	}
	dsr := lb.Flags&LoadBalancerFlagsDSR != 0
	aclDrops := 0
	for _, id := range backends {
		ep := s.endpoints[id]
		if ep == nil {
			// A degraded load balancer: its endpoint was deleted under it
			// (DeleteEndpoint; kubernetes issue 76316: traffic to it is lost).
			t.step("endpoint %s is gone (degraded load balancer)", id)
			continue
		}
		backendIP := endpointAddrLike(ep, p.dst)
		out := p.Packet
		out.DstPort = pm.InternalPort
		if pm.Flags&PortMappingFlagsPreserveDIP == 0 {
			out.Dst = backendIP
		}
		if !dsr && lb.SourceVIP != "" {
			out.Src = lb.SourceVIP
		}
		d := Delivery{EndpointID: id, Packet: out, DSR: dsr, Target: TargetLocalEndpoint}
		if !ep.IsRemote() && inboundBlocked(t, ep, out) {
			aclDrops++
			continue
		}
		if ep.IsRemote() {
			d.Target = TargetRemoteEndpoint
			if !s.attachEncap(t, &d, ep, backendIP) {
				continue
			}
		}
		t.step("-> %s %s sees %s (dsr=%t)", d.Target, id, out, dsr)
		t.Deliveries = append(t.Deliveries, d)
	}
	if len(t.Deliveries) == 0 {
		t.Dropped = "no backend is reachable"
		if aclDrops > 0 {
			t.Dropped = "the backends' ACLs block it"
		}
		t.step("dropped: %s", t.Dropped)
	}
}

// endpointAddrLike returns the endpoint's address of the same family as like.
func endpointAddrLike(ep *Endpoint, like netip.Addr) string {
	for _, ipc := range ep.IpConfigurations {
		if a, err := netip.ParseAddr(ipc.IpAddress); err == nil && a.Is6() == like.Is6() {
			return a.String()
		}
	}
	return ep.IpConfigurations[0].IpAddress
}

// attachEncap fills the overlay encapsulation for a remote endpoint; it
// reports false (and records why) when the packet cannot be sent. A
// remote endpoint on Overlay is reached through its ProviderAddress policy
// (kube-proxy winkernel hns.go createEndpoint sets one,
// hcn.ProviderAddressEndpointPolicySetting), else the RemoteSubnetRoute
// covering its address (proxier.go findRemoteSubnetProviderAddress;
// hcn.RemoteSubnetRoutePolicySetting), VXLAN-encapsulated with the
// network's VSID (hcn.VsidPolicySetting); on L2Bridge containers are on
// the underlay network itself (Microsoft Learn "Windows container network
// drivers", l2bridge). unsourced: that HNS drops a packet for a remote
// endpoint it has no provider address for (kube-proxy instead programs
// the node IP then, "assuming it is a public IP").
func (s *Simulator) attachEncap(t *Trace, d *Delivery, ep *Endpoint, ip string) bool {
	n := s.networks[ep.HostComputeNetwork]
	if n == nil || n.Type != NetworkTypeOverlay {
		t.step("remote endpoint %s is routed on the underlay", ep.ID)
		return true
	}
	pa := ""
	for _, p := range ep.Policies {
		if p.ProviderAddress != nil {
			pa = p.ProviderAddress.ProviderAddress
		}
	}
	if pa == "" {
		if a, err := netip.ParseAddr(ip); err == nil {
			if r := remoteSubnetRouteFor(n, a); r != nil {
				pa = r.ProviderAddress
			}
		}
	}
	if pa == "" {
		t.step("remote endpoint %s has no provider address and no remote subnet route covers %s: unreachable", ep.ID, ip)
		return false
	}
	d.Encap = &Encapsulation{ProviderAddress: pa, VSID: networkVSID(n)}
	return true
}

func remoteSubnetRouteFor(n *Network, a netip.Addr) *RemoteSubnetRoutePolicy {
	for _, p := range n.Policies {
		if r := p.RemoteSubnetRoute; r != nil {
			if pfx, err := netip.ParsePrefix(r.DestinationPrefix); err == nil && pfx.Contains(a) {
				return r
			}
		}
	}
	return nil
}

func networkVSID(n *Network) uint32 {
	for _, sn := range n.Subnets() {
		for _, p := range sn.Policies {
			if p.Type == SubnetPolicyVSID && p.Isolation != nil {
				return p.Isolation.IsolationID
			}
		}
	}
	return 0
}

// traceRoute handles a packet no load balancer claimed: to a local
// endpoint, to the host, through a RemoteSubnetRoute on the sender's
// Overlay network (VXLAN to the route's provider address with its
// IsolationId: hnslib hcn.RemoteSubnetRoutePolicySetting, which
// kube-proxy reads as remote pod prefix → provider address,
// pkg/proxy/winkernel/hns.go getNetworkByName), or out of the external
// adapter with the sender's OutBoundNAT (outboundNATFor). unsourced: that
// external traffic for an address the host has no endpoint, route or load
// balancer for is dropped (the host is no router for it).
func (s *Simulator) traceRoute(t *Trace, from Entry, sender *Endpoint, p tracePacket) {
	if ep := s.localEndpointWithIP(p.dst); ep != nil {
		if why := s.hostCannotForward(ep); from == FromHost && why != "" {
			t.Dropped = why
			t.step("dropped: %s", why)
			return
		}
		if inboundBlocked(t, ep, p.Packet) {
			t.Dropped = "blocked by an ACL of endpoint " + ep.ID
			t.step("dropped: %s", t.Dropped)
			return
		}
		t.step("-> local endpoint %s", ep.ID)
		t.Deliveries = []Delivery{{Target: TargetLocalEndpoint, EndpointID: ep.ID, Packet: p.Packet}}
		return
	}
	if s.hostAddress(p.dst) {
		t.step("-> the host")
		t.Deliveries = []Delivery{{Target: TargetHost, Packet: p.Packet}}
		return
	}
	for _, id := range sortedIDs(s.networks) {
		n := s.networks[id]
		if sender != nil && sender.HostComputeNetwork != id {
			continue
		}
		if n.Type != NetworkTypeOverlay {
			continue
		}
		if r := remoteSubnetRouteFor(n, p.dst); r != nil {
			t.step("remote subnet route %s -> PA %s", r.DestinationPrefix, r.ProviderAddress)
			t.Deliveries = []Delivery{{Target: TargetRemoteEndpoint, Packet: p.Packet,
				Encap: &Encapsulation{ProviderAddress: r.ProviderAddress, VSID: uint32(r.IsolationID)}}}
			return
		}
	}
	if from == FromExternal {
		t.Dropped = "no endpoint, route or load balancer for " + p.Dst
		t.step("dropped: %s", t.Dropped)
		return
	}
	out := p.Packet
	if sender != nil {
		if nat := sender.outboundNATFor(p.dst); nat != nil {
			out.Src = nat.VirtualIP
			if out.Src == "" {
				out.Src = s.firstHostAddress(p.dst.Is6())
			}
			t.step("OutBoundNAT: source %s -> %s", p.Src, out.Src)
		} else {
			t.step("no outbound NAT for %s", p.Dst)
		}
	}
	t.step("-> out of the external adapter")
	t.Deliveries = []Delivery{{Target: TargetExternal, Packet: out}}
}

// outboundNATFor returns the first OutBoundNAT policy that applies to
// dst. An endpoint may carry several (the exceptions policy, loopback DSR's
// Destinations policy: containernetworking/plugins pkg/hns
// ApplyLoopbackDSRPolicy, see cni/hnsendpoint/doc.go); their order must
// not change the outcome. The packet is SNATed to the policy's VirtualIP
// (hnslib hcn.OutboundNatPolicySetting), else the host address.
// unsourced: that an empty VirtualIP means the host's first address of
// the family.
func (e *Endpoint) outboundNATFor(dst netip.Addr) *OutboundNATPolicy {
	for _, p := range e.Policies {
		if p.OutboundNAT != nil && natApplies(p.OutboundNAT, dst) {
			return p.OutboundNAT
		}
	}
	return nil
}

// natApplies: hcn.OutboundNatPolicySetting (hnslib hcn/hcnpolicy.go) NATs
// everything but Exceptions (the cluster, service and node CIDRs the
// Windows CNI configs list: microsoft/SDN
// Kubernetes/flannel/*/cni/config/cni.conf), or, with Destinations, only
// those (loopback DSR).
func natApplies(nat *OutboundNATPolicy, dst netip.Addr) bool {
	if len(nat.Destinations) > 0 {
		return inAny(nat.Destinations, dst)
	}
	return !inAny(nat.Exceptions, dst)
}

func inAny(list []string, a netip.Addr) bool {
	for _, x := range list {
		if pfx, err := netip.ParsePrefix(x); err == nil && pfx.Contains(a) {
			return true
		}
		if y, err := netip.ParseAddr(x); err == nil && y == a {
			return true
		}
	}
	return false
}
