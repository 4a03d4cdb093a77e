package hnsendpoint

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"sort"
	"strings"

	"github.com/nodenet/nodenet/cni"
	"github.com/nodenet/nodenet/config"
	"github.com/nodenet/nodenet/hns"
)

// DefaultMACPrefix is the first two bytes of the MACs Add derives from pod
// IPs: win-overlay's default endpointMacPrefix.
const DefaultMACPrefix = "0E-2A"

// managedPolicies are the endpoint policy types Add sets. Check and the
// reuse decision in Add compare only these: others (a network policy
// agent's ACLs, policies HNS adds itself) are somebody else's.
var managedPolicies = map[hns.EndpointPolicyType]bool{
	hns.EndpointPolicyOutBoundNAT:     true,
	hns.EndpointPolicySDNRoute:        true,
	hns.EndpointPolicyProviderAddress: true,
	hns.EndpointPolicyPortMapping:     true,
}

// protocols maps the runtime's portMappings protocols to HNS's numbers.
var protocols = map[string]hns.Protocol{
	"tcp": hns.ProtocolTCP,
	"udp": hns.ProtocolUDP,
}

// networkType is the HNS network type of a node network mode.
func networkType(mode config.NetworkMode) (hns.NetworkType, error) {
	switch mode {
	case config.NetworkModeOverlay:
		return hns.NetworkTypeOverlay, nil
	case config.NetworkModeL2Bridge:
		return hns.NetworkTypeL2Bridge, nil
	}
	return "", fmt.Errorf("network mode %q has no HNS network type (want %s or %s)", mode, config.NetworkModeOverlay, config.NetworkModeL2Bridge)
}

// desiredEndpoint is the endpoint Add creates for pod on network networkID.
// It is a pure function of nw, pod and the host's DSR support.
func (w *Wiring) desiredEndpoint(ctx context.Context, nw *cni.NodeNetwork, pod *cni.Pod, name, networkID string) (*hns.Endpoint, error) {
	if len(pod.Addresses) == 0 {
		return nil, fmt.Errorf("pod has no addresses")
	}
	ep := &hns.Endpoint{
		Name:               name,
		HostComputeNetwork: networkID,
		DNS:                endpointDNS(nw, pod),
		SchemaVersion:      hns.V2,
	}
	var podIPs []string
	for _, a := range pod.Addresses {
		if !a.IP.IsValid() {
			return nil, fmt.Errorf("pod address %v is not a prefix", a.IP)
		}
		ip := a.IP.Addr()
		if !a.Gateway.IsValid() || a.Gateway.Is4() != ip.Is4() {
			return nil, fmt.Errorf("pod address %s has no gateway of its family (got %v)", a.IP, a.Gateway)
		}
		ep.IpConfigurations = append(ep.IpConfigurations, hns.IPConfig{IpAddress: ip.String(), PrefixLength: uint8(a.IP.Bits())})
		ep.Routes = append(ep.Routes, hns.Route{NextHop: a.Gateway.String(), DestinationPrefix: defaultRoute(ip)})
		podIPs = append(podIPs, ip.String())
		if ep.MacAddress == "" && ip.Is4() {
			ep.MacAddress = macFromIP(w.macPrefix, ip)
		}
	}
	policies, err := w.policies(ctx, nw, pod, podIPs)
	if err != nil {
		return nil, err
	}
	ep.Policies = policies
	return ep, nil
}

// policies returns the endpoint policies for pod, derived only from nw and
// the pod (see the package doc for the upstream sources).
func (w *Wiring) policies(ctx context.Context, nw *cni.NodeNetwork, pod *cni.Pod, podIPs []string) ([]hns.EndpointPolicy, error) {
	var out []hns.EndpointPolicy

	// Everything inside the cluster and the node's own subnet keeps the
	// pod's address; the rest is SNATed to the node IP.
	var exceptions []string
	for _, list := range [][]netip.Prefix{nw.ClusterCIDRs, nw.ServiceCIDRs, nw.NodeSubnets} {
		for _, p := range list {
			if s := p.Masked().String(); !slices.Contains(exceptions, s) {
				exceptions = append(exceptions, s)
			}
		}
	}
	out = append(out, hns.EndpointPolicy{Type: hns.EndpointPolicyOutBoundNAT, OutboundNAT: &hns.OutboundNATPolicy{Exceptions: exceptions}})

	// Service traffic goes to the vSwitch, where the load balancers are.
	for _, p := range nw.ServiceCIDRs {
		out = append(out, sdnRoute(p.Masked().String()))
	}

	switch nw.Mode {
	case config.NetworkModeOverlay:
		// win-overlay's ApplyDefaultPAPolicy: the host's provider address.
		pa, ok := firstIPv4(nw.NodeIPs)
		if !ok {
			return nil, fmt.Errorf("overlay network needs the node's IPv4 address for the endpoint's provider address, but the node network has none (node IPs %v)", nw.NodeIPs)
		}
		out = append(out, hns.EndpointPolicy{Type: hns.EndpointPolicyProviderAddress, ProviderAddress: &hns.ProviderAddressPolicy{ProviderAddress: pa.String()}})
	case config.NetworkModeL2Bridge:
		// The node itself is reached through the vSwitch's host vNIC.
		for _, ip := range nw.NodeIPs {
			out = append(out, sdnRoute(netip.PrefixFrom(ip, ip.BitLen()).String()))
		}
	default:
		if _, err := networkType(nw.Mode); err != nil {
			return nil, err
		}
	}

	if nw.EnableDSR {
		ok, err := w.dsrSupported(ctx)
		if err != nil {
			return nil, err
		}
		if !ok {
			return nil, fmt.Errorf("enableDSR is set but this host's HNS does not support DSR, so pods cannot get loopback DSR; disable DSR or update Windows")
		}
		// The reference plugins' loopbackDSR: NAT only traffic to the
		// pod's own addresses, so a pod reaches itself through a DSR
		// service.
		out = append(out, hns.EndpointPolicy{Type: hns.EndpointPolicyOutBoundNAT, OutboundNAT: &hns.OutboundNATPolicy{Destinations: slices.Clone(podIPs)}})
	}

	for _, pm := range pod.PortMappings {
		p, err := portMappingPolicy(pm)
		if err != nil {
			return nil, err
		}
		out = append(out, p)
	}
	return out, nil
}

