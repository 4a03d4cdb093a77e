package hns

import (
	"encoding/json"
	"fmt"
	"reflect"
)

// HNS policies are {"Type": T, "Settings": {...}} objects whose settings
// shape depends on T. We model the types nodenet uses as typed structs (so
// comparisons normalize away HNS's extra default fields and tests read
// well) and keep any other type as raw JSON so listing a host's objects
// never loses what someone else put there.

// NetworkPolicyType names a network policy.
type NetworkPolicyType string

// Network policy types nodenet models.
const (
	NetworkPolicyNetAdapterName    NetworkPolicyType = "NetAdapterName"
	NetworkPolicyDrMacAddress      NetworkPolicyType = "DrMacAddress"
	NetworkPolicyProviderAddress   NetworkPolicyType = "ProviderAddress"
	NetworkPolicyRemoteSubnetRoute NetworkPolicyType = "RemoteSubnetRoute"
	NetworkPolicyVxlanPort         NetworkPolicyType = "VxlanPort"
	NetworkPolicyHostRoute         NetworkPolicyType = "HostRoute"
)

// NetAdapterNamePolicy binds a network to a host adapter.
type NetAdapterNamePolicy struct {
	NetworkAdapterName string `json:",omitempty"`
}

// DrMacAddressPolicy sets the overlay network's distributed-router MAC.
type DrMacAddressPolicy struct {
	Address string `json:",omitempty"`
}

// ProviderAddressPolicy is the host's underlay address (network) or the
// underlay address of the host that owns a remote endpoint (endpoint).
type ProviderAddressPolicy struct {
	ProviderAddress string `json:",omitempty"`
}

// RemoteSubnetRoutePolicy routes a remote node's pod subnet through the
// overlay to that node's provider address.
type RemoteSubnetRoutePolicy struct {
	DestinationPrefix           string
	IsolationID                 uint16 `json:"IsolationId"`
	ProviderAddress             string
	DistributedRouterMacAddress string
}

// VxlanPortPolicy sets the VXLAN UDP port (HNS ≥ 10.3).
type VxlanPortPolicy struct {
	Port uint16
}

// NetworkPolicy is one policy of a network. Exactly the field matching Type
// is set; Raw carries the settings of a type this package doesn't model.
type NetworkPolicy struct {
	Type              NetworkPolicyType
	NetAdapterName    *NetAdapterNamePolicy
	DrMacAddress      *DrMacAddressPolicy
	ProviderAddress   *ProviderAddressPolicy
	RemoteSubnetRoute *RemoteSubnetRoutePolicy
	VxlanPort         *VxlanPortPolicy
	Raw               json.RawMessage
}

func (p NetworkPolicy) settings() any {
	switch p.Type {
	case NetworkPolicyNetAdapterName:
		return p.NetAdapterName
	case NetworkPolicyDrMacAddress:
		return p.DrMacAddress
	case NetworkPolicyProviderAddress:
		return p.ProviderAddress
	case NetworkPolicyRemoteSubnetRoute:
		return p.RemoteSubnetRoute
	case NetworkPolicyVxlanPort:
		return p.VxlanPort
	}
	return nil
}

// MarshalJSON writes the HNS {"Type","Settings"} shape.
func (p NetworkPolicy) MarshalJSON() ([]byte, error) {
	return marshalPolicy(string(p.Type), p.settings(), p.Raw)
}

// UnmarshalJSON reads the HNS {"Type","Settings"} shape.
func (p *NetworkPolicy) UnmarshalJSON(b []byte) error {
	typ, settings, err := splitPolicy(b)
	if err != nil {
		return err
	}
	*p = NetworkPolicy{Type: NetworkPolicyType(typ)}
	switch p.Type {
	case NetworkPolicyNetAdapterName:
		return decodeSettings(settings, &p.NetAdapterName)
	case NetworkPolicyDrMacAddress:
		return decodeSettings(settings, &p.DrMacAddress)
	case NetworkPolicyProviderAddress:
		return decodeSettings(settings, &p.ProviderAddress)
	case NetworkPolicyRemoteSubnetRoute:
		return decodeSettings(settings, &p.RemoteSubnetRoute)
	case NetworkPolicyVxlanPort:
		return decodeSettings(settings, &p.VxlanPort)
	}
	p.Raw = settings
	return nil
}

