package hnsendpoint

// Address plan shared by this package's tests (every address exists only in
// the HNS simulator's memory):
//
//	node subnet       192.168.1.0/24  this node 192.168.1.11 (adapter "Ethernet"),
//	                                  remote node 192.168.1.12, a neighbour 192.168.1.20
//	cluster CIDR      10.244.0.0/16
//	this node's pods  10.244.1.0/24   gateway .1, overlay source VIP .2 (a host
//	                                  endpoint named "nodenet-source-vip"), pods .5 .6 .7
//	remote pods       10.244.2.0/24   behind 192.168.1.12 (overlay: VSID 4096,
//	                                  DR MAC 02-11-22-33-44-55), remote pod 10.244.2.7
//	service CIDR      10.96.0.0/12    cluster DNS 10.96.0.10
//	IPv6 (dual-stack) pods fd00:10:244:1::/64 gateway ::1, pod ::5;
//	                  node fd00:192:168:1::11 on fd00:192:168:1::/64;
//	                  cluster fd00:10:244::/48; services fd00:10:96::/108
//	another network   10.245.0.0/24   ("other", l2bridge)
//	outside           8.8.8.8

import (
	"context"
	"net/netip"
	"testing"

	"github.com/nodenet/nodenet/cni"
	"github.com/nodenet/nodenet/config"
	"github.com/nodenet/nodenet/hns"
)

const (
	networkName  = "nodenet"
	nodeIP       = "192.168.1.11"
	remoteNodeIP = "192.168.1.12"
	neighbourIP  = "192.168.1.20"
	podGateway   = "10.244.1.1"
	sourceVIP    = "10.244.1.2"
	remotePodIP  = "10.244.2.7"
	clusterDNS   = "10.96.0.10"
	outsideIP    = "8.8.8.8"
	vsid         = 4096
	// containerA and containerB are CNI container IDs as containerd makes them.
	containerA = "5f0c1d2e3a4b5c6d7e8f90a1b2c3d4e5f60718293a4b5c6d7e8f90a1b2c3d4e5"
	containerB = "a1b2c3d4e5f60718293a4b5c6d7e8f905f0c1d2e3a4b5c6d7e8f90a1b2c3d4e5"
)

var bg = context.Background()

// host is a simulated Windows node with the node network in place, as the
// agent leaves it before the CNI server takes ADDs.
type host struct {
	sim *hns.Simulator
	net *hns.Network
	nw  *cni.NodeNetwork
	w   *Wiring
}

type hostOptions struct {
	version   hns.Version
	dualStack bool
}