func sdnRoute(prefix string) hns.EndpointPolicy {
	return hns.EndpointPolicy{Type: hns.EndpointPolicySDNRoute, SDNRoute: &hns.SDNRoutePolicy{DestinationPrefix: prefix, NeedEncap: true}}
}

// portMappingPolicy translates one hostPort.
func portMappingPolicy(pm cni.PortMapping) (hns.EndpointPolicy, error) {
	label := fmt.Sprintf("port mapping %s %d->%d", pm.Protocol, pm.HostPort, pm.ContainerPort)
	proto, ok := protocols[strings.ToLower(pm.Protocol)]
	if !ok {
		if strings.EqualFold(pm.Protocol, "sctp") {
			return hns.EndpointPolicy{}, fmt.Errorf("%s: HNS has no SCTP port mappings; use tcp or udp hostPorts on Windows", label)
		}
		return hns.EndpointPolicy{}, fmt.Errorf("%s: unknown protocol %q (want tcp or udp)", label, pm.Protocol)
	}
	if pm.HostPort < 1 || pm.HostPort > 65535 || pm.ContainerPort < 1 || pm.ContainerPort > 65535 {
		return hns.EndpointPolicy{}, fmt.Errorf("%s: ports must be 1-65535", label)
	}
	p := &hns.PortMappingPolicy{Protocol: proto, InternalPort: uint16(pm.ContainerPort), ExternalPort: uint16(pm.HostPort)}
	if pm.HostIP != "" {
		vip, err := netip.ParseAddr(pm.HostIP)
		if err != nil {
			return hns.EndpointPolicy{}, fmt.Errorf("%s: host IP %q is not an address", label, pm.HostIP)
		}
		vip = vip.Unmap()
		// 0.0.0.0 and :: mean every node address, like no host IP.
		if !vip.IsUnspecified() {
			p.VIP = vip.String()
		}
		if vip.Is6() {
			p.Flags |= hns.NatFlagsIPv6
		}
	}
	return hns.EndpointPolicy{Type: hns.EndpointPolicyPortMapping, PortMapping: p}, nil
}

// endpointDNS is the runtime's DNS when it sent any, else the network's.
func endpointDNS(nw *cni.NodeNetwork, pod *cni.Pod) hns.DNS {
	d := nw.DNS
	if !pod.DNS.IsEmpty() {
		d = pod.DNS
	}
	return hns.DNS{
		Domain:     d.Domain,
		Search:     slices.Clone(d.Search),
		ServerList: slices.Clone(d.Nameservers),
		Options:    slices.Clone(d.Options),
	}
}

func defaultRoute(ip netip.Addr) string {
	if ip.Is4() {
		return "0.0.0.0/0"
	}
	return "::/0"
}

func firstIPv4(ips []netip.Addr) (netip.Addr, bool) {
	for _, ip := range ips {
		if ip.Unmap().Is4() {
			return ip.Unmap(), true
		}
	}
	return netip.Addr{}, false
}

// macFromIP is win-overlay's MAC convention: the prefix, then the four
// IPv4 bytes ("0E-2A-0A-F4-01-05" for 10.244.1.5). HNS writes MACs in
// upper case; win-overlay formats the IP bytes with %02x, which names the
// same MAC.
func macFromIP(prefix string, ip netip.Addr) string {
	b := ip.As4()
	return fmt.Sprintf("%s-%02X-%02X-%02X-%02X", strings.ToUpper(prefix), b[0], b[1], b[2], b[3])
}