// EndpointPolicyType names an endpoint policy.
type EndpointPolicyType string

// Endpoint policy types nodenet models.
const (
	EndpointPolicyOutBoundNAT     EndpointPolicyType = "OutBoundNAT"
	EndpointPolicySDNRoute        EndpointPolicyType = "SDNRoute"
	EndpointPolicyProviderAddress EndpointPolicyType = "ProviderAddress"
	EndpointPolicyPortMapping     EndpointPolicyType = "PortMapping"
	EndpointPolicyEncapOverhead   EndpointPolicyType = "EncapOverhead"
	// EndpointPolicyACL is a firewall rule on the endpoint (hcn.ACL).
	EndpointPolicyACL EndpointPolicyType = "ACL"
)

// NatFlags are flags of NAT policies.
type NatFlags uint32

// NAT flags.
const (
	NatFlagsLocalRoutedVip NatFlags = 1
	NatFlagsIPv6           NatFlags = 2
)

// OutboundNATPolicy SNATs an endpoint's traffic to the host address, except
// to the Exceptions prefixes. With Destinations set it instead NATs only
// traffic to those addresses (win-bridge's loopback DSR uses this).
type OutboundNATPolicy struct {
	VirtualIP        string   `json:",omitempty"`
	Exceptions       []string `json:",omitempty"`
	Destinations     []string `json:",omitempty"`
	Flags            NatFlags `json:",omitempty"`
	MaxPortPoolUsage uint16   `json:",omitempty"`
}

// SDNRoutePolicy routes a prefix from an endpoint; NeedEncap sends it
// through the overlay (the service CIDR on overlay networks).
type SDNRoutePolicy struct {
	DestinationPrefix string `json:",omitempty"`
	NextHop           string `json:",omitempty"`
	NeedEncap         bool   `json:",omitempty"`
}

// PortMappingPolicy publishes an endpoint port on the host (hostPort).
type PortMappingPolicy struct {
	Protocol     Protocol `json:",omitempty"`
	InternalPort uint16   `json:",omitempty"`
	ExternalPort uint16   `json:",omitempty"`
	VIP          string   `json:",omitempty"`
	Flags        NatFlags `json:",omitempty"`
}

// EncapOverheadPolicy tells HNS the encapsulation overhead to account for.
type EncapOverheadPolicy struct {
	Overhead uint16 `json:",omitempty"`
}

// EndpointPolicy is one policy of an endpoint; see NetworkPolicy for the
// field rules.
type EndpointPolicy struct {
	Type            EndpointPolicyType
	OutboundNAT     *OutboundNATPolicy
	SDNRoute        *SDNRoutePolicy
	ProviderAddress *ProviderAddressPolicy
	PortMapping     *PortMappingPolicy
	EncapOverhead   *EncapOverheadPolicy
	ACL             *ACLPolicy
	Raw             json.RawMessage
}

func (p EndpointPolicy) settings() any {
	switch p.Type {
	case EndpointPolicyOutBoundNAT:
		return p.OutboundNAT
	case EndpointPolicySDNRoute:
		return p.SDNRoute
	case EndpointPolicyProviderAddress:
		return p.ProviderAddress
	case EndpointPolicyPortMapping:
		return p.PortMapping
	case EndpointPolicyEncapOverhead:
		return p.EncapOverhead
	case EndpointPolicyACL:
		return p.ACL
	}
	return nil
}

// MarshalJSON writes the HNS {"Type","Settings"} shape.
func (p EndpointPolicy) MarshalJSON() ([]byte, error) {
	return marshalPolicy(string(p.Type), p.settings(), p.Raw)
}

