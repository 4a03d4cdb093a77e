package brain

import (
	"net/netip"
	"slices"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	"github.com/nodenet/nodenet/proxy"
)

// defaultAffinityTimeout is the API's default ClientIP affinity timeout.
const defaultAffinityTimeout = 10800 * time.Second

// maxAffinityTimeout is the API's upper bound (one day).
const maxAffinityTimeout = 86400 * time.Second

// computer turns one service and its slices into ServicePorts. It holds
// what a Snapshot fixed for all services (this node's name and zone).
type computer struct {
	nodeName string
	zone     string
	families []proxy.IPFamily
	dsr      bool
	log      klog.Logger
	probs    *problems
}

func (c *computer) runs(f proxy.IPFamily) bool { return slices.Contains(c.families, f) }

// familyFrontends are a service's addresses of one family.
type familyFrontends struct {
	family       proxy.IPFamily
	clusterIP    netip.Addr
	externalIPs  []netip.Addr
	lbIPs        []netip.Addr
	sourceRanges []netip.Prefix
}

// portSpec is one valid spec.ports entry.
type portSpec struct {
	name     string
	protocol proxy.Protocol
	port     uint16
	nodePort uint16
}

// service computes the ServicePorts of one service; nil when the service
// is absent or not proxied.
func (c *computer) service(svc *v1.Service, slices []*discoveryv1.EndpointSlice) []*proxy.ServicePort {
	if svc == nil || !proxied(svc) {
		return nil
	}
	fronts := c.frontends(svc)
	if len(fronts) == 0 {
		return nil
	}
	ports := c.ports(svc)
	if len(ports) == 0 {
		return nil
	}
	common := c.common(svc)
	eps := c.endpoints(svc, slices, ports)
	// dsrLB: KEP-5100's endpoint rules apply (applyDSR).
	dsrLB := c.dsr && common.Type == proxy.LoadBalancer
	name := types.NamespacedName{Namespace: svc.Namespace, Name: svc.Name}
	block := make([]proxy.ServicePort, len(fronts)*len(ports))
	out := make([]*proxy.ServicePort, 0, len(block))
	for _, f := range fronts {
		for _, p := range ports {
			sp := &block[len(out)]
			*sp = common
			sp.Key = proxy.ServicePortKey{
				ServicePortName: proxy.ServicePortName{NamespacedName: name, Port: p.name, Protocol: p.protocol},
				Family:          f.family,
			}
			sp.ClusterIP = f.clusterIP
			sp.Port = p.port
			sp.NodePort = p.nodePort
			sp.ExternalIPs = f.externalIPs
			sp.LoadBalancerIPs = f.lbIPs
			sp.LoadBalancerSourceRanges = f.sourceRanges
			portEps := eps[portKey{name: p.name, protocol: p.protocol, family: f.family}]
			if dsrLB {
				applyDSR(sp, portEps)
			}
			categorize(sp, portEps)
			out = append(out, sp)
		}
	}
	return out
}

// proxied reports whether a Service gets frontends at all: not
// ExternalName, not headless, not claimed by another proxy.
func proxied(svc *v1.Service) bool {
	if svc.Spec.Type == v1.ServiceTypeExternalName {
		return false
	}
	if svc.Spec.ClusterIP == "" || svc.Spec.ClusterIP == v1.ClusterIPNone {
		return false
	}
	_, other := svc.Labels[labelServiceProxyName]
	return !other
}