// validMACPrefix accepts "xx-xx", as win-overlay's endpointMacPrefix.
func validMACPrefix(p string) bool {
	if len(p) != 5 || p[2] != '-' {
		return false
	}
	_, err := net.ParseMAC(p + "-00-00-00-00")
	return err == nil
}

// sameMAC compares MACs in any notation HNS or CNI uses.
func sameMAC(a, b string) bool {
	x, errA := net.ParseMAC(a)
	y, errB := net.ParseMAC(b)
	if errA != nil || errB != nil {
		return strings.EqualFold(a, b)
	}
	return x.String() == y.String()
}

// diffEndpoint lists how got differs from want, in the fields Add sets.
// Empty means Add would create the same endpoint.
func diffEndpoint(want, got *hns.Endpoint) []string {
	var d []string
	if got.IsRemote() {
		d = append(d, "it is a remote endpoint")
	}
	if !strings.EqualFold(got.HostComputeNetwork, want.HostComputeNetwork) {
		d = append(d, fmt.Sprintf("network is %s, want %s", got.HostComputeNetwork, want.HostComputeNetwork))
	}
	if g, w := ipConfigs(got), ipConfigs(want); !slices.Equal(g, w) {
		d = append(d, fmt.Sprintf("addresses are %v, want %v", g, w))
	}
	if want.MacAddress != "" && !sameMAC(got.MacAddress, want.MacAddress) {
		d = append(d, fmt.Sprintf("MAC is %s, want %s", orNone(got.MacAddress), want.MacAddress))
	}
	if g, w := routeKeys(got.Routes), routeKeys(want.Routes); !slices.Equal(g, w) {
		d = append(d, fmt.Sprintf("routes are %v, want %v", g, w))
	}
	if g, w := dnsKey(got.DNS), dnsKey(want.DNS); g != w {
		d = append(d, fmt.Sprintf("DNS is %s, want %s", g, w))
	}
	missing, unexpected := diffPolicies(want.Policies, got.Policies)
	if len(missing) > 0 {
		d = append(d, "missing policies "+strings.Join(missing, ", "))
	}
	if len(unexpected) > 0 {
		d = append(d, "unexpected policies "+strings.Join(unexpected, ", "))
	}
	return d
}

func orNone(s string) string {
	if s == "" {
		return "(none)"
	}
	return s
}

func ipConfigs(ep *hns.Endpoint) []string {
	var out []string
	for _, c := range ep.IpConfigurations {
		ip := c.IpAddress
		if a, err := netip.ParseAddr(ip); err == nil {
			ip = a.Unmap().String()
		}
		out = append(out, fmt.Sprintf("%s/%d", ip, c.PrefixLength))
	}
	sort.Strings(out)
	return out
}

func routeKeys(rs []hns.Route) []string {
	var out []string
	for _, r := range rs {
		out = append(out, r.DestinationPrefix+" via "+r.NextHop)
	}
	sort.Strings(out)
	return out
}

func dnsKey(d hns.DNS) string {
	return fmt.Sprintf("{servers %v, search %v, domain %q, options %v}", nonNil(d.ServerList), nonNil(d.Search), d.Domain, nonNil(d.Options))
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// diffPolicies compares the managed policies of want and got as multisets
// (order-insensitive, and insensitive to the order of prefix lists inside
// a policy). It returns readable forms of the policies only one side has.
func diffPolicies(want, got []hns.EndpointPolicy) (missing, unexpected []string) {
	count := map[string]int{}
	for _, p := range got {
		if managedPolicies[p.Type] {
			count[policyKey(p)]++
		}
	}
	for _, p := range want {
		k := policyKey(p)
		if count[k] > 0 {
			count[k]--
			continue
		}
		missing = append(missing, k)
	}
	for _, p := range got {
		if !managedPolicies[p.Type] {
			continue
		}
		if k := policyKey(p); count[k] > 0 {
			count[k]--
			unexpected = append(unexpected, k)
		}
	}
	return missing, unexpected
}

// policyKey is a canonical, readable form of a policy:
// `OutBoundNAT{"Exceptions":["10.244.0.0/16"]}`.
func policyKey(p hns.EndpointPolicy) string {
	if p.OutboundNAT != nil {
		c := *p.OutboundNAT
		c.Exceptions = sortedClone(c.Exceptions)
		c.Destinations = sortedClone(c.Destinations)
		p.OutboundNAT = &c
	}
	b, err := json.Marshal(p)
	if err != nil {
		return string(p.Type) + "(unprintable)"
	}
	var raw struct {
		Type     string
		Settings json.RawMessage
	}
	if json.Unmarshal(b, &raw) != nil {
		return string(b)
	}
	return raw.Type + string(raw.Settings)
}

func sortedClone(s []string) []string {
	if len(s) == 0 {
		return nil
	}
	c := slices.Clone(s)
	sort.Strings(c)
	return c
}
