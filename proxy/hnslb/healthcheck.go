package hnslb

import (
	"net/netip"
	"slices"

	"github.com/nodenet/nodenet/hns"
	"github.com/nodenet/nodenet/proxy"
)

// healthChecks plans, for Options.ForwardHealthCheckVIP, the load
// balancers that forward a LoadBalancer service's health-check node port
// (the proxy's healthz port when it has none) on each of its ingress IPs
// to the host, where the health-check server listens: what kube-proxy's
// forwardHealthCheckVip does, so a cloud load balancer probing the
// ingress IP reaches it. Every port of a service shares them, so they
// belong to the service. Like kube-proxy, they are left out while no
// endpoint may serve the service's external traffic, and they never use
// DSR; unlike kube-proxy (which uses the port's protocol) they are TCP,
// as the health checks are HTTP.
func (p *planner) healthChecks(ports []*proxy.ServicePort) map[frontend]*lbSpec {
	out := map[frontend]*lbSpec{}
	for _, sp := range ports {
		if !p.facts.families[sp.Key.Family] || len(sp.LoadBalancerIPs) == 0 || !servesExternally(sp) {
			continue
		}
		port := sp.HealthCheckNodePort
		if port == 0 {
			port = p.opts.HealthzPort
		}
		if port == 0 {
			continue
		}
		for _, ip := range sp.LoadBalancerIPs {
			s := &lbSpec{
				kind:       kindHealthCheck,
				service:    proxy.ServicePortName{NamespacedName: sp.Key.NamespacedName},
				targetPort: port,
				sourceVIP:  p.facts.sourceVIP[sp.Key.Family],
				backends:   []backend{{ip: p.hostAddr(sp.Key.Family), kind: backendHost}},
			}
			if sp.Key.Family == proxy.IPv6 {
				s.flags |= hns.LoadBalancerFlagsIPv6
			}
			if sp.PreserveDestination && p.facts.features.DSR {
				s.portFlags |= hns.PortMappingFlagsUseMux | hns.PortMappingFlagsPreserveDIP
			}
			out[frontend{vip: ip, proto: hns.ProtocolTCP, port: port}] = s
		}
	}
	return out
}

// servesExternally approximates kube-proxy's "not all endpoints are
// terminating or non-serving" with what the brain hands over: some
// endpoint external traffic may use is ready.
func servesExternally(sp *proxy.ServicePort) bool {
	for _, ep := range sp.ExternalEndpoints {
		if ep.Ready {
			return true
		}
	}
	return false
}

// hostAddr is the address of the host's endpoint (the source VIP, or the
// l2bridge host endpoint at the same reserved offset).
func (p *planner) hostAddr(fam proxy.IPFamily) netip.Addr {
	for _, a := range p.facts.local.Reserved {
		if proxy.FamilyOf(a) == fam {
			return a
		}
	}
	return p.facts.local.SourceVIP
}

// servicesOf groups the ports of st (keys, sorted) by service and
// family, for the health-check owners, and returns the owners in order.
func servicesOf(st *proxy.State, keys []proxy.ServicePortKey) (map[owner][]*proxy.ServicePort, []owner) {
	out := map[owner][]*proxy.ServicePort{}
	var order []owner
	for _, k := range keys {
		if sp := st.ServicePorts[k]; sp != nil {
			o := healthOwner(k)
			if _, ok := out[o]; !ok {
				order = append(order, o)
			}
			out[o] = append(out[o], sp)
		}
	}
	return out, order
}

// replanHealthChecks re-plans the health-check owners of the services
// whose ports changed; that needs all their ports, so the state is
// grouped once.
func (r *round) replanHealthChecks(changed []proxy.ServicePortKey) {
	touched := map[owner]bool{}
	for _, k := range changed {
		touched[healthOwner(k)] = true
	}
	var keys []proxy.ServicePortKey
	for k := range r.st.ServicePorts {
		if touched[healthOwner(k)] {
			keys = append(keys, k)
		}
	}
	slices.SortFunc(keys, comparePortKeys)
	byService, _ := servicesOf(r.st, keys)
	for o := range touched {
		if ports := byService[o]; len(ports) > 0 {
			r.b.store.Set(o, r.planner.healthChecks(ports))
		} else {
			r.b.store.Delete(o)
		}
	}
}