// common fills the ServicePort fields shared by all ports and families.
func (c *computer) common(svc *v1.Service) proxy.ServicePort {
	sp := proxy.ServicePort{Type: proxy.ClusterIP}
	switch svc.Spec.Type {
	case "", v1.ServiceTypeClusterIP:
	case v1.ServiceTypeNodePort:
		sp.Type = proxy.NodePort
	case v1.ServiceTypeLoadBalancer:
		sp.Type = proxy.LoadBalancer
	default:
		c.probs.add(kindService, svc, "unknown type %q, treated as ClusterIP", svc.Spec.Type)
	}

	switch svc.Spec.SessionAffinity {
	case "", v1.ServiceAffinityNone:
	case v1.ServiceAffinityClientIP:
		sp.SessionAffinity = defaultAffinityTimeout
		if cfg := svc.Spec.SessionAffinityConfig; cfg != nil && cfg.ClientIP != nil && cfg.ClientIP.TimeoutSeconds != nil {
			t := time.Duration(*cfg.ClientIP.TimeoutSeconds) * time.Second
			if t > 0 && t <= maxAffinityTimeout {
				sp.SessionAffinity = t
			} else {
				c.probs.add(kindService, svc, "session affinity timeout %ds out of range, using %s", *cfg.ClientIP.TimeoutSeconds, defaultAffinityTimeout)
			}
		}
	default:
		c.probs.add(kindService, svc, "unknown session affinity %q, using none", svc.Spec.SessionAffinity)
	}

	sp.InternalPolicyLocal = svc.Spec.InternalTrafficPolicy != nil && *svc.Spec.InternalTrafficPolicy == v1.ServiceInternalTrafficPolicyLocal
	// Like kube-proxy, eTP only means something for a service reachable
	// from outside the cluster.
	externallyAccessible := sp.Type != proxy.ClusterIP || len(svc.Spec.ExternalIPs) > 0
	sp.ExternalPolicyLocal = externallyAccessible && svc.Spec.ExternalTrafficPolicy == v1.ServiceExternalTrafficPolicyLocal
	if sp.Type == proxy.LoadBalancer && sp.ExternalPolicyLocal {
		switch hc := svc.Spec.HealthCheckNodePort; {
		case hc > 0 && hc <= 65535:
			sp.HealthCheckNodePort = uint16(hc)
		case hc == 0:
			c.probs.add(kindService, svc, "eTP Local LoadBalancer without healthCheckNodePort")
		default:
			c.probs.add(kindService, svc, "healthCheckNodePort %d out of range", hc)
		}
	}
	sp.PreserveDestination = svc.Annotations[annotationPreserveDestination] == "true"
	sp.TrafficDistribution = deref(svc.Spec.TrafficDistribution, "")
	switch sp.TrafficDistribution {
	case "", v1.ServiceTrafficDistributionPreferClose, v1.ServiceTrafficDistributionPreferSameZone, v1.ServiceTrafficDistributionPreferSameNode:
	default:
		// The API server rejects other values today; manifests in files
		// are not validated, and a newer server may add one.
		c.probs.add(kindService, svc, "unknown trafficDistribution %q: only the slices' hints count", sp.TrafficDistribution)
	}
	return sp
}

// frontends returns the service's addresses grouped by family, for the
// families this node runs that have a cluster IP, in c.families' order.
func (c *computer) frontends(svc *v1.Service) []*familyFrontends {
	var fs frontendsByFamily
	if !c.clusterIPs(svc, &fs) {
		return nil
	}
	c.externalIPs(svc, &fs)
	c.loadBalancerIPs(svc, &fs)
	allowAll := c.sourceRanges(svc, &fs)
	out := make([]*familyFrontends, 0, 2)
	for _, f := range c.families {
		i := familyIndex(f)
		if ff := fs[i]; ff != nil {
			if allowAll[i] {
				ff.sourceRanges = nil
			}
			out = append(out, ff)
		}
	}
	return out
}

// frontendsByFamily holds a service's frontends while frontends gathers
// them, IPv4 then IPv6: nil for a family without a cluster IP, whose
// other addresses are dropped.
type frontendsByFamily [2]*familyFrontends

func familyIndex(f proxy.IPFamily) int {
	if f == proxy.IPv4 {
		return 0
	}
	return 1
}

// of returns the frontends of a's family.
func (fs *frontendsByFamily) of(a netip.Addr) *familyFrontends {
	return fs[familyIndex(proxy.FamilyOf(a))]
}

// clusterIPs starts fs with the cluster IPs of the families this node
// runs, one per family; false when there is none.
func (c *computer) clusterIPs(svc *v1.Service, fs *frontendsByFamily) bool {
	clusterIPs := svc.Spec.ClusterIPs
	if len(clusterIPs) == 0 {
		clusterIPs = []string{svc.Spec.ClusterIP}
	}
	found := false
	for _, s := range clusterIPs {
		if s == "" || s == v1.ClusterIPNone {
			continue
		}
		a, err := parseAddr(s)
		if err != nil {
			c.probs.add(kindService, svc, "invalid cluster IP %q", s)
			continue
		}
		f := proxy.FamilyOf(a)
		if fs.of(a) != nil {
			c.probs.add(kindService, svc, "second %s cluster IP %s ignored", f, a)
			continue
		}
		if !c.runs(f) {
			c.probs.dropFamily(svc, string(f))
			continue
		}
		fs[familyIndex(f)] = &familyFrontends{family: f, clusterIP: a}
		found = true
	}
	return found
}

