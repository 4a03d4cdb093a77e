package hns

import (
	"fmt"
	"strings"
)

// Dump renders the whole simulated host as text, in creation order, in the
// spirit of `hnsdiag list all -d`: what an operator would want to read when
// a test fails or `nodenet-agent --dataplane=sim` shows what Windows would
// get.
func (s *Simulator) Dump() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var b strings.Builder
	fmt.Fprintf(&b, "HNS %s  features: %s\n", s.opts.Version, featureList(s.features))
	b.WriteString("Networks:\n")
	for _, id := range sortedIDs(s.networks) {
		s.dumpNetwork(&b, s.networks[id])
	}
	b.WriteString("Endpoints:\n")
	for _, id := range sortedIDs(s.endpoints) {
		s.dumpEndpoint(&b, s.endpoints[id])
	}
	b.WriteString("Namespaces:\n")
	for _, id := range sortedIDs(s.namespaces) {
		ns := s.namespaces[id]
		fmt.Fprintf(&b, "  %s  %s  endpoints: %s\n", ns.ID, ns.Type, orNone(strings.Join(ns.EndpointIDs, ", ")))
	}
	b.WriteString("LoadBalancers:\n")
	for _, id := range sortedIDs(s.lbs) {
		s.dumpLoadBalancer(&b, s.lbs[id])
	}
	return b.String()
}

func featureList(f Features) string {
	var out []string
	for _, x := range []struct {
		on   bool
		name string
	}{
		{f.DSR, "DSR"}, {f.SessionAffinity, "SessionAffinity"}, {f.IPv6DualStack, "IPv6DualStack"},
		{f.RemoteSubnet, "RemoteSubnet"}, {f.HostRoute, "HostRoute"}, {f.VxlanPort, "VxlanPort"},
		{f.ModifyLoadbalancer, "ModifyLoadbalancer"},
	} {
		if x.on {
			out = append(out, x.name)
		}
	}
	return orNone(strings.Join(out, " "))
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}

func (s *Simulator) dumpNetwork(b *strings.Builder, n *Network) {
	flags := ""
	if n.Flags&NetworkFlagsEnableNonPersistent != 0 {
		flags = "  flags=EnableNonPersistent"
	}
	fmt.Fprintf(b, "  %s  %s  %s%s\n", n.ID, n.Name, n.Type, flags)
	for _, sn := range n.Subnets() {
		fmt.Fprintf(b, "    subnet %s", sn.IpAddressPrefix)
		for _, p := range sn.Policies {
			if p.Isolation != nil {
				fmt.Fprintf(b, "  %s=%d", p.Type, p.Isolation.IsolationID)
			}
		}
		for _, r := range sn.Routes {
			fmt.Fprintf(b, "  route %s via %s", r.DestinationPrefix, r.NextHop)
		}
		b.WriteString("\n")
	}
	for _, p := range n.Policies {
		fmt.Fprintf(b, "    policy %s\n", describeNetworkPolicy(p))
	}
}

func describeNetworkPolicy(p NetworkPolicy) string {
	switch {
	case p.NetAdapterName != nil:
		return fmt.Sprintf("NetAdapterName %s", p.NetAdapterName.NetworkAdapterName)
	case p.DrMacAddress != nil:
		return fmt.Sprintf("DrMacAddress %s", p.DrMacAddress.Address)
	case p.ProviderAddress != nil:
		return fmt.Sprintf("ProviderAddress %s", p.ProviderAddress.ProviderAddress)
	case p.RemoteSubnetRoute != nil:
		r := p.RemoteSubnetRoute
		return fmt.Sprintf("RemoteSubnetRoute %s -> PA %s  DRMAC %s  VSID %d", r.DestinationPrefix, r.ProviderAddress, r.DistributedRouterMacAddress, r.IsolationID)
	case p.VxlanPort != nil:
		return fmt.Sprintf("VxlanPort %d", p.VxlanPort.Port)
	}
	return fmt.Sprintf("%s %s", p.Type, string(p.Raw))
}

func (s *Simulator) dumpEndpoint(b *strings.Builder, ep *Endpoint) {
	kind := "local"
	if ep.IsRemote() {
		kind = "remote"
	}
	net := ep.HostComputeNetwork
	if n := s.networks[net]; n != nil {
		net = n.Name
	}
	fmt.Fprintf(b, "  %s  %s  %s  %s  %s", ep.ID, net, strings.Join(ep.IPs(), ","), ep.MacAddress, kind)
	if ep.Name != "" {
		fmt.Fprintf(b, "  name=%s", ep.Name)
	}
	if ep.HostComputeNamespace != "" {
		fmt.Fprintf(b, "  namespace=%s", ep.HostComputeNamespace)
	}
	b.WriteString("\n")
	for _, p := range ep.Policies {
		fmt.Fprintf(b, "    policy %s\n", describeEndpointPolicy(p))
	}
}