// UnmarshalJSON reads the HNS {"Type","Settings"} shape.
func (p *EndpointPolicy) UnmarshalJSON(b []byte) error {
	typ, settings, err := splitPolicy(b)
	if err != nil {
		return err
	}
	*p = EndpointPolicy{Type: EndpointPolicyType(typ)}
	switch p.Type {
	case EndpointPolicyOutBoundNAT:
		return decodeSettings(settings, &p.OutboundNAT)
	case EndpointPolicySDNRoute:
		return decodeSettings(settings, &p.SDNRoute)
	case EndpointPolicyProviderAddress:
		return decodeSettings(settings, &p.ProviderAddress)
	case EndpointPolicyPortMapping:
		return decodeSettings(settings, &p.PortMapping)
	case EndpointPolicyEncapOverhead:
		return decodeSettings(settings, &p.EncapOverhead)
	case EndpointPolicyACL:
		return decodeSettings(settings, &p.ACL)
	}
	p.Raw = settings
	return nil
}

// SubnetPolicyType names a subnet policy.
type SubnetPolicyType string

// Subnet policy types.
const (
	SubnetPolicyVSID SubnetPolicyType = "VSID"
	SubnetPolicyVLAN SubnetPolicyType = "VLAN"
)

// IsolationPolicy is the VSID (VXLAN network identifier on overlay) or
// VLAN of a subnet.
type IsolationPolicy struct {
	IsolationID uint32 `json:"IsolationId"`
}

// SubnetPolicy is one policy of a subnet.
type SubnetPolicy struct {
	Type      SubnetPolicyType
	Isolation *IsolationPolicy
	Raw       json.RawMessage
}

// MarshalJSON writes the HNS {"Type","Settings"} shape.
func (p SubnetPolicy) MarshalJSON() ([]byte, error) {
	var s any
	if p.Type == SubnetPolicyVSID || p.Type == SubnetPolicyVLAN {
		s = p.Isolation
	}
	return marshalPolicy(string(p.Type), s, p.Raw)
}

// UnmarshalJSON reads the HNS {"Type","Settings"} shape.
func (p *SubnetPolicy) UnmarshalJSON(b []byte) error {
	typ, settings, err := splitPolicy(b)
	if err != nil {
		return err
	}
	*p = SubnetPolicy{Type: SubnetPolicyType(typ)}
	if p.Type == SubnetPolicyVSID || p.Type == SubnetPolicyVLAN {
		return decodeSettings(settings, &p.Isolation)
	}
	p.Raw = settings
	return nil
}

type rawPolicy struct {
	Type     string
	Settings json.RawMessage `json:",omitempty"`
}

func marshalPolicy(typ string, typed any, raw json.RawMessage) ([]byte, error) {
	out := rawPolicy{Type: typ, Settings: raw}
	if typed != nil && !isNilPointer(typed) {
		b, err := json.Marshal(typed)
		if err != nil {
			return nil, fmt.Errorf("marshal %s policy settings: %w", typ, err)
		}
		out.Settings = b
	}
	return json.Marshal(out)
}

func splitPolicy(b []byte) (string, json.RawMessage, error) {
	var rp rawPolicy
	if err := json.Unmarshal(b, &rp); err != nil {
		return "", nil, fmt.Errorf("decode policy: %w", err)
	}
	if rp.Type == "" {
		return "", nil, fmt.Errorf("decode policy: missing Type")
	}
	return rp.Type, rp.Settings, nil
}

// decodeSettings fills *dst (a pointer to a settings pointer); absent or null
// settings leave a zero value so the typed field is always set for its type.
func decodeSettings[T any](settings json.RawMessage, dst **T) error {
	v := new(T)
	if len(settings) > 0 && string(settings) != "null" {
		if err := json.Unmarshal(settings, v); err != nil {
			return fmt.Errorf("decode policy settings: %w", err)
		}
	}
	*dst = v
	return nil
}

// isNilPointer reports a typed nil behind an interface (an unset policy field).
func isNilPointer(v any) bool {
	rv := reflect.ValueOf(v)
	return rv.Kind() == reflect.Pointer && rv.IsNil()
}
