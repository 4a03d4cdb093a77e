//go:build windows

package hns

// These tests check the hcn client against the real hcn types. They need
// Windows, or Wine on Linux:
//
//	bash hack/setup-wine.sh
//	GOOS=windows go test -exec "$PWD/hack/wine-exec.sh" ./hns/
//
// Tests that assume HNS is absent run only under Wine; tests that need a
// chosen HNS error run only with hack/wine/computenetwork.dll, a stand-in
// that fails every Hcn* call with $NODENET_FAKE_HCN_HRESULT.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"testing"

	"github.com/Microsoft/hnslib/hcn"
	"github.com/google/go-cmp/cmp"
	"golang.org/x/sys/windows"
	"golang.org/x/sys/windows/registry"
)

const (
	testNetworkID  = "5F2E0C1A-7B3D-4E8F-9A10-2B3C4D5E6F70"
	testEndpointID = "0A1B2C3D-4E5F-4A6B-8C7D-8E9FA0B1C2D3"
	testRemoteID   = "1B2C3D4E-5F60-4B7C-9D8E-9FA0B1C2D3E4"
	testLBID       = "2C3D4E5F-6071-4C8D-AE9F-A0B1C2D3E4F5"
	testNamespace  = "3D4E5F60-7182-4D9E-BFA0-B1C2D3E4F506"
)

// decodeStrict decodes like convertJSON but fails on a field dst lacks: the
// proof that we send HNS nothing hcn doesn't know.
func decodeStrict(t *testing.T, b []byte, dst any) {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(dst); err != nil {
		t.Fatalf("strict decode of %s into %T: %v", b, dst, err)
	}
}

// wantPolicy is a policy as hcn sees it: its type and its settings decoded
// into hcn's settings struct (nil when the policy has no settings).
type wantPolicy struct {
	Type     string
	Settings any
}

// checkPolicy decodes hcn's raw settings into the type of want.Settings,
// strictly, so a misspelled or extra field fails.
func checkPolicy(t *testing.T, i int, typ string, settings json.RawMessage, want wantPolicy) {
	t.Helper()
	if typ != want.Type {
		t.Errorf("policy %d: hcn type %q, want %q", i, typ, want.Type)
		return
	}
	if want.Settings == nil {
		if len(settings) != 0 {
			t.Errorf("policy %d (%s): settings %s, want none", i, typ, settings)
		}
		return
	}
	got := reflect.New(reflect.TypeOf(want.Settings))
	decodeStrict(t, settings, got.Interface())
	if diff := cmp.Diff(want.Settings, got.Elem().Interface()); diff != "" {
		t.Errorf("policy %d (%s) settings as hcn decodes them (-want +got):\n%s", i, typ, diff)
	}
}

func checkNetworkPolicies(t *testing.T, got []hcn.NetworkPolicy, want []wantPolicy) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("hcn has %d network policies, want %d", len(got), len(want))
	}
	for i := range want {
		checkPolicy(t, i, string(got[i].Type), got[i].Settings, want[i])
	}
}

func checkEndpointPolicies(t *testing.T, got []hcn.EndpointPolicy, want []wantPolicy) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("hcn has %d endpoint policies, want %d", len(got), len(want))
	}
	for i := range want {
		checkPolicy(t, i, string(got[i].Type), got[i].Settings, want[i])
	}
}

// roundTrip translates ours to hcn's type H as the client does, lets check
// inspect the hcn value, and translates back expecting the original.
func roundTrip[O, H any](ours *O, check func(t *testing.T, h *H)) func(t *testing.T) {
	return func(t *testing.T) {
		b, err := json.Marshal(ours)
		if err != nil {
			t.Fatalf("marshal %T: %v", ours, err)
		}
		decodeStrict(t, b, new(H))

		var h H
		if err := convertJSON(ours, &h); err != nil {
			t.Fatalf("ours to hcn: %v", err)
		}
		check(t, &h)

		back := new(O)
		if err := convertJSON(&h, back); err != nil {
			t.Fatalf("hcn to ours: %v", err)
		}
		if diff := cmp.Diff(ours, back); diff != "" {
			t.Errorf("round trip through %T changed the object (-sent +back):\n%s", h, diff)
		}
	}
}

