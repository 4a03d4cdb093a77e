package hns

import (
	"context"
	"net/netip"
	"strings"
)

// knownPortMappingFlags are hnslib's hcn.LoadBalancerPortMappingFlags
// (ILB 1, LocalRoutedVIP 2, UseMux 4, PreserveDIP 8; hcn/hcnloadbalancer.go)
// and VipExternalIP (16), which hcn does not name but kube-proxy sends
// (pkg/proxy/winkernel/hns.go LoadBalancerPortMappingFlagsVipExternalIP).
const knownPortMappingFlags = PortMappingFlagsILB | PortMappingFlagsLocalRoutedVIP | PortMappingFlagsUseMux |
	PortMappingFlagsPreserveDIP | PortMappingFlagsVipExternalIP

// CreateLoadBalancer implements Interface.
func (s *Simulator) CreateLoadBalancer(ctx context.Context, lb *LoadBalancer) (*LoadBalancer, error) {
	var out *LoadBalancer
	err := s.call(ctx, OpCreateLoadBalancer, frontendLabel(lb), func() error {
		if err := s.validateLoadBalancer(OpCreateLoadBalancer, "", lb); err != nil {
			return err
		}
		c := s.storeLoadBalancer(s.newID(idLoadBalancer), lb)
		out = cloneLoadBalancer(c)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// UpdateLoadBalancer implements Interface, as each HNS version answers it
// (modifyRule).
func (s *Simulator) UpdateLoadBalancer(ctx context.Context, id string, lb *LoadBalancer) (*LoadBalancer, error) {
	op := OpUpdateLoadBalancer
	var out *LoadBalancer
	err := s.call(ctx, op, id, func() error {
		rule := s.modifyRule()
		if rule == modifyAbsent {
			// hnslib's ModifyLoadbalancerSupported refuses before calling
			// HNS, with this message (hcn/hcn.go, platformDoesNotSupportError).
			return newError(op, KindNotSupported, id, "platform does not support feature ModifyLoadbalancer (HNS %s; host has %s)", SupportedVersions(FeatureModifyLoadbalancer), s.opts.Version)
		}
		// An unknown ID fails to open (hnslib hcn/hcnloadbalancer.go
		// updateLoadBalancer, hcnOpenLoadBalancer).
		id = strings.ToUpper(id)
		old, ok := s.lbs[id]
		if !ok {
			return newError(op, KindNotFound, id, "no such load balancer")
		}
		if err := s.validateLoadBalancer(op, id, lb); err != nil {
			return err
		}
		if rule == modifyKeepsEndpoints {
			lb = cloneLoadBalancer(lb)
			lb.HostComputeEndpoints = old.HostComputeEndpoints
		}
		delete(s.restoredLBs, id)
		out = cloneLoadBalancer(s.storeLoadBalancer(id, lb))
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// How an HNS version answers an in-place load balancer update.
type modifyBehavior int

const (
	// modifyAbsent: the host lacks ModifyLoadbalancer (hnslib's
	// ModifyLoadbalancerVersion range, 15.5–15.x and ≥ 16.0).
	modifyAbsent modifyBehavior = iota
	// modifyReplaces: the update replaces the definition.
	modifyReplaces
	// modifyKeepsEndpoints: HNS 15.4 (Windows Server 2025 before the
	// fix) reports success but the load balancer keeps its old endpoints
	// (kubernetes issue 131466; kube-proxy stopped using the call there
	// in PR 131506).
	modifyKeepsEndpoints
)

// hnsModifyKeepsEndpoints is the HNS version of issue 131466.
var hnsModifyKeepsEndpoints = Version{Major: 15, Minor: 4}

// modifyRule is how this host answers ModifyLoadBalancer: 15.4 keeps the
// old endpoints (kubernetes issue 131466), hnslib's ModifyLoadbalancer
// range replaces the definition (hcn/hcnglobals.go), other versions lack
// the call.
func (s *Simulator) modifyRule() modifyBehavior {
	switch {
	case s.opts.Version == hnsModifyKeepsEndpoints:
		return modifyKeepsEndpoints
	case s.features.ModifyLoadbalancer:
		return modifyReplaces
	}
	return modifyAbsent
}

// storeLoadBalancer saves a validated copy under id, with endpoint IDs in
// HNS's upper-case form. s.mu held.
func (s *Simulator) storeLoadBalancer(id string, lb *LoadBalancer) *LoadBalancer {
	c := cloneLoadBalancer(lb)
	c.ID = id
	for i, epID := range c.HostComputeEndpoints {
		c.HostComputeEndpoints[i] = strings.ToUpper(epID)
	}
	if c.SchemaVersion == (SchemaVersion{}) {
		c.SchemaVersion = V2
	}
	s.lbs[id] = c
	return c
}

func frontendLabel(lb *LoadBalancer) string {
	vips := "*"
	if len(lb.FrontendVIPs) > 0 {
		vips = strings.Join(lb.FrontendVIPs, ",")
	}
	if len(lb.PortMappings) == 0 {
		return vips
	}
	pm := lb.PortMappings[0]
	return vips + ":" + itoa(uint64(pm.ExternalPort)) + "/" + pm.Protocol.String()
}

// validateLoadBalancer applies HNS's rules to a load balancer that would be
// stored under self ("" for a new one). s.mu held.
func (s *Simulator) validateLoadBalancer(op Op, self string, lb *LoadBalancer) error {
	label := frontendLabel(lb)
	if err := s.validateLBFlags(op, label, lb); err != nil {
		return err
	}
	if err := validateLBAddresses(op, label, lb); err != nil {
		return err
	}
	if err := s.validateLBEndpoints(op, label, lb); err != nil {
		return err
	}
	return s.validateFrontendFree(op, self, label, lb)
}

// validateLBFlags checks a load balancer's flags and port mappings
// against hnslib's schema (hcn/hcnloadbalancer.go) and feature ranges
// (hcn/hcnglobals.go, FeaturesFor: DSR, IPv6DualStack, SessionAffinity).
func (s *Simulator) validateLBFlags(op Op, label string, lb *LoadBalancer) error {
	if lb.Flags&LoadBalancerFlagsDSR != 0 && !s.features.DSR {
		return newError(op, KindNotSupported, label, "DSR needs HNS %s (host has %s)", SupportedVersions(FeatureDSR), s.opts.Version)
	}
	if lb.Flags&LoadBalancerFlagsIPv6 != 0 && !s.features.IPv6DualStack {
		return newError(op, KindNotSupported, label, "IPv6 load balancers need HNS %s (host has %s)", SupportedVersions(FeatureIPv6DualStack), s.opts.Version)
	}
	// hcn.LoadBalancerFlags: None 0, DSR 1, IPv6 2 (kube-proxy's
	// hns.go LoadBalancerFlagsIPv6); anything else is not in the schema
	// (winerror.h HCN_E_INVALID_POLICY assumed for the answer).
	if lb.Flags&^(LoadBalancerFlagsDSR|LoadBalancerFlagsIPv6) != 0 {
		return newError(op, KindInvalid, label, "unknown load balancer flags %#x", uint32(lb.Flags))
	}
	// unsourced: HNS refusing a load balancer without a port mapping.
	// kube-proxy always sends exactly one and reads PortMappings[0] of
	// every load balancer it lists (pkg/proxy/winkernel/hns.go
	// getAllLoadBalancers); kept so nodenet never writes one it could not
	// read back.
	if len(lb.PortMappings) == 0 {
		return newError(op, KindInvalid, label, "a load balancer needs a port mapping")
	}
	for _, pm := range lb.PortMappings {
		// hcn.LoadBalancerPortMapping: Protocol is TCP (6) or UDP (17);
		// SCTP "is not supported on nodes that run Windows"
		// (kubernetes.io "Protocols for Services"). Both ports are
		// `omitempty`, so 0 is a missing field.
		if pm.Protocol != ProtocolTCP && pm.Protocol != ProtocolUDP {
			return newError(op, KindNotSupported, label, "protocol %s is not supported by HNS load balancers", pm.Protocol)
		}
		if pm.InternalPort == 0 || pm.ExternalPort == 0 {
			return newError(op, KindInvalid, label, "port mapping needs internal and external ports")
		}
		if pm.Flags&^knownPortMappingFlags != 0 {
			return newError(op, KindInvalid, label, "unknown port mapping flags %#x", uint32(pm.Flags))
		}
		// hcn.LoadBalancerDistribution: None 0, SourceIPProtocol 1,
		// SourceIP 2.
		switch pm.DistributionType {
		case DistributionNone:
		case DistributionSourceIP, DistributionSourceIPProtocol:
			if !s.features.SessionAffinity {
				return newError(op, KindNotSupported, label, "session affinity needs HNS %s (host has %s)", SupportedVersions(FeatureSessionAffinity), s.opts.Version)
			}
		default:
			return newError(op, KindInvalid, label, "unknown distribution type %d", pm.DistributionType)
		}
	}
	return nil
}

// validateLBAddresses checks hcn.HostComputeLoadBalancer's FrontendVIPs
// and SourceVIP, which are IP addresses (hnslib hcn/hcnloadbalancer.go).
// unsourced: refusing an address whose family differs from the IPv6 flag.
// kube-proxy sets the flag exactly for IPv6 services
// (pkg/proxy/winkernel/hns.go getLoadBalancer, flags.isIPv6); no source
// says what HNS does with a mismatch. Kept so a family mix-up in nodenet
// fails loudly instead of programming a load balancer that never matches.
func validateLBAddresses(op Op, label string, lb *LoadBalancer) error {
	ipv6 := lb.Flags&LoadBalancerFlagsIPv6 != 0
	for _, v := range lb.FrontendVIPs {
		a, err := netip.ParseAddr(v)
		if err != nil {
			return newError(op, KindInvalid, label, "frontend VIP %q is not an address", v)
		}
		if a.Is6() != ipv6 {
			return newError(op, KindInvalid, label, "frontend VIP %s does not match the load balancer's IPv6 flag", a)
		}
	}
	if lb.SourceVIP != "" {
		a, err := netip.ParseAddr(lb.SourceVIP)
		if err != nil {
			return newError(op, KindInvalid, label, "source VIP %q is not an address", lb.SourceVIP)
		}
		if a.Is6() != ipv6 {
			return newError(op, KindInvalid, label, "source VIP %s does not match the load balancer's IPv6 flag", a)
		}
	}
	return nil
}

func (s *Simulator) validateLBEndpoints(op Op, label string, lb *LoadBalancer) error {
	if n := len(lb.HostComputeEndpoints); n > s.opts.MaxBackendsPerLoadBalancer {
		// What HNS answers above its per-load-balancer limit: E_INVALIDARG,
		// "invalid number of destinations" (kubernetes issue 98680).
		return codedError(op, CodeInvalidParameter, label, "invalid number of destinations: %d backends, the host allows %d per load balancer", n, s.opts.MaxBackendsPerLoadBalancer)
	}
	// unsourced: refusing an endpoint listed twice (kube-proxy never
	// sends one; a duplicate would skew the distribution). A listed
	// endpoint that does not exist is winerror.h HCN_E_ENDPOINT_NOT_FOUND.
	seen := map[string]bool{}
	for _, id := range lb.HostComputeEndpoints {
		id = strings.ToUpper(id)
		if seen[id] {
			return newError(op, KindInvalid, label, "endpoint %s listed twice", id)
		}
		seen[id] = true
		if _, ok := s.endpoints[id]; !ok {
			return newError(op, KindNotFound, label, "endpoint %s does not exist", id)
		}
	}
	return nil
}

// frontendKey is what two load balancers may not share: a VIP ("" for the
// host's own addresses, of the family the IPv6 flag says: dual-stack
// node ports are one load balancer per family), protocol and external
// port.
type frontendKey struct {
	vip   string
	ipv6  bool
	proto Protocol
	port  uint16
}

func frontendKeys(lb *LoadBalancer) []frontendKey {
	vips := lb.FrontendVIPs
	if len(vips) == 0 {
		vips = []string{""}
	}
	var keys []frontendKey
	for _, v := range vips {
		if a, err := netip.ParseAddr(v); err == nil {
			v = a.String()
		}
		for _, pm := range lb.PortMappings {
			keys = append(keys, frontendKey{vip: v, ipv6: v == "" && lb.Flags&LoadBalancerFlagsIPv6 != 0, proto: pm.Protocol, port: pm.ExternalPort})
		}
	}
	return keys
}

func (s *Simulator) validateFrontendFree(op Op, self, label string, lb *LoadBalancer) error {
	want := frontendKeys(lb)
	for _, id := range sortedIDs(s.lbs) {
		if id == self {
			continue
		}
		for _, k := range frontendKeys(s.lbs[id]) {
			for _, w := range want {
				if k == w {
					return s.frontendTaken(op, self, label, id)
				}
			}
		}
	}
	return nil
}

// frontendTaken is the error for a frontend load balancer holder already
// serves. A create of a frontend that HNS restored from its backup after
// a restart fails with ERROR_ALREADY_EXISTS (kubernetes issue 139519,
// "hcnCreateLoadBalancer failed in Win32: Cannot create a file when that
// file already exists. (0xb7)"); any other taken frontend with
// HCN_E_PORT_ALREADY_EXISTS (kubernetes PR 137530: an orphaned load
// balancer holds the port, "The specified port already exists.
// (0x803b0013)"). s.mu held.
func (s *Simulator) frontendTaken(op Op, self, label, holder string) error {
	if self == "" && s.restoredLBs[holder] {
		return codedError(op, CodeAlreadyExists, label, "load balancer %s (restored after an HNS restart) already serves this frontend", holder)
	}
	return codedError(op, CodePortAlreadyExists, label, "the specified port already exists: frontend is served by load balancer %s", holder)
}

// GetLoadBalancer implements Interface. Not found is hnslib's
// hcn.LoadBalancerNotFoundError (hcn/hcnloadbalancer.go
// GetLoadBalancerByID).
func (s *Simulator) GetLoadBalancer(ctx context.Context, id string) (*LoadBalancer, error) {
	var out *LoadBalancer
	err := s.call(ctx, OpGetLoadBalancer, id, func() error {
		lb, ok := s.lbs[strings.ToUpper(id)]
		if !ok {
			return newError(OpGetLoadBalancer, KindNotFound, id, "no such load balancer")
		}
		out = cloneLoadBalancer(lb)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// ListLoadBalancers implements Interface.
func (s *Simulator) ListLoadBalancers(ctx context.Context) ([]LoadBalancer, error) {
	var out []LoadBalancer
	err := s.call(ctx, OpListLoadBalancers, "", func() error {
		for _, id := range sortedIDs(s.lbs) {
			out = append(out, *cloneLoadBalancer(s.lbs[id]))
		}
		return nil
	})
	return out, err
}

// DeleteLoadBalancer implements Interface. An unknown ID is not found:
// kube-proxy looks a load balancer up before deleting it (hnslib
// hcn.GetLoadBalancerByID, hcn.LoadBalancerNotFoundError) and returns
// silently when it is gone (pkg/proxy/winkernel/hns.go
// deleteLoadBalancer). unsourced: the code hcnDeleteLoadBalancer itself
// answers (hnslib hcn/hcnloadbalancer.go deleteLoadBalancer does not
// open it first).
func (s *Simulator) DeleteLoadBalancer(ctx context.Context, id string) error {
	return s.call(ctx, OpDeleteLoadBalancer, id, func() error {
		id = strings.ToUpper(id)
		if _, ok := s.lbs[id]; !ok {
			return newError(OpDeleteLoadBalancer, KindNotFound, id, "no such load balancer")
		}
		delete(s.lbs, id)
		delete(s.restoredLBs, id)
		return nil
	})
}