func describeEndpointPolicy(p EndpointPolicy) string {
	switch {
	case p.OutboundNAT != nil:
		o := p.OutboundNAT
		s := "OutBoundNAT"
		if o.VirtualIP != "" {
			s += " vip=" + o.VirtualIP
		}
		if len(o.Exceptions) > 0 {
			s += " exceptions=" + strings.Join(o.Exceptions, ",")
		}
		if len(o.Destinations) > 0 {
			s += " destinations=" + strings.Join(o.Destinations, ",")
		}
		return s
	case p.SDNRoute != nil:
		return fmt.Sprintf("SDNRoute %s nexthop=%s encap=%t", p.SDNRoute.DestinationPrefix, orNone(p.SDNRoute.NextHop), p.SDNRoute.NeedEncap)
	case p.ProviderAddress != nil:
		return fmt.Sprintf("ProviderAddress %s", p.ProviderAddress.ProviderAddress)
	case p.PortMapping != nil:
		pm := p.PortMapping
		return fmt.Sprintf("PortMapping %s %s:%d -> %d", pm.Protocol, orNone(pm.VIP), pm.ExternalPort, pm.InternalPort)
	case p.EncapOverhead != nil:
		return fmt.Sprintf("EncapOverhead %d", p.EncapOverhead.Overhead)
	case p.ACL != nil:
		a := p.ACL
		return fmt.Sprintf("ACL %s %s priority=%d protocols=%s local=%s:%s remote=%s:%s", a.Direction, a.Action, a.Priority,
			orAny(a.Protocols), orAny(a.LocalAddresses), orAny(a.LocalPorts), orAny(a.RemoteAddresses), orAny(a.RemotePorts))
	}
	return fmt.Sprintf("%s %s", p.Type, string(p.Raw))
}

func (s *Simulator) dumpLoadBalancer(b *strings.Builder, lb *LoadBalancer) {
	fmt.Fprintf(b, "  %s", lb.ID)
	for _, pm := range lb.PortMappings {
		vips := "<host addresses>"
		if len(lb.FrontendVIPs) > 0 {
			vips = strings.Join(lb.FrontendVIPs, ",")
		}
		fmt.Fprintf(b, "  %s:%d/%s -> %d  distribution=%s  portFlags=%s", vips, pm.ExternalPort, pm.Protocol, pm.InternalPort,
			distributionName(pm.DistributionType), portFlagNames(pm.Flags))
	}
	fmt.Fprintf(b, "  flags=%s  sourceVIP=%s\n", lbFlagNames(lb.Flags), orNone(lb.SourceVIP))
	for _, id := range lb.HostComputeEndpoints {
		desc := id + " (missing: degraded)"
		if ep := s.endpoints[id]; ep != nil {
			kind := "local"
			if ep.IsRemote() {
				kind = "remote"
			}
			desc = fmt.Sprintf("%s (%s %s)", id, strings.Join(ep.IPs(), ","), kind)
		}
		fmt.Fprintf(b, "    backend %s\n", desc)
	}
}

func distributionName(d Distribution) string {
	switch d {
	case DistributionNone:
		return "None"
	case DistributionSourceIPProtocol:
		return "SourceIPProtocol"
	case DistributionSourceIP:
		return "SourceIP"
	}
	return fmt.Sprintf("%d", d)
}

func portFlagNames(f PortMappingFlags) string {
	return flagNames(uint32(f), []string{"ILB", "LocalRoutedVIP", "UseMux", "PreserveDIP", "VipExternalIP"})
}

func lbFlagNames(f LoadBalancerFlags) string {
	return flagNames(uint32(f), []string{"DSR", "IPv6"})
}

func flagNames(v uint32, names []string) string {
	var out []string
	for i, n := range names {
		if v&(1<<i) != 0 {
			out = append(out, n)
			v &^= 1 << i
		}
	}
	if v != 0 {
		out = append(out, fmt.Sprintf("%#x", v))
	}
	return orNone(strings.Join(out, "|"))
}

func orAny(s string) string {
	if s == "" {
		return "any"
	}
	return s
}
