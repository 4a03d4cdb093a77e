package agent

import (
	"cmp"
	"net/netip"
	"slices"

	"github.com/nodenet/nodenet/agent/status"
	"github.com/nodenet/nodenet/proxy"
)

// ServicesOf renders what the proxy last programmed (st, nil before the
// first sync) for the local API, sorted by name then family.
func ServicesOf(st *proxy.State) status.Services {
	out := status.Services{Ports: []status.ServicePort{}}
	if st == nil {
		return out
	}
	for _, sp := range st.ServicePorts {
		p := status.ServicePort{
			Name:                sp.Key.ServicePortName.String(),
			Family:              string(sp.Key.Family),
			Type:                string(sp.Type),
			Port:                int(sp.Port),
			NodePort:            int(sp.NodePort),
			ExternalIPs:         addrStrings(sp.ExternalIPs),
			LoadBalancerIPs:     addrStrings(sp.LoadBalancerIPs),
			InternalPolicyLocal: sp.InternalPolicyLocal,
			ExternalPolicyLocal: sp.ExternalPolicyLocal,
			TrafficDistribution: sp.TrafficDistribution,
			Topology:            sp.Topology,
			InternalEndpoints:   endpointsOf(sp.InternalEndpoints),
			HasEndpoints:        sp.HasEndpoints,
		}
		if sp.ClusterIP.IsValid() {
			p.ClusterIP = sp.ClusterIP.String()
		}
		if sp.SessionAffinity > 0 {
			p.SessionAffinity = "ClientIP " + sp.SessionAffinity.String()
		}
		if sp.UsesExternalFrontends() {
			p.ExternalEndpoints = endpointsOf(sp.ExternalEndpoints)
		}
		out.Ports = append(out.Ports, p)
	}
	slices.SortFunc(out.Ports, func(a, b status.ServicePort) int {
		return cmp.Or(cmp.Compare(a.Name, b.Name), cmp.Compare(a.Family, b.Family))
	})
	return out
}

func endpointsOf(eps []proxy.Endpoint) []status.Endpoint {
	out := make([]status.Endpoint, 0, len(eps))
	for _, e := range eps {
		out = append(out, status.Endpoint{
			Address:     e.AddrPort().String(),
			Node:        e.NodeName,
			Local:       e.Local,
			Ready:       e.Ready,
			Terminating: e.Terminating,
		})
	}
	return out
}

func addrStrings(addrs []netip.Addr) []string {
	var out []string
	for _, a := range addrs {
		out = append(out, a.String())
	}
	return out
}
