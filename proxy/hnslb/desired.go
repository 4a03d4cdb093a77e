package hnslb

import (
	"fmt"
	"net/netip"
	"slices"
	"time"

	"github.com/nodenet/nodenet/hns"
	"github.com/nodenet/nodenet/proxy"
)

// frontend is what HNS keeps unique among load balancers, and so what
// identifies one of ours: a VIP (invalid for node ports, which answer on
// every node address), the protocol and the external port.
type frontend struct {
	vip   netip.Addr
	v6    bool // the family of a node-port frontend
	proto hns.Protocol
	port  uint16
}

func (f frontend) String() string {
	vip := "<node addresses>"
	if f.vip.IsValid() {
		vip = f.vip.String()
	} else if f.v6 {
		vip = "<node IPv6 addresses>"
	}
	return fmt.Sprintf("%s:%d/%s", vip, f.port, f.proto)
}

func frontendLess(a, b frontend) int {
	if c := a.vip.Compare(b.vip); c != 0 {
		return c
	}
	switch {
	case a.v6 != b.v6:
		if a.v6 {
			return 1
		}
		return -1
	case a.proto != b.proto:
		return int(a.proto) - int(b.proto)
	}
	return int(a.port) - int(b.port)
}

// frontendKind says which part of a service a load balancer serves.
type frontendKind uint8

const (
	kindClusterIP frontendKind = iota
	kindNodePort
	kindExternalIP
	kindIngress
	kindHealthCheck
)

func (k frontendKind) String() string {
	return [...]string{"cluster IP", "node port", "external IP", "load-balancer IP", "health check"}[k]
}

// backendKind says how a backend address becomes an HNS endpoint.
type backendKind uint8

const (
	// backendLocal is a pod on this node: its endpoint exists (CNI made it).
	backendLocal backendKind = iota
	// backendRemote is anything else: a remote endpoint of ours.
	backendRemote
	// backendHost is the host's own endpoint (the source-VIP endpoint on
	// overlay, the host endpoint on l2bridge).
	backendHost
)

type backend struct {
	ip   netip.Addr
	kind backendKind
}

// lbSpec is one desired load balancer in address terms; endpoint IDs are
// resolved when it is written. Specs are immutable once built.
type lbSpec struct {
	kind       frontendKind
	service    proxy.ServicePortName
	sourceVIP  netip.Addr
	targetPort uint16
	flags      hns.LoadBalancerFlags
	portFlags  hns.PortMappingFlags
	dist       hns.Distribution
	// backends are sorted by address.
	backends []backend
	// vipEndpoint asks for a remote endpoint holding the frontend VIP
	// (overlay cluster IPs, as kube-proxy creates them).
	vipEndpoint bool
}

func equalSpec(a, b *lbSpec) bool {
	return a.kind == b.kind && a.service == b.service && a.sourceVIP == b.sourceVIP &&
		a.targetPort == b.targetPort && a.flags == b.flags && a.portFlags == b.portFlags &&
		a.dist == b.dist && a.vipEndpoint == b.vipEndpoint && slices.Equal(a.backends, b.backends)
}

// remoteIPs lists the remote endpoints spec needs, given its frontend.
func (s *lbSpec) remoteIPs(fe frontend) []netip.Addr {
	var out []netip.Addr
	for _, be := range s.backends {
		if be.kind == backendRemote {
			out = append(out, be.ip)
		}
	}
	if s.vipEndpoint {
		out = append(out, fe.vip)
	}
	return out
}

// owner is who Sets items in the store: a service port, or (for the
// health-check load balancers every port of a service shares) the
// service in one family.
type owner struct {
	port        proxy.ServicePortKey
	healthCheck bool
}

func portOwner(k proxy.ServicePortKey) owner { return owner{port: k} }

func healthOwner(k proxy.ServicePortKey) owner {
	k.Port, k.Protocol = "", ""
	return owner{port: k, healthCheck: true}
}

// planner turns service ports into desired load balancers for one sync.
type planner struct {
	facts  *netFacts
	opts   *Options
	report *reporter
}

