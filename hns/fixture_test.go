package hns

// Address plan shared by this package's tests (all addresses exist only in
// the simulator's memory):
//
//	underlay          10.0.0.0/24   this node 10.0.0.4 (adapter "Ethernet"),
//	                                remote node 10.0.0.5
//	cluster CIDR      10.244.0.0/16
//	this node's pods  10.244.1.0/24 gateway .1, source VIP .2, pods .5 .6 .7
//	remote pods       10.244.2.0/24 (behind 10.0.0.5, DR MAC 02-11-22-33-44-55)
//	service CIDR      10.96.0.0/12  cluster IP 10.96.0.10
//	outside client    192.0.2.10    (TEST-NET-1)

import (
	"context"
	"testing"
	"time"
)

const (
	nodeIP       = "10.0.0.4"
	remoteNodeIP = "10.0.0.5"
	podCIDR      = "10.244.1.0/24"
	remotePodNet = "10.244.2.0/24"
	sourceVIP    = "10.244.1.2"
	clusterIP    = "10.96.0.10"
	outsideIP    = "192.0.2.10"
	remoteDRMAC  = "02-11-22-33-44-55"
)

var ctx = context.Background()

func newTestSimulator(t *testing.T, opts SimulatorOptions) *Simulator {
	t.Helper()
	if opts.HostAdapters == nil {
		opts.HostAdapters = []HostAdapter{{Name: "Ethernet", IPs: []string{nodeIP}, MAC: "00-15-5D-AA-00-04"}}
	}
	return NewSimulator(opts)
}

func overlayNetwork(name string) *Network {
	return &Network{
		Name:  name,
		Type:  NetworkTypeOverlay,
		Flags: NetworkFlagsEnableNonPersistent,
		Ipams: []IPAM{{Type: "Static", Subnets: []Subnet{{
			IpAddressPrefix: podCIDR,
			Routes:          []Route{{NextHop: "10.244.1.1", DestinationPrefix: "0.0.0.0/0"}},
			Policies:        []SubnetPolicy{{Type: SubnetPolicyVSID, Isolation: &IsolationPolicy{IsolationID: 4096}}},
		}}}},
		Policies: []NetworkPolicy{
			{Type: NetworkPolicyNetAdapterName, NetAdapterName: &NetAdapterNamePolicy{NetworkAdapterName: "Ethernet"}},
			{Type: NetworkPolicyProviderAddress, ProviderAddress: &ProviderAddressPolicy{ProviderAddress: nodeIP}},
		},
	}
}

func l2bridgeNetwork(name string) *Network {
	return &Network{
		Name: name,
		Type: NetworkTypeL2Bridge,
		Ipams: []IPAM{{Type: "Static", Subnets: []Subnet{{
			IpAddressPrefix: podCIDR,
			Routes:          []Route{{NextHop: "10.244.1.1", DestinationPrefix: "0.0.0.0/0"}},
		}}}},
	}
}

func remoteSubnetRoute() NetworkPolicy {
	return NetworkPolicy{Type: NetworkPolicyRemoteSubnetRoute, RemoteSubnetRoute: &RemoteSubnetRoutePolicy{
		DestinationPrefix: remotePodNet, IsolationID: 4096, ProviderAddress: remoteNodeIP, DistributedRouterMacAddress: remoteDRMAC,
	}}
}

func mustNetwork(t *testing.T, s *Simulator, n *Network) *Network {
	t.Helper()
	out, err := s.CreateNetwork(ctx, n)
	if err != nil {
		t.Fatalf("create network %s: %v", n.Name, err)
	}
	return out
}

func localEndpoint(networkID, ip string, policies ...EndpointPolicy) *Endpoint {
	return &Endpoint{HostComputeNetwork: networkID, IpConfigurations: []IPConfig{{IpAddress: ip, PrefixLength: 24}}, Policies: policies}
}

func remoteEndpoint(networkID, ip, pa string) *Endpoint {
	ep := &Endpoint{HostComputeNetwork: networkID, IpConfigurations: []IPConfig{{IpAddress: ip}}, Flags: EndpointFlagsRemoteEndpoint}
	if pa != "" {
		ep.Policies = []EndpointPolicy{{Type: EndpointPolicyProviderAddress, ProviderAddress: &ProviderAddressPolicy{ProviderAddress: pa}}}
	}
	return ep
}

func mustEndpoint(t *testing.T, s *Simulator, ep *Endpoint) *Endpoint {
	t.Helper()
	out, err := s.CreateEndpoint(ctx, ep)
	if err != nil {
		t.Fatalf("create endpoint %v: %v", ep.IPs(), err)
	}
	return out
}

func clusterIPLB(vip string, port, target uint16, endpointIDs ...string) *LoadBalancer {
	return &LoadBalancer{
		HostComputeEndpoints: endpointIDs,
		SourceVIP:            sourceVIP,
		FrontendVIPs:         []string{vip},
		PortMappings:         []PortMapping{{Protocol: ProtocolTCP, InternalPort: target, ExternalPort: port}},
	}
}

func mustLB(t *testing.T, s *Simulator, lb *LoadBalancer) *LoadBalancer {
	t.Helper()
	out, err := s.CreateLoadBalancer(ctx, lb)
	if err != nil {
		t.Fatalf("create load balancer %s: %v", frontendLabel(lb), err)
	}
	return out
}

// fakeClock is a settable clock for restart windows.
type fakeClock struct{ now time.Time }

func (c *fakeClock) Now() time.Time          { return c.now }
func (c *fakeClock) Advance(d time.Duration) { c.now = c.now.Add(d) }