func TestTranslationToHCN(t *testing.T) {
	overlay := &Network{
		ID:    testNetworkID,
		Name:  "vxlan0",
		Type:  NetworkTypeOverlay,
		Flags: NetworkFlagsEnableNonPersistent,
		Ipams: []IPAM{{
			Type: "Static",
			Subnets: []Subnet{{
				IpAddressPrefix: "10.244.1.0/24",
				Policies:        []SubnetPolicy{{Type: SubnetPolicyVSID, Isolation: &IsolationPolicy{IsolationID: 4096}}},
				Routes:          []Route{{NextHop: "10.244.1.1", DestinationPrefix: "0.0.0.0/0", Metric: 5}},
				Flags:           1,
			}},
		}},
		Policies: []NetworkPolicy{
			{Type: NetworkPolicyNetAdapterName, NetAdapterName: &NetAdapterNamePolicy{NetworkAdapterName: "Ethernet 2"}},
			{Type: NetworkPolicyDrMacAddress, DrMacAddress: &DrMacAddressPolicy{Address: "0E-2A-0A-F4-01-01"}},
			{Type: NetworkPolicyProviderAddress, ProviderAddress: &ProviderAddressPolicy{ProviderAddress: "192.168.1.10"}},
			{Type: NetworkPolicyRemoteSubnetRoute, RemoteSubnetRoute: &RemoteSubnetRoutePolicy{
				DestinationPrefix:           "10.244.2.0/24",
				IsolationID:                 4096,
				ProviderAddress:             "192.168.1.11",
				DistributedRouterMacAddress: "0E-2A-0A-F4-02-01",
			}},
			{Type: NetworkPolicyVxlanPort, VxlanPort: &VxlanPortPolicy{Port: 4789}},
			{Type: NetworkPolicyHostRoute},
			// A type nodenet doesn't model must survive untouched.
			{Type: "AutomaticDNS", Raw: json.RawMessage(`{"Enable":true}`)},
		},
		DNS: DNS{
			Domain:     "cluster.local",
			Search:     []string{"svc.cluster.local", "cluster.local"},
			ServerList: []string{"10.96.0.10"},
			Options:    []string{"ndots:5"},
		},
		MacPool:       MacPool{Ranges: []MacRange{{StartMacAddress: "00-15-5D-52-C0-00", EndMacAddress: "00-15-5D-52-CF-FF"}}},
		SchemaVersion: V2,
	}

	local := &Endpoint{
		ID:                   testEndpointID,
		Name:                 "pod-a_eth0",
		HostComputeNetwork:   testNetworkID,
		HostComputeNamespace: testNamespace,
		IpConfigurations:     []IPConfig{{IpAddress: "10.244.1.5", PrefixLength: 24}, {IpAddress: "fd00:10:244:1::5", PrefixLength: 64}},
		MacAddress:           "0E-2A-0A-F4-01-05",
		DNS:                  DNS{Search: []string{"default.svc.cluster.local"}, ServerList: []string{"10.96.0.10"}},
		Routes:               []Route{{NextHop: "10.244.1.1", DestinationPrefix: "0.0.0.0/0"}},
		Policies: []EndpointPolicy{
			{Type: EndpointPolicyOutBoundNAT, OutboundNAT: &OutboundNATPolicy{
				Exceptions:       []string{"10.244.0.0/16", "10.96.0.0/12", "192.168.1.0/24"},
				MaxPortPoolUsage: 80,
			}},
			{Type: EndpointPolicyOutBoundNAT, OutboundNAT: &OutboundNATPolicy{
				VirtualIP:    "10.244.1.2",
				Destinations: []string{"10.96.0.1"},
				Flags:        NatFlagsLocalRoutedVip | NatFlagsIPv6,
			}},
			{Type: EndpointPolicySDNRoute, SDNRoute: &SDNRoutePolicy{DestinationPrefix: "10.96.0.0/12", NeedEncap: true}},
			{Type: EndpointPolicyPortMapping, PortMapping: &PortMappingPolicy{
				Protocol: ProtocolTCP, InternalPort: 80, ExternalPort: 8080, VIP: "192.168.1.10", Flags: NatFlagsLocalRoutedVip,
			}},
			{Type: EndpointPolicyEncapOverhead, EncapOverhead: &EncapOverheadPolicy{Overhead: 50}},
		},
		SchemaVersion: V2,
	}

	remote := &Endpoint{
		ID:                 testRemoteID,
		Name:               "remote-10.244.2.7",
		HostComputeNetwork: testNetworkID,
		IpConfigurations:   []IPConfig{{IpAddress: "10.244.2.7"}},
		MacAddress:         "02-11-0A-F4-02-07",
		Flags:              EndpointFlagsRemoteEndpoint,
		Policies: []EndpointPolicy{
			{Type: EndpointPolicyProviderAddress, ProviderAddress: &ProviderAddressPolicy{ProviderAddress: "192.168.1.11"}},
		},
		SchemaVersion: V2,
	}

	// An endpoint with the ACL rules a firewall on it takes: every field
	// of hcn.AclPolicySetting, both directions, both rule types.
	withACLs := &Endpoint{
		ID:                 testEndpointID,
		Name:               "pod-b_eth0",
		HostComputeNetwork: testNetworkID,
		IpConfigurations:   []IPConfig{{IpAddress: "10.244.1.6", PrefixLength: 24}},
		Policies: []EndpointPolicy{
			{Type: EndpointPolicyACL, ACL: &ACLPolicy{
				Protocols: "6", Action: ACLActionAllow, Direction: ACLDirectionIn,
				LocalAddresses: "10.244.1.6", RemoteAddresses: "198.51.100.0/24,192.0.2.10",
				LocalPorts: "8080", RemotePorts: "1024-65535", RuleType: ACLRuleTypeSwitch, Priority: 100,
			}},
			{Type: EndpointPolicyACL, ACL: &ACLPolicy{Action: ACLActionBlock, Direction: ACLDirectionOut, RuleType: ACLRuleTypeHost, Priority: 65000}},
			{Type: EndpointPolicyACL, ACL: &ACLPolicy{Protocols: ACLProtocolAny, Action: ACLActionAllow, Direction: ACLDirectionIn, Priority: 65500}},
		},
		SchemaVersion: V2,
	}

	const allPortMappingFlags = PortMappingFlagsILB | PortMappingFlagsLocalRoutedVIP |
		PortMappingFlagsUseMux | PortMappingFlagsPreserveDIP | PortMappingFlagsVipExternalIP
	lb := &LoadBalancer{
		ID:                   testLBID,
		HostComputeEndpoints: []string{testEndpointID, testRemoteID},
		SourceVIP:            "fd00:10:244:1::2",
		FrontendVIPs:         []string{"fd00:10:96::1"},
		Flags:                LoadBalancerFlagsDSR | LoadBalancerFlagsIPv6,
		PortMappings: []PortMapping{
			{Protocol: ProtocolTCP, InternalPort: 8080, ExternalPort: 80, Flags: PortMappingFlagsILB},
			{Protocol: ProtocolUDP, InternalPort: 53, ExternalPort: 53, Flags: PortMappingFlagsLocalRoutedVIP, DistributionType: DistributionSourceIPProtocol},
			{Protocol: ProtocolTCP, InternalPort: 8443, ExternalPort: 30443, Flags: PortMappingFlagsUseMux | PortMappingFlagsPreserveDIP, DistributionType: DistributionSourceIP},
			{Protocol: ProtocolTCP, InternalPort: 8080, ExternalPort: 30080, Flags: PortMappingFlagsVipExternalIP},
			{Protocol: ProtocolSCTP, InternalPort: 9000, ExternalPort: 9000, Flags: allPortMappingFlags, DistributionType: DistributionSourceIP},
		},
		SchemaVersion: V2,
	}

	tests := []struct {
		name string
		run  func(t *testing.T)
	}{
		{"a fully populated overlay network keeps every field through hcn", roundTrip(overlay, func(t *testing.T, h *hcn.HostComputeNetwork) {
			if h.Id != testNetworkID || h.Name != "vxlan0" || h.Type != hcn.Overlay {
				t.Errorf("hcn network is %q %q %q, want %q vxlan0 Overlay", h.Id, h.Name, h.Type, testNetworkID)
			}
			if h.Flags != hcn.EnableNonPersistent {
				t.Errorf("hcn Flags = %d, want EnableNonPersistent (%d)", h.Flags, hcn.EnableNonPersistent)
			}
			if h.SchemaVersion != hcn.V2SchemaVersion() {
				t.Errorf("hcn SchemaVersion = %+v, want %+v", h.SchemaVersion, hcn.V2SchemaVersion())
			}
			if len(h.Ipams) != 1 || len(h.Ipams[0].Subnets) != 1 {
				t.Fatalf("hcn Ipams = %+v, want one IPAM with one subnet", h.Ipams)
			}
			sub := h.Ipams[0].Subnets[0]
			if sub.IpAddressPrefix != "10.244.1.0/24" || sub.Flags != hcn.SubnetFlagsDoNotReserveGatewayAddress {
				t.Errorf("hcn subnet = %q flags %d", sub.IpAddressPrefix, sub.Flags)
			}
			if diff := cmp.Diff([]hcn.Route{{NextHop: "10.244.1.1", DestinationPrefix: "0.0.0.0/0", Metric: 5}}, sub.Routes); diff != "" {
				t.Errorf("hcn subnet routes (-want +got):\n%s", diff)
			}
			if len(sub.Policies) != 1 {
				t.Fatalf("hcn subnet has %d policies, want 1", len(sub.Policies))
			}
			// hcn keeps subnet policies as raw JSON; decode them as HNS would.
			var sp hcn.SubnetPolicy
			decodeStrict(t, sub.Policies[0], &sp)
			checkPolicy(t, 0, string(sp.Type), sp.Settings, wantPolicy{string(hcn.VSID), hcn.VsidPolicySetting{IsolationId: 4096}})
			checkNetworkPolicies(t, h.Policies, []wantPolicy{
				{string(hcn.NetAdapterName), hcn.NetAdapterNameNetworkPolicySetting{NetworkAdapterName: "Ethernet 2"}},
				{string(hcn.DrMacAddress), hcn.DrMacAddressNetworkPolicySetting{Address: "0E-2A-0A-F4-01-01"}},
				// hnslib has no network-level ProviderAddress setting type
				// (hcsshim had one); the endpoint one has the same JSON.
				{string(hcn.ProviderAddress), hcn.ProviderAddressEndpointPolicySetting{ProviderAddress: "192.168.1.10"}},
				{string(hcn.RemoteSubnetRoute), hcn.RemoteSubnetRoutePolicySetting{
					DestinationPrefix:           "10.244.2.0/24",
					IsolationId:                 4096,
					ProviderAddress:             "192.168.1.11",
					DistributedRouterMacAddress: "0E-2A-0A-F4-02-01",
				}},
				{string(hcn.VxlanPort), hcn.VxlanPortPolicySetting{Port: 4789}},
				{string(hcn.HostRoute), nil},
				{string(hcn.AutomaticDNS), hcn.AutomaticDNSNetworkPolicySetting{Enable: true}},
			})
			wantDNS := hcn.Dns{Domain: "cluster.local", Search: []string{"svc.cluster.local", "cluster.local"}, ServerList: []string{"10.96.0.10"}, Options: []string{"ndots:5"}}
			if diff := cmp.Diff(wantDNS, h.Dns); diff != "" {
				t.Errorf("hcn Dns (-want +got):\n%s", diff)
			}
			wantPool := hcn.MacPool{Ranges: []hcn.MacRange{{StartMacAddress: "00-15-5D-52-C0-00", EndMacAddress: "00-15-5D-52-CF-FF"}}}
			if diff := cmp.Diff(wantPool, h.MacPool); diff != "" {
				t.Errorf("hcn MacPool (-want +got):\n%s", diff)
			}
		})},
		{"a local pod endpoint keeps its addresses, routes and policies through hcn", roundTrip(local, func(t *testing.T, h *hcn.HostComputeEndpoint) {
			if h.Id != testEndpointID || h.HostComputeNetwork != testNetworkID || h.HostComputeNamespace != testNamespace {
				t.Errorf("hcn endpoint IDs = %q %q %q", h.Id, h.HostComputeNetwork, h.HostComputeNamespace)
			}
			if h.Flags != hcn.EndpointFlagsNone || h.MacAddress != "0E-2A-0A-F4-01-05" {
				t.Errorf("hcn endpoint flags %d mac %q", h.Flags, h.MacAddress)
			}
			wantIPs := []hcn.IpConfig{{IpAddress: "10.244.1.5", PrefixLength: 24}, {IpAddress: "fd00:10:244:1::5", PrefixLength: 64}}
			if diff := cmp.Diff(wantIPs, h.IpConfigurations); diff != "" {
				t.Errorf("hcn IpConfigurations (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff([]hcn.Route{{NextHop: "10.244.1.1", DestinationPrefix: "0.0.0.0/0"}}, h.Routes); diff != "" {
				t.Errorf("hcn Routes (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(hcn.Dns{Search: []string{"default.svc.cluster.local"}, ServerList: []string{"10.96.0.10"}}, h.Dns); diff != "" {
				t.Errorf("hcn Dns (-want +got):\n%s", diff)
			}
			checkEndpointPolicies(t, h.Policies, []wantPolicy{
				{string(hcn.OutBoundNAT), hcn.OutboundNatPolicySetting{
					Exceptions:       []string{"10.244.0.0/16", "10.96.0.0/12", "192.168.1.0/24"},
					MaxPortPoolUsage: 80,
				}},
				{string(hcn.OutBoundNAT), hcn.OutboundNatPolicySetting{
					VirtualIP:    "10.244.1.2",
					Destinations: []string{"10.96.0.1"},
					Flags:        hcn.NatFlagsLocalRoutedVip | hcn.NatFlagsIPv6,
				}},
				{string(hcn.SDNRoute), hcn.SDNRoutePolicySetting{DestinationPrefix: "10.96.0.0/12", NeedEncap: true}},
				{string(hcn.PortMapping), hcn.PortMappingPolicySetting{
					Protocol: 6, InternalPort: 80, ExternalPort: 8080, VIP: "192.168.1.10", Flags: hcn.NatFlagsLocalRoutedVip,
				}},
				{string(hcn.EncapOverhead), hcn.EncapOverheadEndpointPolicySetting{Overhead: 50}},
			})
		})},
		{"a remote endpoint keeps its flag and provider address through hcn", roundTrip(remote, func(t *testing.T, h *hcn.HostComputeEndpoint) {
			if h.Flags != hcn.EndpointFlagsRemoteEndpoint {
				t.Errorf("hcn endpoint Flags = %d, want RemoteEndpoint (%d)", h.Flags, hcn.EndpointFlagsRemoteEndpoint)
			}
			if diff := cmp.Diff([]hcn.IpConfig{{IpAddress: "10.244.2.7"}}, h.IpConfigurations); diff != "" {
				t.Errorf("hcn IpConfigurations (-want +got):\n%s", diff)
			}
			checkEndpointPolicies(t, h.Policies, []wantPolicy{
				{string(hcn.NetworkProviderAddress), hcn.ProviderAddressEndpointPolicySetting{ProviderAddress: "192.168.1.11"}},
			})
		})},
		{"an endpoint's ACL policies keep every field through hcn", roundTrip(withACLs, func(t *testing.T, h *hcn.HostComputeEndpoint) {
			checkEndpointPolicies(t, h.Policies, []wantPolicy{
				{string(hcn.ACL), hcn.AclPolicySetting{
					Protocols: "6", Action: hcn.ActionTypeAllow, Direction: hcn.DirectionTypeIn,
					LocalAddresses: "10.244.1.6", RemoteAddresses: "198.51.100.0/24,192.0.2.10",
					LocalPorts: "8080", RemotePorts: "1024-65535", RuleType: hcn.RuleTypeSwitch, Priority: 100,
				}},
				{string(hcn.ACL), hcn.AclPolicySetting{Action: hcn.ActionTypeBlock, Direction: hcn.DirectionTypeOut, RuleType: hcn.RuleTypeHost, Priority: 65000}},
				{string(hcn.ACL), hcn.AclPolicySetting{Protocols: "256", Action: hcn.ActionTypeAllow, Direction: hcn.DirectionTypeIn, Priority: 65500}},
			})
		})},
		{"a DSR IPv6 load balancer keeps every port-mapping flag and distribution through hcn", roundTrip(lb, func(t *testing.T, h *hcn.HostComputeLoadBalancer) {
			if want := hcn.LoadBalancerFlagsDSR | 2; h.Flags != want {
				t.Errorf("hcn load balancer Flags = %d, want DSR|IPv6 (%d)", h.Flags, want)
			}
			if h.Flags != hcn.LoadBalancerFlagsDSR|hcn.LoadBalancerFlagsIPv6 {
				t.Errorf("hcn load balancer Flags = %d, want hcn's DSR|IPv6", h.Flags)
			}
			if diff := cmp.Diff([]string{testEndpointID, testRemoteID}, h.HostComputeEndpoints); diff != "" {
				t.Errorf("hcn HostComputeEndpoints (-want +got):\n%s", diff)
			}
			if h.SourceVIP != "fd00:10:244:1::2" || !reflect.DeepEqual(h.FrontendVIPs, []string{"fd00:10:96::1"}) {
				t.Errorf("hcn VIPs: source %q frontends %q", h.SourceVIP, h.FrontendVIPs)
			}
			// hcn has no name for VipExternalIP; kube-proxy passes 16 too.
			const vipExternalIP hcn.LoadBalancerPortMappingFlags = 16
			all := hcn.LoadBalancerPortMappingFlagsILB | hcn.LoadBalancerPortMappingFlagsLocalRoutedVIP |
				hcn.LoadBalancerPortMappingFlagsUseMux | hcn.LoadBalancerPortMappingFlagsPreserveDIP | vipExternalIP
			want := []hcn.LoadBalancerPortMapping{
				{Protocol: 6, InternalPort: 8080, ExternalPort: 80, Flags: hcn.LoadBalancerPortMappingFlagsILB},
				{Protocol: 17, InternalPort: 53, ExternalPort: 53, Flags: hcn.LoadBalancerPortMappingFlagsLocalRoutedVIP, DistributionType: hcn.LoadBalancerDistributionSourceIPProtocol},
				{Protocol: 6, InternalPort: 8443, ExternalPort: 30443, Flags: hcn.LoadBalancerPortMappingFlagsUseMux | hcn.LoadBalancerPortMappingFlagsPreserveDIP, DistributionType: hcn.LoadBalancerDistributionSourceIP},
				{Protocol: 6, InternalPort: 8080, ExternalPort: 30080, Flags: vipExternalIP},
				{Protocol: 132, InternalPort: 9000, ExternalPort: 9000, Flags: all, DistributionType: hcn.LoadBalancerDistributionSourceIP},
			}
			if diff := cmp.Diff(want, h.PortMappings); diff != "" {
				t.Errorf("hcn PortMappings (-want +got):\n%s", diff)
			}
		})},
	}
	for _, tt := range tests {
		t.Run(tt.name, tt.run)
	}
}

// HNS answers carry fields we don't model (Health); reading them must not
// fail, and must not invent anything.
func TestTranslationFromHCNDropsUnmodeledFields(t *testing.T) {
	in := &hcn.HostComputeNetwork{
		Id:            testNetworkID,
		Name:          "cbr0",
		Type:          hcn.L2Bridge,
		Health:        hcn.Health{Data: map[string]any{"State": 1}},
		SchemaVersion: hcn.V2SchemaVersion(),
	}
	var got Network
	if err := convertJSON(in, &got); err != nil {
		t.Fatalf("hcn to ours: %v", err)
	}
	want := Network{ID: testNetworkID, Name: "cbr0", Type: NetworkTypeL2Bridge, SchemaVersion: V2}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("network read from hcn (-want +got):\n%s", diff)
	}
}

// Our constants restate hcn's (types.go and policy.go can't import hcn), so
// pin every one that hcn also defines.
func TestConstantsMatchHCN(t *testing.T) {
	numbers := []struct {
		name       string
		ours, hcns uint32
	}{
		{"EnableNonPersistent", uint32(NetworkFlagsEnableNonPersistent), uint32(hcn.EnableNonPersistent)},
		{"DisableHostPort", uint32(NetworkFlagsDisableHostPort), uint32(hcn.DisableHostPort)},
		{"EnableIov", uint32(NetworkFlagsEnableIov), uint32(hcn.EnableIov)},
		{"EndpointFlagsRemoteEndpoint", uint32(EndpointFlagsRemoteEndpoint), uint32(hcn.EndpointFlagsRemoteEndpoint)},
		{"LoadBalancerFlagsDSR", uint32(LoadBalancerFlagsDSR), uint32(hcn.LoadBalancerFlagsDSR)},
		{"LoadBalancerFlagsIPv6", uint32(LoadBalancerFlagsIPv6), uint32(hcn.LoadBalancerFlagsIPv6)},
		{"PortMappingFlagsILB", uint32(PortMappingFlagsILB), uint32(hcn.LoadBalancerPortMappingFlagsILB)},
		{"PortMappingFlagsLocalRoutedVIP", uint32(PortMappingFlagsLocalRoutedVIP), uint32(hcn.LoadBalancerPortMappingFlagsLocalRoutedVIP)},
		{"PortMappingFlagsUseMux", uint32(PortMappingFlagsUseMux), uint32(hcn.LoadBalancerPortMappingFlagsUseMux)},
		{"PortMappingFlagsPreserveDIP", uint32(PortMappingFlagsPreserveDIP), uint32(hcn.LoadBalancerPortMappingFlagsPreserveDIP)},
		{"DistributionNone", uint32(DistributionNone), uint32(hcn.LoadBalancerDistributionNone)},
		{"DistributionSourceIPProtocol", uint32(DistributionSourceIPProtocol), uint32(hcn.LoadBalancerDistributionSourceIPProtocol)},
		{"DistributionSourceIP", uint32(DistributionSourceIP), uint32(hcn.LoadBalancerDistributionSourceIP)},
		{"NatFlagsLocalRoutedVip", uint32(NatFlagsLocalRoutedVip), uint32(hcn.NatFlagsLocalRoutedVip)},
		{"NatFlagsIPv6", uint32(NatFlagsIPv6), uint32(hcn.NatFlagsIPv6)},
		{"ProtocolTCP", uint32(ProtocolTCP), uint32(hcn.ProtocolTypeTCP)},
		{"ProtocolUDP", uint32(ProtocolUDP), uint32(hcn.ProtocolTypeUDP)},
	}
	for _, c := range numbers {
		if c.ours != c.hcns {
			t.Errorf("%s = %d, hcn says %d", c.name, c.ours, c.hcns)
		}
	}
	names := []struct{ ours, hcns string }{
		{string(NetworkTypeNAT), string(hcn.NAT)},
		{string(NetworkTypeTransparent), string(hcn.Transparent)},
		{string(NetworkTypeL2Bridge), string(hcn.L2Bridge)},
		{string(NetworkTypeL2Tunnel), string(hcn.L2Tunnel)},
		{string(NetworkTypeICS), string(hcn.ICS)},
		{string(NetworkTypePrivate), string(hcn.Private)},
		{string(NetworkTypeOverlay), string(hcn.Overlay)},
		{string(NetworkPolicyNetAdapterName), string(hcn.NetAdapterName)},
		{string(NetworkPolicyDrMacAddress), string(hcn.DrMacAddress)},
		{string(NetworkPolicyProviderAddress), string(hcn.ProviderAddress)},
		{string(NetworkPolicyRemoteSubnetRoute), string(hcn.RemoteSubnetRoute)},
		{string(NetworkPolicyVxlanPort), string(hcn.VxlanPort)},
		{string(NetworkPolicyHostRoute), string(hcn.HostRoute)},
		{string(EndpointPolicyOutBoundNAT), string(hcn.OutBoundNAT)},
		{string(EndpointPolicySDNRoute), string(hcn.SDNRoute)},
		{string(EndpointPolicyProviderAddress), string(hcn.NetworkProviderAddress)},
		{string(EndpointPolicyPortMapping), string(hcn.PortMapping)},
		{string(EndpointPolicyEncapOverhead), string(hcn.EncapOverhead)},
		{string(EndpointPolicyACL), string(hcn.ACL)},
		{string(ACLActionAllow), string(hcn.ActionTypeAllow)},
		{string(ACLActionBlock), string(hcn.ActionTypeBlock)},
		{string(ACLActionPass), string(hcn.ActionTypePass)},
		{string(ACLDirectionIn), string(hcn.DirectionTypeIn)},
		{string(ACLDirectionOut), string(hcn.DirectionTypeOut)},
		{string(ACLRuleTypeHost), string(hcn.RuleTypeHost)},
		{string(ACLRuleTypeSwitch), string(hcn.RuleTypeSwitch)},
		{string(SubnetPolicyVSID), string(hcn.VSID)},
		{string(SubnetPolicyVLAN), string(hcn.VLAN)},
		{string(NamespaceTypeHost), string(hcn.NamespaceTypeHost)},
		{string(NamespaceTypeHostDefault), string(hcn.NamespaceTypeHostDefault)},
		{string(NamespaceTypeGuest), string(hcn.NamespaceTypeGuest)},
		{string(NamespaceTypeGuestDefault), string(hcn.NamespaceTypeGuestDefault)},
	}
	for _, c := range names {
		if c.ours != c.hcns {
			t.Errorf("we say %q, hcn says %q", c.ours, c.hcns)
		}
	}
}

func TestClassifyHCNPredicates(t *testing.T) {
	tests := []struct {
		name string
		err  error
		want ErrorKind
	}{
		{"a network hcn could not find is not found", hcn.NetworkNotFoundError{NetworkName: "vxlan0"}, KindNotFound},
		{"an endpoint hcn could not find is not found", hcn.EndpointNotFoundError{EndpointID: testEndpointID}, KindNotFound},
		{"a namespace hcn could not find is not found", hcn.NamespaceNotFoundError{NamespaceID: testNamespace}, KindNotFound},
		{"a load balancer hcn could not find is not found", hcn.LoadBalancerNotFoundError{LoadBalancerId: testLBID}, KindNotFound},
		{"a wrapped not-found error is still not found", fmt.Errorf("lookup: %w", hcn.NetworkNotFoundError{NetworkID: testNetworkID}), KindNotFound},
		{"an error hcn does not recognize is unknown", errors.New("something else broke"), KindUnknown},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := classify(OpGetNetworkByID, "obj", tt.err)
			var e *Error
			if !errors.As(err, &e) {
				t.Fatalf("classify returned %T %v, want *Error", err, err)
			}
			if e.Kind != tt.want || e.Op != OpGetNetworkByID || e.Object != "obj" {
				t.Errorf("classify = {Op %q Kind %v Object %q}, want {%q %v %q}", e.Op, e.Kind, e.Object, OpGetNetworkByID, tt.want, "obj")
			}
			if !errors.Is(err, tt.err) {
				t.Errorf("classified error does not wrap the hcn error %v", tt.err)
			}
		})
	}
	t.Run("no error stays no error", func(t *testing.T) {
		if err := classify(OpListNetworks, "", nil); err != nil {
			t.Errorf("classify(nil) = %v, want nil", err)
		}
	})
}