var protocols = map[proxy.Protocol]hns.Protocol{proxy.TCP: hns.ProtocolTCP, proxy.UDP: hns.ProtocolUDP}

// plan returns the load balancers of one service port, and notes on the
// reporter what it could not program.
func (p *planner) plan(sp *proxy.ServicePort) map[frontend]*lbSpec {
	notes := p.report.begin(sp.Key)
	defer p.report.end(sp.Key, notes)
	out := map[frontend]*lbSpec{}
	if !p.facts.families[sp.Key.Family] {
		p.report.skipFamily(sp.Key)
		return out
	}
	proto, ok := protocols[sp.Key.Protocol]
	if !ok {
		notes.add(reasonSCTP, OpSCTPUnsupported, "HNS load balancers support TCP and UDP only: port %s is not programmed on this node", sp.Key.ServicePortName)
		return out
	}
	base := p.base(sp, notes)
	p.clusterIP(out, sp, proto, base, notes)
	p.external(out, sp, proto, base, notes)
	return out
}

// base holds the flags every load balancer of a port shares.
func (p *planner) base(sp *proxy.ServicePort, notes *notes) lbSpec {
	s := lbSpec{service: sp.Key.ServicePortName}
	if sp.Key.Family == proxy.IPv6 {
		s.flags |= hns.LoadBalancerFlagsIPv6
	}
	if sp.SessionAffinity > 0 {
		if p.facts.features.SessionAffinity {
			s.dist = hns.DistributionSourceIP
			affinityTimeout(sp, notes)
		} else {
			notes.add(reasonAffinity, OpAffinityUnsupported, "session affinity ClientIP needs HNS %s: connections are spread without it", hns.SupportedVersions(hns.FeatureSessionAffinity))
		}
	}
	return s
}

// DefaultAffinityTimeout is Kubernetes' default
// sessionAffinityConfig.clientIP.timeoutSeconds (10800).
const DefaultAffinityTimeout = 3 * time.Hour

// affinityTimeout reports a ClientIP timeout other than the default: an
// HNS load balancer has no field for one (hcn's HostComputeLoadBalancer
// and LoadBalancerPortMapping carry only the distribution type), so the
// timeout the Service asks for is not applied.
func affinityTimeout(sp *proxy.ServicePort, notes *notes) {
	if sp.SessionAffinity == DefaultAffinityTimeout {
		return
	}
	notes.add(reasonAffinity, OpAffinityUnsupported, "HNS load balancers have no session affinity timeout: clients are pinned by source IP, but timeoutSeconds %d is not applied",
		int64(sp.SessionAffinity/time.Second))
}

func (p *planner) clusterIP(out map[frontend]*lbSpec, sp *proxy.ServicePort, proto hns.Protocol, base lbSpec, notes *notes) {
	if !sp.ClusterIP.IsValid() {
		return
	}
	s := base
	s.kind = kindClusterIP
	if p.opts.EnableDSR {
		s.flags |= hns.LoadBalancerFlagsDSR
	}
	s.vipEndpoint = p.facts.overlay
	fe := frontend{vip: sp.ClusterIP, proto: proto, port: sp.Port}
	p.add(out, fe, &s, sp.InternalEndpoints, notes)
}

