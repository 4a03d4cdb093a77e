package hnslb

import (
	"net/netip"
	"slices"
	"strings"

	"github.com/nodenet/nodenet/hns"
)

// appliedLB is a load balancer HNS holds for one of our frontends.
type appliedLB struct {
	id string
	// lb is its definition as HNS returned it; nil when unknown (a write
	// whose outcome HNS did not tell), which makes the next write
	// unconditional.
	lb *hns.LoadBalancer
}

// hnsLB builds the HNS load balancer for spec with the given endpoint IDs.
func hnsLB(fe frontend, s *lbSpec, ids []string) *hns.LoadBalancer {
	lb := &hns.LoadBalancer{
		HostComputeEndpoints: ids,
		PortMappings: []hns.PortMapping{{
			Protocol:         fe.proto,
			InternalPort:     s.targetPort,
			ExternalPort:     fe.port,
			DistributionType: s.dist,
			Flags:            s.portFlags,
		}},
		SchemaVersion: hns.V2,
		Flags:         s.flags,
	}
	if fe.vip.IsValid() {
		lb.FrontendVIPs = []string{fe.vip.String()}
	}
	if s.sourceVIP.IsValid() {
		lb.SourceVIP = s.sourceVIP.String()
	}
	return lb
}

// frontendOf returns the frontend of a load balancer of the shape we
// create: at most one VIP and one port mapping.
func frontendOf(lb *hns.LoadBalancer) (frontend, bool) {
	if len(lb.FrontendVIPs) > 1 || len(lb.PortMappings) != 1 {
		return frontend{}, false
	}
	pm := lb.PortMappings[0]
	fe := frontend{proto: pm.Protocol, port: pm.ExternalPort}
	if len(lb.FrontendVIPs) == 1 {
		vip, err := netip.ParseAddr(lb.FrontendVIPs[0])
		if err != nil {
			return frontend{}, false
		}
		fe.vip = vip.Unmap()
	} else {
		fe.v6 = lb.Flags&hns.LoadBalancerFlagsIPv6 != 0
	}
	return fe, true
}

// sameLB reports whether HNS's load balancer have is what want asks for,
// in HNS's terms: address spelling, ID case and endpoint order don't
// matter.
func sameLB(have, want *hns.LoadBalancer) bool {
	if have.Flags != want.Flags || !slices.Equal(have.PortMappings, want.PortMappings) {
		return false
	}
	if !sameAddrs(have.FrontendVIPs, want.FrontendVIPs) || !sameAddrs(optional(have.SourceVIP), optional(want.SourceVIP)) {
		return false
	}
	return slices.Equal(normIDs(have.HostComputeEndpoints), normIDs(want.HostComputeEndpoints))
}

func optional(s string) []string {
	if s == "" {
		return nil
	}
	return []string{s}
}

func sameAddrs(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		x, errA := netip.ParseAddr(a[i])
		y, errB := netip.ParseAddr(b[i])
		if errA != nil || errB != nil || x.Unmap() != y.Unmap() {
			return false
		}
	}
	return true
}

func normIDs(ids []string) []string {
	out := make([]string, len(ids))
	for i, id := range ids {
		out[i] = strings.ToUpper(id)
	}
	slices.Sort(out)
	return out
}

// usesAny reports whether lb has one of ids (upper case) as a backend.
func usesAny(lb *hns.LoadBalancer, ids map[string]bool) bool {
	if lb == nil || len(ids) == 0 {
		return false
	}
	for _, id := range lb.HostComputeEndpoints {
		if ids[strings.ToUpper(id)] {
			return true
		}
	}
	return false
}

// ownership says which HNS objects are ours to change or delete; see the
// package documentation.
type ownership struct {
	serviceCIDRs []netip.Prefix
	// addrs are this node's addresses and every VIP (cluster, external
	// and load-balancer IP) of the current services.
	addrs map[netip.Addr]bool
	// remoteIDs are our remote endpoints (upper case).
	remoteIDs map[string]bool
}

// lb reports whether a load balancer is ours.
func (o *ownership) lb(lb *hns.LoadBalancer) bool {
	if len(lb.FrontendVIPs) == 0 {
		return true // every node address: a node port
	}
	for _, s := range lb.FrontendVIPs {
		vip, err := netip.ParseAddr(s)
		if err != nil {
			continue
		}
		vip = vip.Unmap()
		if o.addrs[vip] || inAny(o.serviceCIDRs, vip) {
			return true
		}
	}
	return usesAny(lb, o.remoteIDs)
}