func newHost(tb testing.TB, mode config.NetworkMode, o hostOptions) *host {
	tb.Helper()
	adapterIPs := []string{nodeIP}
	if o.dualStack {
		adapterIPs = append(adapterIPs, "fd00:192:168:1::11")
	}
	sim := hns.NewSimulator(hns.SimulatorOptions{
		Version:      o.version,
		HostAdapters: []hns.HostAdapter{{Name: "Ethernet", IPs: adapterIPs, MAC: "00-15-5D-01-01-0B"}},
	})
	subnets := []hns.Subnet{{
		IpAddressPrefix: "10.244.1.0/24",
		Routes:          []hns.Route{{NextHop: podGateway, DestinationPrefix: "0.0.0.0/0"}},
	}}
	n := &hns.Network{
		Name: networkName,
		Policies: []hns.NetworkPolicy{
			{Type: hns.NetworkPolicyNetAdapterName, NetAdapterName: &hns.NetAdapterNamePolicy{NetworkAdapterName: "Ethernet"}},
		},
	}
	nw := &cni.NodeNetwork{
		Mode:         mode,
		Name:         networkName,
		PodCIDRs:     []netip.Prefix{netip.MustParsePrefix("10.244.1.0/24")},
		Gateways:     []netip.Addr{netip.MustParseAddr(podGateway)},
		MTU:          1500,
		ClusterCIDRs: []netip.Prefix{netip.MustParsePrefix("10.244.0.0/16")},
		ServiceCIDRs: []netip.Prefix{netip.MustParsePrefix("10.96.0.0/12")},
		NodeIPs:      []netip.Addr{netip.MustParseAddr(nodeIP)},
		NodeSubnets:  []netip.Prefix{netip.MustParsePrefix("192.168.1.0/24")},
		DNS:          cni.DNS{Nameservers: []string{clusterDNS}, Domain: "cluster.local", Search: []string{"svc.cluster.local"}},
	}
	switch mode {
	case config.NetworkModeOverlay:
		n.Type = hns.NetworkTypeOverlay
		n.Flags = hns.NetworkFlagsEnableNonPersistent
		subnets[0].Policies = []hns.SubnetPolicy{{Type: hns.SubnetPolicyVSID, Isolation: &hns.IsolationPolicy{IsolationID: vsid}}}
		n.Policies = append(n.Policies, hns.NetworkPolicy{Type: hns.NetworkPolicyProviderAddress, ProviderAddress: &hns.ProviderAddressPolicy{ProviderAddress: nodeIP}})
		nw.SourceVIP = netip.MustParseAddr(sourceVIP)
		nw.MTU = 1450
	case config.NetworkModeL2Bridge:
		n.Type = hns.NetworkTypeL2Bridge
	default:
		tb.Fatalf("no host for mode %q", mode)
	}
	if o.dualStack {
		subnets = append(subnets, hns.Subnet{
			IpAddressPrefix: "fd00:10:244:1::/64",
			Routes:          []hns.Route{{NextHop: "fd00:10:244:1::1", DestinationPrefix: "::/0"}},
		})
		nw.PodCIDRs = append(nw.PodCIDRs, netip.MustParsePrefix("fd00:10:244:1::/64"))
		nw.Gateways = append(nw.Gateways, netip.MustParseAddr("fd00:10:244:1::1"))
		nw.ClusterCIDRs = append(nw.ClusterCIDRs, netip.MustParsePrefix("fd00:10:244::/48"))
		nw.ServiceCIDRs = append(nw.ServiceCIDRs, netip.MustParsePrefix("fd00:10:96::/108"))
		nw.NodeIPs = append(nw.NodeIPs, netip.MustParseAddr("fd00:192:168:1::11"))
		nw.NodeSubnets = append(nw.NodeSubnets, netip.MustParsePrefix("fd00:192:168:1::/64"))
	}
	n.Ipams = []hns.IPAM{{Type: "Static", Subnets: subnets}}
	created, err := sim.CreateNetwork(bg, n)
	if err != nil {
		tb.Fatalf("create network: %v", err)
	}
	nw.ID = created.ID
	if mode == config.NetworkModeOverlay {
		// What the agent's overlay part adds: the route to the remote
		// node's pods and the source VIP host endpoint.
		err := sim.AddNetworkPolicies(bg, created.ID, []hns.NetworkPolicy{{Type: hns.NetworkPolicyRemoteSubnetRoute, RemoteSubnetRoute: &hns.RemoteSubnetRoutePolicy{
			DestinationPrefix: "10.244.2.0/24", IsolationID: vsid, ProviderAddress: remoteNodeIP, DistributedRouterMacAddress: "02-11-22-33-44-55",
		}}})
		if err != nil {
			tb.Fatalf("add remote subnet route: %v", err)
		}
		if _, err := sim.CreateEndpoint(bg, &hns.Endpoint{
			Name: "nodenet-source-vip", HostComputeNetwork: created.ID,
			IpConfigurations: []hns.IPConfig{{IpAddress: sourceVIP, PrefixLength: 24}},
		}); err != nil {
			tb.Fatalf("create source VIP endpoint: %v", err)
		}
	}
	w, err := New(Options{HNS: sim})
	if err != nil {
		tb.Fatalf("New: %v", err)
	}
	sim.ResetCalls()
	return &host{sim: sim, net: created, nw: nw, w: w}
}

// namespace creates a pod's HCN namespace, as containerd does before the
// CNI ADD, and returns its GUID (CNI_NETNS).
func (h *host) namespace(tb testing.TB) string {
	tb.Helper()
	ns, err := h.sim.CreateNamespace(bg, &hns.Namespace{})
	if err != nil {
		tb.Fatalf("create namespace: %v", err)
	}
	return ns.ID
}