// external adds the node-port, external-IP and load-balancer-IP load
// balancers. kube-proxy's rules: with eTP Local they use DSR so the
// backend sees the client (all their backends are local, so the reply
// passes this host's load balancer); preserve-destination (which needs
// DSR) also keeps the VIP as destination on the ingress load balancers
// and limits node ports and ingress IPs to local backends.
func (p *planner) external(out map[frontend]*lbSpec, sp *proxy.ServicePort, proto hns.Protocol, base lbSpec, notes *notes) {
	if !sp.UsesExternalFrontends() {
		return
	}
	dsrOK := p.facts.features.DSR
	localDSR := sp.ExternalPolicyLocal && dsrOK
	preserve := sp.PreserveDestination && dsrOK
	if !dsrOK && (sp.ExternalPolicyLocal || sp.PreserveDestination) {
		notes.add(reasonNoDSR, OpDSRUnsupported, "externalTrafficPolicy Local and preserve-destination need DSR (HNS %s): backends see the node's address as source", hns.SupportedVersions(hns.FeatureDSR))
	}
	eps := sp.ExternalEndpoints
	localOnly := eps
	if preserve {
		localOnly = sp.LocalEndpoints
	}
	if localDSR {
		base.flags |= hns.LoadBalancerFlagsDSR
	}
	if sp.NodePort != 0 {
		s := base
		s.kind, s.portFlags = kindNodePort, hns.PortMappingFlagsLocalRoutedVIP|hns.PortMappingFlagsVipExternalIP
		fe := frontend{v6: sp.Key.Family == proxy.IPv6, proto: proto, port: sp.NodePort}
		p.add(out, fe, &s, localOnly, notes)
	}
	for _, ip := range sp.ExternalIPs {
		s := base
		s.kind, s.portFlags = kindExternalIP, hns.PortMappingFlagsVipExternalIP
		p.add(out, frontend{vip: ip, proto: proto, port: sp.Port}, &s, eps, notes)
	}
	sourceRangesNotEnforced(sp, notes)
	for _, ip := range sp.LoadBalancerIPs {
		s := base
		s.kind, s.portFlags = kindIngress, hns.PortMappingFlagsVipExternalIP
		if preserve {
			s.flags |= hns.LoadBalancerFlagsDSR
			s.portFlags |= hns.PortMappingFlagsUseMux | hns.PortMappingFlagsPreserveDIP
		}
		p.add(out, frontend{vip: ip, proto: proto, port: sp.Port}, &s, localOnly, notes)
	}
}

// sourceRangesNotEnforced reports loadBalancerSourceRanges on a port
// with load-balancer IPs: no HNS version can enforce them for a load
// balancer frontend (the package doc says why), so every source reaches
// those IPs here, as on kube-proxy winkernel (kubernetes issues 107019,
// 120033). Saying so beats accepting the ranges silently.
func sourceRangesNotEnforced(sp *proxy.ServicePort, notes *notes) {
	if len(sp.LoadBalancerSourceRanges) == 0 || len(sp.LoadBalancerIPs) == 0 {
		return
	}
	notes.add(reasonSourceRanges, OpSourceRangesUnsupported,
		"HNS load balancers cannot be limited to loadBalancerSourceRanges %v: load-balancer IPs %v accept every source on this Windows node; enforce the ranges at the cloud load balancer",
		sp.LoadBalancerSourceRanges, sp.LoadBalancerIPs)
}

// add completes s with eps's backends and its source VIP and adds it,
// unless no backend is left: HNS gets no load balancer without backends
// (kube-proxy deletes it), so such a frontend is simply absent.
func (p *planner) add(out map[frontend]*lbSpec, fe frontend, s *lbSpec, eps []proxy.Endpoint, notes *notes) {
	bes, port := p.backends(fe, s.kind, eps, notes)
	if len(bes) == 0 {
		return
	}
	s.backends, s.targetPort = bes, port
	s.sourceVIP = p.sourceVIP(proxyFamily(fe, s), bes)
	out[fe] = s
}

func proxyFamily(fe frontend, s *lbSpec) proxy.IPFamily {
	if s.flags&hns.LoadBalancerFlagsIPv6 != 0 || fe.v6 {
		return proxy.IPv6
	}
	return proxy.IPv4
}

// sourceVIP applies KEP-5100: on overlay the source VIP, unless a backend
// is outside the cluster CIDRs or another node's address (then the node
// IP); on l2bridge the node IP.
func (p *planner) sourceVIP(fam proxy.IPFamily, bes []backend) netip.Addr {
	f := p.facts
	if !f.overlay {
		return f.nodeIP[fam]
	}
	for _, be := range bes {
		if be.kind == backendRemote && f.needsNodeSourceVIP(be.ip) {
			return f.nodeIP[fam]
		}
	}
	return f.sourceVIP[fam]
}