// underWine reports whether this process runs on Wine, where HNS is absent.
func underWine() bool {
	return windows.NewLazySystemDLL("ntdll.dll").NewProc("wine_get_version").Find() == nil
}

// fakeHCN reports whether computenetwork.dll is nodenet's stand-in.
func fakeHCN() bool {
	return windows.NewLazySystemDLL("computenetwork.dll").NewProc("NodenetFakeHcn").Find() == nil
}

const fakeHRESULTEnv = "NODENET_FAKE_HCN_HRESULT"

// Every code in errorCodeKinds, returned by (stand-in) HNS through hcn's
// real syscall and error path, must classify as the table says.
func TestClassifyRealHCNErrors(t *testing.T) {
	if !fakeHCN() {
		t.Skip("computenetwork.dll is not nodenet's stand-in; run hack/setup-wine.sh and use hack/wine-exec.sh")
	}
	for _, c := range errorCodeKinds {
		// HNS returns HRESULTs; a Win32 code reaches us as HRESULT_FROM_WIN32.
		hr := c.code
		if hr <= 0xFFFF {
			hr |= 0x80070000
		}
		t.Run(fmt.Sprintf("%s (HRESULT 0x%08X) is %v", c.name, hr, c.kind), func(t *testing.T) {
			t.Setenv(fakeHRESULTEnv, fmt.Sprintf("0x%08X", hr))
			err := client{}.DeleteNetwork(context.Background(), testNetworkID)
			var hcnErr *hcn.HcnError
			if !errors.As(err, &hcnErr) {
				t.Fatalf("DeleteNetwork = %T %v, want an *hcn.HcnError inside", err, err)
			}
			var e *Error
			if !errors.As(err, &e) {
				t.Fatalf("DeleteNetwork = %T %v, want *Error", err, err)
			}
			if e.Kind != c.kind || e.Msg != c.name || e.Code != c.code {
				t.Errorf("classified as %v %q code 0x%X, want %v %q code 0x%X (hcn error: %v)", e.Kind, e.Msg, e.Code, c.kind, c.name, c.code, hcnErr)
			}
		})
	}
	t.Run("an HRESULT nodenet has no rule for is unknown", func(t *testing.T) {
		t.Setenv(fakeHRESULTEnv, "0x803B00FF")
		err := client{}.DeleteNetwork(context.Background(), testNetworkID)
		if k := KindOf(err); k != KindUnknown {
			t.Errorf("KindOf(%v) = %v, want unknown", err, k)
		}
	})
}