// pod is a CNI request's pod with one IPv4 address from this node's CIDR.
func pod(containerID, ifName, netns, ip string) *cni.Pod {
	return &cni.Pod{
		Attachment: cni.Attachment{ContainerID: containerID, IfName: ifName},
		Netns:      netns,
		Namespace:  "default", Name: "web", UID: "0b7e3f1c-0000-4000-8000-000000000001",
		Addresses: []cni.Address{{IP: netip.MustParsePrefix(ip + "/24"), Gateway: netip.MustParseAddr(podGateway)}},
	}
}

func (h *host) mustAdd(tb testing.TB, p *cni.Pod) *hns.Endpoint {
	tb.Helper()
	if _, err := h.w.Add(bg, h.nw, p); err != nil {
		tb.Fatalf("Add: %v\n%s", err, h.sim.Dump())
	}
	return h.endpoint(tb, p)
}

// endpoint returns the pod's endpoint, failing when there is none.
func (h *host) endpoint(tb testing.TB, p *cni.Pod) *hns.Endpoint {
	tb.Helper()
	name, err := EndpointName(p.Attachment)
	if err != nil {
		tb.Fatal(err)
	}
	ep, err := h.sim.GetEndpointByName(bg, name)
	if err != nil {
		tb.Fatalf("endpoint %s: %v\n%s", name, err, h.sim.Dump())
	}
	return ep
}

// endpointNames lists the names of every endpoint on the node network.
func (h *host) endpointNames(tb testing.TB) []string {
	tb.Helper()
	eps, err := h.sim.ListEndpoints(bg, "")
	if err != nil {
		tb.Fatal(err)
	}
	var names []string
	for _, ep := range eps {
		names = append(names, ep.Name)
	}
	return names
}

// attached returns the endpoint IDs the namespace lists.
func (h *host) attached(tb testing.TB, nsID string) []string {
	tb.Helper()
	ns, err := h.sim.GetNamespace(bg, nsID)
	if err != nil {
		tb.Fatalf("namespace %s: %v", nsID, err)
	}
	return ns.EndpointIDs
}

// Expected policies, written out rather than computed by the code under test.
func outboundNAT(exceptions ...string) hns.EndpointPolicy {
	return hns.EndpointPolicy{Type: hns.EndpointPolicyOutBoundNAT, OutboundNAT: &hns.OutboundNATPolicy{Exceptions: exceptions}}
}

func loopbackDSR(ips ...string) hns.EndpointPolicy {
	return hns.EndpointPolicy{Type: hns.EndpointPolicyOutBoundNAT, OutboundNAT: &hns.OutboundNATPolicy{Destinations: ips}}
}

func encapRoute(prefix string) hns.EndpointPolicy {
	return hns.EndpointPolicy{Type: hns.EndpointPolicySDNRoute, SDNRoute: &hns.SDNRoutePolicy{DestinationPrefix: prefix, NeedEncap: true}}
}

func providerAddress(ip string) hns.EndpointPolicy {
	return hns.EndpointPolicy{Type: hns.EndpointPolicyProviderAddress, ProviderAddress: &hns.ProviderAddressPolicy{ProviderAddress: ip}}
}

func portMapping(proto hns.Protocol, internal, external uint16, vip string) hns.EndpointPolicy {
	return hns.EndpointPolicy{Type: hns.EndpointPolicyPortMapping, PortMapping: &hns.PortMappingPolicy{Protocol: proto, InternalPort: internal, ExternalPort: external, VIP: vip}}
}

// basePolicies are a pod's policies in each mode without DSR or host ports.
func basePolicies(mode config.NetworkMode) []hns.EndpointPolicy {
	ps := []hns.EndpointPolicy{
		outboundNAT("10.244.0.0/16", "10.96.0.0/12", "192.168.1.0/24"),
		encapRoute("10.96.0.0/12"),
	}
	if mode == config.NetworkModeOverlay {
		return append(ps, providerAddress(nodeIP))
	}
	return append(ps, encapRoute(nodeIP+"/32"))
}

var modes = []config.NetworkMode{config.NetworkModeOverlay, config.NetworkModeL2Bridge}

func mustPrefix(s string) netip.Prefix { return netip.MustParsePrefix(s) }

func mustAddr(s string) netip.Addr { return netip.MustParseAddr(s) }