// externalIPs adds the service's external IPs to fs.
func (c *computer) externalIPs(svc *v1.Service, fs *frontendsByFamily) {
	for _, s := range svc.Spec.ExternalIPs {
		if strings.TrimSpace(s) == "" {
			continue
		}
		a, err := parseAddr(s)
		if err != nil {
			c.probs.add(kindService, svc, "invalid external IP %q", s)
			continue
		}
		if ff := fs.of(a); ff != nil && !slices.Contains(ff.externalIPs, a) {
			ff.externalIPs = append(ff.externalIPs, a)
		}
	}
}

// loadBalancerIPs adds the service's load-balancer ingress IPs to fs.
func (c *computer) loadBalancerIPs(svc *v1.Service, fs *frontendsByFamily) {
	for _, ing := range svc.Status.LoadBalancer.Ingress {
		// Hostname-only ingresses and proxy-mode load balancers (which
		// send traffic to node ports, not to the VIP) get no rules here.
		if ing.IP == "" || (ing.IPMode != nil && *ing.IPMode != v1.LoadBalancerIPModeVIP) {
			continue
		}
		a, err := parseAddr(ing.IP)
		if err != nil {
			c.probs.add(kindService, svc, "invalid load-balancer ingress IP %q", ing.IP)
			continue
		}
		if ff := fs.of(a); ff != nil && !slices.Contains(ff.lbIPs, a) {
			ff.lbIPs = append(ff.lbIPs, a)
		}
	}
}

// sourceRanges adds the service's loadBalancerSourceRanges to fs.
// allowAll[i] is true when fs[i] has a /0, which allows every source: the
// same as no ranges at all.
func (c *computer) sourceRanges(svc *v1.Service, fs *frontendsByFamily) (allowAll [2]bool) {
	for _, s := range svc.Spec.LoadBalancerSourceRanges {
		// Validation has always allowed spaces around the ranges.
		s = strings.TrimSpace(s)
		if s == "" {
			continue
		}
		p, err := parsePrefix(s)
		if err != nil {
			c.probs.add(kindService, svc, "invalid loadBalancerSourceRange %q: %v", s, err)
			continue
		}
		i := familyIndex(proxy.FamilyOf(p.Addr()))
		ff := fs[i]
		if ff == nil {
			continue
		}
		if p.Bits() == 0 {
			allowAll[i] = true
		}
		if !slices.Contains(ff.sourceRanges, p) {
			ff.sourceRanges = append(ff.sourceRanges, p)
		}
	}
	return allowAll
}

// ports returns the service's valid ports; the bad ones are reported.
func (c *computer) ports(svc *v1.Service) []portSpec {
	out := make([]portSpec, 0, len(svc.Spec.Ports))
	for _, p := range svc.Spec.Ports {
		proto, ok := protocol(p.Protocol)
		if !ok {
			c.probs.add(kindService, svc, "port %q: unknown protocol %q", p.Name, p.Protocol)
			continue
		}
		if p.Port <= 0 || p.Port > 65535 {
			c.probs.add(kindService, svc, "port %q: port %d out of range", p.Name, p.Port)
			continue
		}
		if slices.ContainsFunc(out, func(q portSpec) bool { return q.name == p.Name && q.protocol == proto }) {
			c.probs.add(kindService, svc, "port %q/%s listed twice", p.Name, proto)
			continue
		}
		ps := portSpec{name: p.Name, protocol: proto, port: uint16(p.Port)}
		if p.NodePort < 0 || p.NodePort > 65535 {
			c.probs.add(kindService, svc, "port %q: node port %d out of range, ignored", p.Name, p.NodePort)
		} else {
			ps.nodePort = uint16(p.NodePort)
		}
		out = append(out, ps)
	}
	return out
}

// protocol maps an API protocol to ours; empty is the API default, TCP.
func protocol(p v1.Protocol) (proxy.Protocol, bool) {
	switch p {
	case "", v1.ProtocolTCP:
		return proxy.TCP, true
	case v1.ProtocolUDP:
		return proxy.UDP, true
	case v1.ProtocolSCTP:
		return proxy.SCTP, true
	}
	return "", false
}