// HNS is absent under Wine: the client must fail with classified errors
// instead of panicking. Calls into computenetwork.dll fail inside hcn, so
// they carry a real *hcn.HcnError; NewClient asks vmcompute.dll, which
// hcn reports without one.
func TestClientWithoutHNS(t *testing.T) {
	if !underWine() {
		t.Skip("assumes HNS is absent, as under Wine")
	}
	ctx := context.Background()
	tests := []struct {
		name    string
		call    func() error
		op      Op
		fromHCN bool
	}{
		{"NewClient reports the missing HNS as an *Error", func() error {
			_, err := NewClient()
			return err
		}, OpVersion, false},
		{"ListNetworks reports the missing HNS as an *Error", func() error {
			_, err := client{}.ListNetworks(ctx)
			return err
		}, OpListNetworks, true},
		{"GetLoadBalancer reports the missing HNS as an *Error", func() error {
			_, err := client{}.GetLoadBalancer(ctx, testLBID)
			return err
		}, OpGetLoadBalancer, true},
		{"CreateEndpoint reports the missing HNS as an *Error", func() error {
			_, err := client{}.CreateEndpoint(ctx, &Endpoint{Name: "pod", HostComputeNetwork: testNetworkID})
			return err
		}, OpCreateEndpoint, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var err error
			func() {
				defer func() {
					if r := recover(); r != nil {
						t.Fatalf("panicked: %v", r)
					}
				}()
				err = tt.call()
			}()
			var e *Error
			if !errors.As(err, &e) {
				t.Fatalf("got %T %v, want *Error", err, err)
			}
			if e.Op != tt.op {
				t.Errorf("Op = %q, want %q", e.Op, tt.op)
			}
			var hcnErr *hcn.HcnError
			if got := errors.As(err, &hcnErr); got != tt.fromHCN {
				t.Errorf("carries an *hcn.HcnError: %v, want %v (%v)", got, tt.fromHCN, err)
			}
			t.Logf("%v", err)
		})
	}
}

