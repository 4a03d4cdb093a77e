package hns

import "slices"

// Deep copies: the simulator hands out and stores copies so neither side
// can change the other's objects.

func clonePtr[T any](p *T) *T {
	if p == nil {
		return nil
	}
	v := *p
	return &v
}

func cloneNetworkPolicy(p NetworkPolicy) NetworkPolicy {
	p.NetAdapterName = clonePtr(p.NetAdapterName)
	p.DrMacAddress = clonePtr(p.DrMacAddress)
	p.ProviderAddress = clonePtr(p.ProviderAddress)
	p.RemoteSubnetRoute = clonePtr(p.RemoteSubnetRoute)
	p.VxlanPort = clonePtr(p.VxlanPort)
	p.Raw = slices.Clone(p.Raw)
	return p
}

func cloneEndpointPolicy(p EndpointPolicy) EndpointPolicy {
	if p.OutboundNAT != nil {
		o := *p.OutboundNAT
		o.Exceptions = slices.Clone(o.Exceptions)
		o.Destinations = slices.Clone(o.Destinations)
		p.OutboundNAT = &o
	}
	p.SDNRoute = clonePtr(p.SDNRoute)
	p.ProviderAddress = clonePtr(p.ProviderAddress)
	p.PortMapping = clonePtr(p.PortMapping)
	p.EncapOverhead = clonePtr(p.EncapOverhead)
	p.ACL = clonePtr(p.ACL)
	p.Raw = slices.Clone(p.Raw)
	return p
}

func cloneDNS(d DNS) DNS {
	d.Search = slices.Clone(d.Search)
	d.ServerList = slices.Clone(d.ServerList)
	d.Options = slices.Clone(d.Options)
	return d
}

func cloneNetwork(n *Network) *Network {
	c := *n
	c.Policies = nil
	for _, p := range n.Policies {
		c.Policies = append(c.Policies, cloneNetworkPolicy(p))
	}
	c.MacPool.Ranges = slices.Clone(n.MacPool.Ranges)
	c.DNS = cloneDNS(n.DNS)
	c.Ipams = nil
	for _, ipam := range n.Ipams {
		ci := ipam
		ci.Subnets = nil
		for _, sn := range ipam.Subnets {
			cs := sn
			cs.Routes = slices.Clone(sn.Routes)
			cs.Policies = nil
			for _, sp := range sn.Policies {
				sp.Isolation = clonePtr(sp.Isolation)
				sp.Raw = slices.Clone(sp.Raw)
				cs.Policies = append(cs.Policies, sp)
			}
			ci.Subnets = append(ci.Subnets, cs)
		}
		c.Ipams = append(c.Ipams, ci)
	}
	return &c
}

func cloneEndpoint(e *Endpoint) *Endpoint {
	c := *e
	c.Policies = nil
	for _, p := range e.Policies {
		c.Policies = append(c.Policies, cloneEndpointPolicy(p))
	}
	c.IpConfigurations = slices.Clone(e.IpConfigurations)
	c.DNS = cloneDNS(e.DNS)
	c.Routes = slices.Clone(e.Routes)
	return &c
}

func cloneNamespace(n *Namespace) *Namespace {
	c := *n
	c.EndpointIDs = slices.Clone(n.EndpointIDs)
	return &c
}

func cloneLoadBalancer(lb *LoadBalancer) *LoadBalancer {
	c := *lb
	c.HostComputeEndpoints = slices.Clone(lb.HostComputeEndpoints)
	c.FrontendVIPs = slices.Clone(lb.FrontendVIPs)
	c.PortMappings = slices.Clone(lb.PortMappings)
	return &c
}
