package hns

import (
	"context"
	"fmt"
	"net/netip"
	"reflect"
	"strings"
)

// MinOverlayVSID is the lowest VXLAN network identifier Windows accepts on
// an Overlay network (lower ones are reserved by the host): flannel's
// Windows vxlan backend refuses a lower VNI ("must be greater than or
// equal to 4096 on Windows", pkg/backend/vxlan/vxlan_windows.go
// RegisterNetwork; Documentation/backends.md).
const MinOverlayVSID = 4096

// maxVSID is the largest 24-bit VXLAN network identifier.
const maxVSID = 1<<24 - 1

// knownNetworkTypes are hnslib's NetworkType values (hcn/hcnnetwork.go).
var knownNetworkTypes = map[NetworkType]bool{
	NetworkTypeNAT: true, NetworkTypeTransparent: true, NetworkTypeL2Bridge: true,
	NetworkTypeL2Tunnel: true, NetworkTypeICS: true, NetworkTypePrivate: true, NetworkTypeOverlay: true,
}

// CreateNetwork implements Interface.
func (s *Simulator) CreateNetwork(ctx context.Context, n *Network) (*Network, error) {
	var out *Network
	err := s.call(ctx, OpCreateNetwork, n.Name, func() error {
		if err := s.validateNetwork(n); err != nil {
			return err
		}
		// A second network of the same name: "A network with this name
		// already exists. (0x803b0010)", winerror.h
		// HCN_E_NETWORK_ALREADY_EXISTS (microsoft/hcsshim issue 850;
		// moby/moby issue 40345).
		for _, other := range s.networks {
			if strings.EqualFold(other.Name, n.Name) {
				return newError(OpCreateNetwork, KindAlreadyExists, n.Name, "a network with this name exists (%s)", other.ID)
			}
		}
		c := cloneNetwork(n)
		c.ID = s.newID(idNetwork)
		s.assignDRMAC(c)
		s.scheduleProviderAddress(c)
		if c.SchemaVersion == (SchemaVersion{}) {
			c.SchemaVersion = V2
		}
		s.networks[c.ID] = c
		out = cloneNetwork(c)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// assignDRMAC gives an Overlay network the distributed-router MAC HNS
// assigns on create when the request has none: flannel's Windows vxlan
// backend sends none, reads it back (hcn.DrMacAddressNetworkPolicySetting)
// and publishes it as the node's VtepMAC (flannel-io/flannel
// pkg/backend/vxlan/vxlan_windows.go RegisterNetwork). s.mu held.
func (s *Simulator) assignDRMAC(n *Network) {
	if n.Type != NetworkTypeOverlay {
		return
	}
	for _, p := range n.Policies {
		if p.Type == NetworkPolicyDrMacAddress {
			return
		}
	}
	// Its own range (fourth byte E7, like network IDs) so endpoint MACs
	// do not shift.
	mac := fmt.Sprintf("00-15-5D-E7-%02X-%02X", byte(s.seq>>8), byte(s.seq))
	n.Policies = append(n.Policies, NetworkPolicy{Type: NetworkPolicyDrMacAddress, DrMacAddress: &DrMacAddressPolicy{Address: mac}})
}

// validateNetwork checks a network definition the way HNS does on create.
// s.mu held.
func (s *Simulator) validateNetwork(n *Network) error {
	op := OpCreateNetwork
	// unsourced: HNS requiring a name. hcn.HostComputeNetwork.Name is
	// `json:",omitempty"` and no source says what HNS does without one;
	// kept because every lookup nodenet makes is by name
	// (GetNetworkByName), so a nameless network could never be found.
	if n.Name == "" {
		return newError(op, KindInvalid, "", "a network needs a name")
	}
	// winerror.h HCN_E_INVALID_NETWORK_TYPE ("Invalid network type",
	// Microsoft Learn "HCN Error Code"); the valid ones are hnslib's
	// hcn.NetworkType values.
	if !knownNetworkTypes[n.Type] {
		return newError(op, KindInvalid, n.Name, "unknown network type %q", n.Type)
	}
	// Overlay and L2Bridge endpoints take static addresses from the
	// network's subnet (Microsoft Learn, "Windows container network
	// drivers": l2bridge and overlay are created with --subnet; flannel
	// always sends one).
	subnets := n.Subnets()
	if (n.Type == NetworkTypeOverlay || n.Type == NetworkTypeL2Bridge) && len(subnets) == 0 {
		return newError(op, KindInvalid, n.Name, "a %s network needs at least one subnet", n.Type)
	}
	for _, sn := range subnets {
		if err := s.validateSubnet(n, sn); err != nil {
			return err
		}
	}
	for _, p := range n.Policies {
		if err := s.validateNetworkPolicy(op, n, p); err != nil {
			return err
		}
	}
	return nil
}

func (s *Simulator) validateSubnet(n *Network, sn Subnet) error {
	op := OpCreateNetwork
	// Schema: hcn.Subnet.IpAddressPrefix and hcn.Route's NextHop and
	// DestinationPrefix (hnslib hcn/hcnnetwork.go) are CIDR prefixes and
	// addresses; what does not parse is HCN_E_INVALID_NETWORK (winerror.h;
	// "invalid or missing parameters", Microsoft Learn "HCN Error Code").
	pfx, err := netip.ParsePrefix(sn.IpAddressPrefix)
	if err != nil {
		return newError(op, KindInvalid, n.Name, "subnet %q is not a prefix", sn.IpAddressPrefix)
	}
	// Feature gates here and below follow hnslib's version ranges
	// (hcn/hcnglobals.go, FeaturesFor).
	if pfx.Addr().Is6() && !s.features.IPv6DualStack {
		return newError(op, KindNotSupported, n.Name, "IPv6 subnet %s needs HNS %s (host has %s)", pfx, SupportedVersions(FeatureIPv6DualStack), s.opts.Version)
	}
	// hcn refuses, before HNS sees it, a subnet with an address prefix
	// whose routes lack a next hop or a default route (0.0.0.0/0 or ::/0):
	// hnslib v0.1.3 hcn/hcnnetwork.go HostComputeNetwork.Create
	// (microsoft/hcsshim PRs 473 and 520). A subnet with no routes at all
	// has no default route either.
	hasDefault := false
	for _, r := range sn.Routes {
		if r.NextHop == "" {
			return newError(op, KindInvalid, n.Name, "network create error, subnet %s has address prefix but no gateway specified", sn.IpAddressPrefix)
		}
		hasDefault = hasDefault || r.DestinationPrefix == "0.0.0.0/0" || r.DestinationPrefix == "::/0"
	}
	if sn.IpAddressPrefix != "" && !hasDefault {
		return newError(op, KindInvalid, n.Name, "network create error, no default gateway for subnet %s", sn.IpAddressPrefix)
	}
	for _, r := range sn.Routes {
		if _, err := netip.ParseAddr(r.NextHop); r.NextHop != "" && err != nil {
			return newError(op, KindInvalid, n.Name, "route next hop %q is not an address", r.NextHop)
		}
		if _, err := netip.ParsePrefix(r.DestinationPrefix); r.DestinationPrefix != "" && err != nil {
			return newError(op, KindInvalid, n.Name, "route destination %q is not a prefix", r.DestinationPrefix)
		}
	}
	// An Overlay subnet carries its VXLAN network identifier as a VSID
	// subnet policy (hcn.VsidPolicySetting, hnslib hcn/hcnpolicy.go), from
	// 4096 (flannel, MinOverlayVSID) within VXLAN's 24 bits. unsourced:
	// that HNS refuses an Overlay subnet with no VSID at all (flannel's
	// vxlan backend always sends one); kept so a lost policy fails here.
	vsid := uint32(0)
	for _, p := range sn.Policies {
		if p.Type == SubnetPolicyVSID && p.Isolation != nil {
			vsid = p.Isolation.IsolationID
		}
	}
	if n.Type == NetworkTypeOverlay {
		if vsid == 0 {
			return newError(op, KindInvalid, n.Name, "overlay subnet %s has no VSID policy", pfx)
		}
		if vsid < MinOverlayVSID || vsid > maxVSID {
			return newError(op, KindInvalid, n.Name, "overlay subnet %s: VSID %d outside %d..%d", pfx, vsid, MinOverlayVSID, maxVSID)
		}
	}
	return nil
}

// validateNetworkPolicy checks one network policy; s.mu held. Policy
// settings are the hnslib hcn/hcnpolicy.go types; a policy without its
// settings is HCN_E_INVALID_POLICY (winerror.h; "invalid or missing
// parameters", Microsoft Learn "HCN Error Code"). HostRoute alone has
// none: hnslib defines no settings type for hcn.HostRoute, and flannel
// sends "{}" (pkg/backend/vxlan/device_windows.go ensureNetwork). Feature
// gates follow hnslib's version ranges (hcn/hcnglobals.go, FeaturesFor).
func (s *Simulator) validateNetworkPolicy(op Op, n *Network, p NetworkPolicy) error {
	if isNilPointer(p.settings()) && p.Type != NetworkPolicyHostRoute {
		return newError(op, KindInvalid, n.Name, "policy %s has no settings", p.Type)
	}
	switch p.Type {
	case NetworkPolicyNetAdapterName:
		// winerror.h HCN_E_ADAPTER_NOT_FOUND ("An adapter was not found",
		// Microsoft Learn "HCN Error Code"; hcn.IsAdapterNotFoundError).
		if p.NetAdapterName == nil || s.adapter(p.NetAdapterName.NetworkAdapterName) == nil {
			name := ""
			if p.NetAdapterName != nil {
				name = p.NetAdapterName.NetworkAdapterName
			}
			return newError(op, KindNotFound, n.Name, "network adapter %q not found on the host (adapters: %s)", name, s.adapterNames())
		}
	case NetworkPolicyRemoteSubnetRoute:
		if !s.features.RemoteSubnet {
			return newError(op, KindNotSupported, n.Name, "RemoteSubnetRoute needs HNS %s (host has %s)", SupportedVersions(FeatureRemoteSubnet), s.opts.Version)
		}
		// Remote subnets are VXLAN routes: kube-proxy winkernel reads them
		// only from Overlay networks (pkg/proxy/winkernel/hns.go
		// getNetworkByName), flannel's vxlan backend adds them there.
		// unsourced: the error on other network types (HCN_E_INVALID_POLICY
		// assumed); kept so a route on L2Bridge is a bug, not a no-op.
		if n.Type != NetworkTypeOverlay {
			return newError(op, KindInvalid, n.Name, "RemoteSubnetRoute is only valid on Overlay networks")
		}
		return validateRemoteSubnetRoute(op, n.Name, p.RemoteSubnetRoute)
	case NetworkPolicyVxlanPort:
		if !s.features.VxlanPort {
			return newError(op, KindNotSupported, n.Name, "VxlanPort needs HNS %s (host has %s)", SupportedVersions(FeatureVxlanPort), s.opts.Version)
		}
		// hcn.VxlanPortPolicySetting.Port: a UDP port, 0 is none.
		if p.VxlanPort == nil || p.VxlanPort.Port == 0 {
			return newError(op, KindInvalid, n.Name, "VxlanPort needs a port")
		}
	case NetworkPolicyHostRoute:
		if !s.features.HostRoute {
			return newError(op, KindNotSupported, n.Name, "HostRoute needs HNS %s (host has %s)", SupportedVersions(FeatureHostRoute), s.opts.Version)
		}
	case NetworkPolicyProviderAddress:
		// hcn.ProviderAddress: its settings are an IP address (the
		// endpoint form is hcn.ProviderAddressEndpointPolicySetting).
		if _, err := netip.ParseAddr(p.ProviderAddress.ProviderAddress); err != nil {
			return newError(op, KindInvalid, n.Name, "provider address %q is not an address", p.ProviderAddress.ProviderAddress)
		}
	case NetworkPolicyDrMacAddress:
		// hcn.DrMacAddressNetworkPolicySetting: a MAC address.
		if !validMAC(p.DrMacAddress.Address) {
			return newError(op, KindInvalid, n.Name, "DR MAC %q is not a MAC address", p.DrMacAddress.Address)
		}
	}
	return nil
}

// validateRemoteSubnetRoute checks the fields of hnslib's
// hcn.RemoteSubnetRoutePolicySetting (hcn/hcnpolicy.go): a destination
// prefix, the remote host's provider address, its DR MAC, and the VSID of
// the overlay (from 4096, MinOverlayVSID, as flannel requires of VNIs).
func validateRemoteSubnetRoute(op Op, object string, r *RemoteSubnetRoutePolicy) error {
	if _, err := netip.ParsePrefix(r.DestinationPrefix); err != nil {
		return newError(op, KindInvalid, object, "remote subnet %q is not a prefix", r.DestinationPrefix)
	}
	if _, err := netip.ParseAddr(r.ProviderAddress); err != nil {
		return newError(op, KindInvalid, object, "remote subnet %s: provider address %q is not an address", r.DestinationPrefix, r.ProviderAddress)
	}
	if !validMAC(r.DistributedRouterMacAddress) {
		return newError(op, KindInvalid, object, "remote subnet %s: DR MAC %q is not a MAC address", r.DestinationPrefix, r.DistributedRouterMacAddress)
	}
	if r.IsolationID < MinOverlayVSID {
		return newError(op, KindInvalid, object, "remote subnet %s: isolation ID %d below %d", r.DestinationPrefix, r.IsolationID, MinOverlayVSID)
	}
	return nil
}

// validMAC accepts HNS's dash form and the colon form.
func validMAC(s string) bool {
	parts := strings.FieldsFunc(s, func(r rune) bool { return r == '-' || r == ':' })
	if len(parts) != 6 {
		return false
	}
	for _, p := range parts {
		if len(p) != 2 || strings.Trim(strings.ToLower(p), "0123456789abcdef") != "" {
			return false
		}
	}
	return true
}

func (s *Simulator) adapter(name string) *HostAdapter {
	for i := range s.opts.HostAdapters {
		if strings.EqualFold(s.opts.HostAdapters[i].Name, name) {
			return &s.opts.HostAdapters[i]
		}
	}
	return nil
}

func (s *Simulator) adapterNames() string {
	var names []string
	for _, a := range s.opts.HostAdapters {
		names = append(names, a.Name)
	}
	return strings.Join(names, ", ")
}

// GetNetworkByID implements Interface. Not found is hnslib's
// hcn.NetworkNotFoundError (hcn/hcnnetwork.go GetNetworkByID: the query
// returns no network).
func (s *Simulator) GetNetworkByID(ctx context.Context, id string) (*Network, error) {
	var out *Network
	err := s.call(ctx, OpGetNetworkByID, id, func() error {
		n, ok := s.networks[strings.ToUpper(id)]
		if !ok {
			return newError(OpGetNetworkByID, KindNotFound, id, "no such network")
		}
		out = cloneNetwork(n)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// GetNetworkByName implements Interface. Not found is hnslib's
// hcn.NetworkNotFoundError (hcn/hcnnetwork.go GetNetworkByName).
func (s *Simulator) GetNetworkByName(ctx context.Context, name string) (*Network, error) {
	var out *Network
	err := s.call(ctx, OpGetNetworkByName, name, func() error {
		for _, n := range s.networks {
			if strings.EqualFold(n.Name, name) {
				out = cloneNetwork(n)
				return nil
			}
		}
		return newError(OpGetNetworkByName, KindNotFound, name, "no such network")
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// ListNetworks implements Interface.
func (s *Simulator) ListNetworks(ctx context.Context) ([]Network, error) {
	var out []Network
	err := s.call(ctx, OpListNetworks, "", func() error {
		for _, id := range sortedIDs(s.networks) {
			out = append(out, *cloneNetwork(s.networks[id]))
		}
		return nil
	})
	return out, err
}

// DeleteNetwork implements Interface. An unknown ID is winerror.h
// HCN_E_NETWORK_NOT_FOUND ("The network was not found", Microsoft Learn
// "HCN Error Code").
func (s *Simulator) DeleteNetwork(ctx context.Context, id string) error {
	return s.call(ctx, OpDeleteNetwork, id, func() error {
		id = strings.ToUpper(id)
		if _, ok := s.networks[id]; !ok {
			return newError(OpDeleteNetwork, KindNotFound, id, "no such network")
		}
		n := 0
		for _, ep := range s.endpoints {
			if ep.HostComputeNetwork == id {
				n++
			}
		}
		// unsourced: refusing while endpoints remain (winerror.h
		// HCN_E_ENTITY_HAS_REFERENCES names such an error, but no source
		// says DeleteNetwork returns it); kept because callers
		// (overlay/hnsnet, cni) delete endpoints first and must not rely
		// on HNS removing them.
		if n > 0 {
			return newError(OpDeleteNetwork, KindInUse, id, "network still has %d endpoints", n)
		}
		delete(s.networks, id)
		delete(s.pendingPA, id)
		return nil
	})
}

// AddNetworkPolicies implements Interface (hnslib hcn/hcnnetwork.go
// AddPolicy: ModifyNetworkSettings with RequestTypeAdd). An unknown
// network is HCN_E_NETWORK_NOT_FOUND (winerror.h).
func (s *Simulator) AddNetworkPolicies(ctx context.Context, networkID string, policies []NetworkPolicy) error {
	return s.call(ctx, OpAddNetworkPolicies, networkID, func() error {
		n, ok := s.networks[strings.ToUpper(networkID)]
		if !ok {
			return newError(OpAddNetworkPolicies, KindNotFound, networkID, "no such network")
		}
		for _, p := range policies {
			if err := s.validateNetworkPolicy(OpAddNetworkPolicies, n, p); err != nil {
				return err
			}
			// A second route for the same prefix: winerror.h
			// HCN_E_POLICY_ALREADY_EXISTS. unsourced: that HNS checks this
			// per prefix; kept so a changed route is replaced (remove, then
			// add), never stacked.
			if p.Type == NetworkPolicyRemoteSubnetRoute {
				if old := findRemoteSubnetRoute(n, p.RemoteSubnetRoute.DestinationPrefix); old != nil {
					return newError(OpAddNetworkPolicies, KindAlreadyExists, networkID, "a remote subnet route for %s exists (via %s)", old.DestinationPrefix, old.ProviderAddress)
				}
			}
		}
		for _, p := range policies {
			n.Policies = append(n.Policies, cloneNetworkPolicy(p))
		}
		return nil
	})
}

func findRemoteSubnetRoute(n *Network, prefix string) *RemoteSubnetRoutePolicy {
	for _, p := range n.Policies {
		if p.Type == NetworkPolicyRemoteSubnetRoute && p.RemoteSubnetRoute != nil && p.RemoteSubnetRoute.DestinationPrefix == prefix {
			return p.RemoteSubnetRoute
		}
	}
	return nil
}

// RemoveNetworkPolicies implements Interface: each policy must equal one on
// the network (hnslib hcn/hcnnetwork.go RemovePolicy sends the policy
// itself, not an ID). One that is not there is winerror.h
// HCN_E_POLICY_NOT_FOUND ("An expected policy was not found", Microsoft
// Learn "HCN Error Code").
func (s *Simulator) RemoveNetworkPolicies(ctx context.Context, networkID string, policies []NetworkPolicy) error {
	return s.call(ctx, OpRemoveNetworkPolicies, networkID, func() error {
		n, ok := s.networks[strings.ToUpper(networkID)]
		if !ok {
			return newError(OpRemoveNetworkPolicies, KindNotFound, networkID, "no such network")
		}
		kept := append([]NetworkPolicy(nil), n.Policies...)
		for _, p := range policies {
			i := indexPolicy(kept, p)
			if i < 0 {
				return newError(OpRemoveNetworkPolicies, KindNotFound, networkID, "no %s policy equal to the one given", p.Type)
			}
			kept = append(kept[:i], kept[i+1:]...)
		}
		n.Policies = kept
		return nil
	})
}

func indexPolicy(ps []NetworkPolicy, p NetworkPolicy) int {
	for i, q := range ps {
		if q.Type == p.Type && reflect.DeepEqual(q.settings(), p.settings()) && string(q.Raw) == string(p.Raw) {
			return i
		}
	}
	return -1
}