// OSBuild reads the build Windows reports; Wine reports one too (which one
// depends on the prefix's Windows version), so only its shape is checked.
func TestClientReadsTheOSBuild(t *testing.T) {
	b, err := client{}.OSBuild(context.Background())
	if err != nil {
		t.Fatalf("OSBuild: %v", err)
	}
	if want := int(windows.RtlGetVersion().BuildNumber); b.Number != want || b.Number == 0 {
		t.Errorf("OSBuild = %s, want build number %d", b, want)
	}
	if b.Revision < 0 {
		t.Errorf("OSBuild = %s: negative revision", b)
	}
	t.Logf("this host: build %s, %d backends per load balancer", b, MaxBackendsPerLoadBalancer(b))
}

// Under Wine (never on a real host) the test sets the registry's UBR and
// sees it come back as the revision.
func TestClientReadsTheUpdateRevision(t *testing.T) {
	if !underWine() {
		t.Skip("sets HKLM's UBR: only under Wine")
	}
	k, _, err := registry.CreateKey(registry.LOCAL_MACHINE, `SOFTWARE\Microsoft\Windows NT\CurrentVersion`, registry.QUERY_VALUE|registry.SET_VALUE)
	if err != nil {
		t.Fatal(err)
	}
	defer k.Close()
	old, _, oldErr := k.GetIntegerValue("UBR")
	t.Cleanup(func() {
		if oldErr == nil {
			_ = k.SetDWordValue("UBR", uint32(old))
		} else {
			_ = k.DeleteValue("UBR")
		}
	})
	for _, ubr := range []uint32{2745, 2746} {
		if err := k.SetDWordValue("UBR", ubr); err != nil {
			t.Fatal(err)
		}
		b, err := client{}.OSBuild(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if b.Revision != int(ubr) {
			t.Errorf("with UBR %d: OSBuild = %s", ubr, b)
		}
	}
	if err := k.DeleteValue("UBR"); err != nil {
		t.Fatal(err)
	}
	if b, err := (client{}).OSBuild(context.Background()); err != nil || b.Revision != 0 {
		t.Errorf("without UBR: OSBuild = %s, %v; want revision 0", b, err)
	}
}

// A failed version probe is not kept: the next call asks HNS again (under
// Wine HNS is absent, so both fail); an answer, once there, is kept.
func TestClientKeepsOnlyAnAnsweredVersion(t *testing.T) {
	if !underWine() {
		t.Skip("needs HNS to be absent: only under Wine")
	}
	c := client{version: &versionCache{}}
	for i := range 2 {
		if _, err := c.Version(context.Background()); err == nil {
			t.Fatalf("call %d: Version answered without HNS", i+1)
		}
		if _, ok := c.version.get(); ok {
			t.Fatalf("call %d: a failed probe was kept", i+1)
		}
	}
	c.version.set(Version{Major: 15, Minor: 5})
	if v, err := c.Version(context.Background()); err != nil || v != (Version{Major: 15, Minor: 5}) {
		t.Errorf("Version = %s, %v; want the kept 15.5 without asking HNS", v, err)
	}
}
