package hns

import (
	"context"
	"net/netip"
	"slices"
	"strings"
)

// CreateEndpoint implements Interface. hnslib creates an endpoint on its
// network (hcn/hcnnetwork.go CreateEndpoint, CreateRemoteEndpoint): an
// unknown network is winerror.h HCN_E_NETWORK_NOT_FOUND ("The network was
// not found", Microsoft Learn "HCN Error Code").
func (s *Simulator) CreateEndpoint(ctx context.Context, ep *Endpoint) (*Endpoint, error) {
	var out *Endpoint
	err := s.call(ctx, OpCreateEndpoint, endpointLabel(ep), func() error {
		n, ok := s.networks[strings.ToUpper(ep.HostComputeNetwork)]
		if !ok {
			return newError(OpCreateEndpoint, KindNotFound, endpointLabel(ep), "network %q not found", ep.HostComputeNetwork)
		}
		if err := s.validateEndpoint(n, ep); err != nil {
			return err
		}
		c := cloneEndpoint(ep)
		c.ID = s.newID(idEndpoint)
		c.HostComputeNetwork = n.ID
		// Read only: hnslib's HostComputeEndpoint.Create refuses a
		// request that sets it (hcn/hcnendpoint.go); AddNamespaceEndpoint
		// sets it.
		c.HostComputeNamespace = ""
		if c.MacAddress == "" {
			c.MacAddress = s.newMAC()
		}
		if c.SchemaVersion == (SchemaVersion{}) {
			c.SchemaVersion = V2
		}
		s.endpoints[c.ID] = c
		out = cloneEndpoint(c)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

func endpointLabel(ep *Endpoint) string {
	if ep.Name != "" {
		return ep.Name
	}
	return strings.Join(ep.IPs(), ",")
}

// validateEndpoint applies HNS's endpoint rules; s.mu held.
func (s *Simulator) validateEndpoint(n *Network, ep *Endpoint) error {
	op, label := OpCreateEndpoint, endpointLabel(ep)
	// unsourced: refusing an endpoint without an address. HNS keeps
	// endpoints with none (kube-proxy winkernel skips them when listing:
	// pkg/proxy/winkernel/hns.go getAllEndpointsByNetwork, "No
	// IpConfigurations found"), and may allocate one from the subnet.
	// Kept because nodenet always gives one (static IPAM, flannel-style)
	// and the tracer and load balancers need an endpoint's address.
	if len(ep.IpConfigurations) == 0 {
		return newError(op, KindInvalid, label, "an endpoint needs an IP configuration")
	}
	for _, ipc := range ep.IpConfigurations {
		// hcn.IpConfig.IpAddress; hnslib names the answer to a bad one
		// (hcn/hcnerrors.go HCN_E_INVALID_IP, winerror.h).
		addr, err := netip.ParseAddr(ipc.IpAddress)
		if err != nil {
			return newError(op, KindInvalid, label, "%q is not an IP address", ipc.IpAddress)
		}
		// hnslib's IPv6DualStack range (hcn/hcnglobals.go, FeaturesFor).
		if addr.Is6() && !s.features.IPv6DualStack {
			return newError(op, KindNotSupported, label, "IPv6 endpoint %s needs HNS %s (host has %s)", addr, SupportedVersions(FeatureIPv6DualStack), s.opts.Version)
		}
		// Local endpoints take addresses from the network's subnets
		// (winerror.h HCN_E_SUBNET_NOT_FOUND, "The network does not have a
		// subnet for this endpoint", Microsoft Learn "HCN Error Code"; the
		// simulator reports it as KindInvalid); remote ones stand for pods
		// and nodes elsewhere, outside them (kube-proxy winkernel creates
		// them with only an IP and a ProviderAddress policy:
		// pkg/proxy/winkernel/hns.go createEndpoint).
		if !ep.IsRemote() && !networkContains(n, addr) {
			return newError(op, KindInvalid, label, "%s is outside the subnets of network %s", addr, n.Name)
		}
		// A local and a remote endpoint may hold the same address: HNS on
		// Windows Server 2019 and 2022 accepts both (kubernetes PR 138000:
		// CNI creates the local endpoint for a reused pod IP while the
		// proxy's stale remote endpoint for it is still there; PR 131138 /
		// issue 130963: kube-proxy must tell the two apart). No source says
		// a later HNS refuses it, so every version accepts it here.
		// unsourced: refusing two of the same kind. kube-proxy's
		// hns.go notes "a bug in Windows Server 2019 that can cause two
		// endpoints to be created with the same IP address", so HNS may
		// accept even that; kept because nodenet must never ask for it.
		if other := s.endpointWithIPOfKind(n.ID, addr, ep.IsRemote()); other != nil {
			return newError(op, KindAlreadyExists, label, "%s is in use by endpoint %s on network %s", addr, other.ID, n.Name)
		}
	}
	// hcn.HostComputeEndpoint.MacAddress: HNS's dash form (winerror.h
	// HCN_E_INVALID_ENDPOINT for a malformed one).
	if ep.MacAddress != "" && !validMAC(ep.MacAddress) {
		return newError(op, KindInvalid, label, "MAC %q is not a MAC address", ep.MacAddress)
	}
	for _, p := range ep.Policies {
		if err := s.validateEndpointPolicy(label, ep, p); err != nil {
			return err
		}
	}
	return nil
}

// validateEndpointPolicy checks one endpoint policy against its hnslib
// settings type (hcn/hcnpolicy.go: OutboundNatPolicySetting's Exceptions
// and Destinations, SDNRoutePolicySetting.DestinationPrefix,
// ProviderAddressEndpointPolicySetting, PortMappingPolicySetting): what
// those fields cannot hold is winerror.h HCN_E_INVALID_POLICY ("invalid
// or missing parameters", Microsoft Learn "HCN Error Code").
func (s *Simulator) validateEndpointPolicy(label string, ep *Endpoint, p EndpointPolicy) error {
	op := OpCreateEndpoint
	if isNilPointer(p.settings()) {
		return newError(op, KindInvalid, label, "policy %s has no settings", p.Type)
	}
	switch p.Type {
	case EndpointPolicyOutBoundNAT:
		for _, x := range append(slices.Clone(p.OutboundNAT.Exceptions), p.OutboundNAT.Destinations...) {
			if !validPrefixOrAddr(x) {
				return newError(op, KindInvalid, label, "OutBoundNAT entry %q is not an address or prefix", x)
			}
		}
	case EndpointPolicySDNRoute:
		if !validPrefixOrAddr(p.SDNRoute.DestinationPrefix) {
			return newError(op, KindInvalid, label, "SDNRoute destination %q is not a prefix", p.SDNRoute.DestinationPrefix)
		}
	case EndpointPolicyProviderAddress:
		if _, err := netip.ParseAddr(p.ProviderAddress.ProviderAddress); err != nil {
			return newError(op, KindInvalid, label, "provider address %q is not an address", p.ProviderAddress.ProviderAddress)
		}
	case EndpointPolicyPortMapping:
		return s.validateHostPort(label, p.PortMapping)
	case EndpointPolicyACL:
		return validateACL(label, p.ACL)
	}
	return nil
}

// validateHostPort checks a PortMapping policy (hcn.PortMappingPolicySetting,
// hnslib hcn/hcnpolicy.go): Protocol is TCP (6) or UDP (17), as its comment
// says; SCTP "is not supported on nodes that run Windows" (kubernetes.io
// "Protocols for Services"). Both ports are `omitempty`: 0 is a missing
// field, HCN_E_INVALID_POLICY (winerror.h).
func (s *Simulator) validateHostPort(label string, pm *PortMappingPolicy) error {
	op := OpCreateEndpoint
	if pm.Protocol != ProtocolTCP && pm.Protocol != ProtocolUDP {
		return newError(op, KindNotSupported, label, "port mapping protocol %s is not supported", pm.Protocol)
	}
	if pm.InternalPort == 0 || pm.ExternalPort == 0 {
		return newError(op, KindInvalid, label, "port mapping needs internal and external ports")
	}
	// A host port another endpoint publishes is refused: "HNS failed with
	// error : The object already exists" for a second `docker run -p
	// 8000:8000` (moby/moby issue 35023; RS3 briefly accepted it, a
	// regression Microsoft fixed). unsourced: the error's code; the
	// simulator answers KindPortAlreadyExists.
	for _, id := range sortedIDs(s.endpoints) {
		for _, q := range s.endpoints[id].Policies {
			if q.Type == EndpointPolicyPortMapping && q.PortMapping.Protocol == pm.Protocol &&
				q.PortMapping.ExternalPort == pm.ExternalPort && q.PortMapping.VIP == pm.VIP {
				return newError(op, KindPortAlreadyExists, label, "host port %s/%d is published by endpoint %s", pm.Protocol, pm.ExternalPort, id)
			}
		}
	}
	return nil
}

func validPrefixOrAddr(s string) bool {
	if _, err := netip.ParsePrefix(s); err == nil {
		return true
	}
	_, err := netip.ParseAddr(s)
	return err == nil
}

func networkContains(n *Network, addr netip.Addr) bool {
	for _, sn := range n.Subnets() {
		if p, err := netip.ParsePrefix(sn.IpAddressPrefix); err == nil && p.Contains(addr) {
			return true
		}
	}
	return false
}

// endpointWithIPOfKind finds a local (remote false) or remote endpoint of
// network networkID holding addr; s.mu held.
func (s *Simulator) endpointWithIPOfKind(networkID string, addr netip.Addr, remote bool) *Endpoint {
	for _, ep := range s.endpoints {
		if ep.HostComputeNetwork != networkID || ep.IsRemote() != remote {
			continue
		}
		for _, ipc := range ep.IpConfigurations {
			if a, err := netip.ParseAddr(ipc.IpAddress); err == nil && a == addr {
				return ep
			}
		}
	}
	return nil
}

// GetEndpointByID implements Interface. Not found is hnslib's
// hcn.EndpointNotFoundError (hcn/hcnendpoint.go GetEndpointByID).
func (s *Simulator) GetEndpointByID(ctx context.Context, id string) (*Endpoint, error) {
	var out *Endpoint
	err := s.call(ctx, OpGetEndpointByID, id, func() error {
		ep, ok := s.endpoints[strings.ToUpper(id)]
		if !ok {
			return newError(OpGetEndpointByID, KindNotFound, id, "no such endpoint")
		}
		out = cloneEndpoint(ep)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// GetEndpointByName implements Interface; with duplicate names the oldest
// endpoint wins, as hnslib returns the query's first match, and none is
// hcn.EndpointNotFoundError (hcn/hcnendpoint.go GetEndpointByName).
func (s *Simulator) GetEndpointByName(ctx context.Context, name string) (*Endpoint, error) {
	var out *Endpoint
	err := s.call(ctx, OpGetEndpointByName, name, func() error {
		for _, id := range sortedIDs(s.endpoints) {
			if ep := s.endpoints[id]; ep.Name != "" && strings.EqualFold(ep.Name, name) {
				out = cloneEndpoint(ep)
				return nil
			}
		}
		return newError(OpGetEndpointByName, KindNotFound, name, "no such endpoint")
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// ListEndpoints implements Interface.
func (s *Simulator) ListEndpoints(ctx context.Context, networkID string) ([]Endpoint, error) {
	var out []Endpoint
	err := s.call(ctx, OpListEndpoints, networkID, func() error {
		for _, id := range sortedIDs(s.endpoints) {
			ep := s.endpoints[id]
			if networkID == "" || strings.EqualFold(ep.HostComputeNetwork, networkID) {
				out = append(out, *cloneEndpoint(ep))
			}
		}
		return nil
	})
	return out, err
}

// DeleteEndpoint implements Interface. An unknown ID fails "The endpoint
// was not found" (winerror.h HCN_E_ENDPOINT_NOT_FOUND;
// Azure/azure-container-networking issue 715).
func (s *Simulator) DeleteEndpoint(ctx context.Context, id string) error {
	return s.call(ctx, OpDeleteEndpoint, id, func() error {
		id = strings.ToUpper(id)
		if _, ok := s.endpoints[id]; !ok {
			return newError(OpDeleteEndpoint, KindNotFound, id, "no such endpoint")
		}
		// HNS deletes an endpoint a load balancer still uses: the load
		// balancer stays, "degraded", with a reference to the missing
		// endpoint (microsoft/wcnscripts PR 21), and traffic it sends there
		// is lost (kubernetes issue 76316: winkernel deleted an endpoint
		// another Service's load balancer used, and that Service stopped
		// answering). The tracer drops what such a backend would get.
		s.forgetEndpoint(id)
		return nil
	})
}

// forgetEndpoint removes an endpoint and its namespace attachments. Load
// balancers that use it keep the reference, degraded (microsoft/wcnscripts
// PR 21; see DeleteEndpoint). s.mu held.
func (s *Simulator) forgetEndpoint(id string) {
	delete(s.endpoints, id)
	for _, ns := range s.namespaces {
		ns.EndpointIDs = slices.DeleteFunc(ns.EndpointIDs, func(x string) bool { return x == id })
	}
}

// CreateNamespace implements Interface.
func (s *Simulator) CreateNamespace(ctx context.Context, ns *Namespace) (*Namespace, error) {
	var out *Namespace
	err := s.call(ctx, OpCreateNamespace, "", func() error {
		c := &Namespace{ID: s.newID(idNamespace), Type: ns.Type}
		if c.Type == "" {
			c.Type = NamespaceTypeHost
		}
		s.namespaces[c.ID] = c
		out = cloneNamespace(c)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// GetNamespace implements Interface. Not found is hnslib's
// hcn.NamespaceNotFoundError (hcn/hcnnamespace.go GetNamespaceByID).
func (s *Simulator) GetNamespace(ctx context.Context, id string) (*Namespace, error) {
	var out *Namespace
	err := s.call(ctx, OpGetNamespace, id, func() error {
		ns, ok := s.namespaces[strings.ToUpper(id)]
		if !ok {
			return newError(OpGetNamespace, KindNotFound, id, "no such namespace")
		}
		out = cloneNamespace(ns)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// DeleteNamespace implements Interface. An unknown namespace is not
// found: opening one fails "hcnOpenNamespace failed in Win32: Element not
// found. (0x490)", winerror.h ERROR_NOT_FOUND (antrea-io/antrea issue
// 2301). unsourced: that hcnDeleteNamespace (hnslib hcn/hcnnamespace.go
// deleteNamespace, which does not open it first) answers the same.
func (s *Simulator) DeleteNamespace(ctx context.Context, id string) error {
	return s.call(ctx, OpDeleteNamespace, id, func() error {
		id = strings.ToUpper(id)
		ns, ok := s.namespaces[id]
		if !ok {
			return newError(OpDeleteNamespace, KindNotFound, id, "no such namespace")
		}
		for _, epID := range ns.EndpointIDs {
			if ep := s.endpoints[epID]; ep != nil {
				ep.HostComputeNamespace = ""
			}
		}
		delete(s.namespaces, id)
		return nil
	})
}

// AddNamespaceEndpoint implements Interface (hnslib
// hcn/hcnnamespace.go AddNamespaceEndpoint). An unknown namespace is
// ERROR_NOT_FOUND (antrea-io/antrea issue 2301), an unknown endpoint
// HCN_E_ENDPOINT_NOT_FOUND (winerror.h).
func (s *Simulator) AddNamespaceEndpoint(ctx context.Context, namespaceID, endpointID string) error {
	op := OpAddNamespaceEndpoint
	return s.call(ctx, op, endpointID, func() error {
		ns, ok := s.namespaces[strings.ToUpper(namespaceID)]
		if !ok {
			return newError(op, KindNotFound, namespaceID, "no such namespace")
		}
		ep, ok := s.endpoints[strings.ToUpper(endpointID)]
		if !ok {
			return newError(op, KindNotFound, endpointID, "no such endpoint")
		}
		// winerror.h HCN_E_INVALID_REMOTE_ENDPOINT_OPERATION, "This
		// requested operation is invalid for a remote endpoint"
		// (Microsoft Learn "HCN Error Code").
		if ep.IsRemote() {
			return newError(op, KindInvalid, endpointID, "a remote endpoint cannot join a namespace")
		}
		// winerror.h HCN_E_ENDPOINT_ALREADY_ATTACHED.
		if ep.HostComputeNamespace != "" {
			return newError(op, KindAlreadyExists, endpointID, "endpoint is attached to namespace %s", ep.HostComputeNamespace)
		}
		ep.HostComputeNamespace = ns.ID
		ns.EndpointIDs = append(ns.EndpointIDs, ep.ID)
		return nil
	})
}

// RemoveNamespaceEndpoint implements Interface. An unknown namespace is
// ERROR_NOT_FOUND ("namespace not found" when the runtime removed it
// first: Azure/azure-container-networking PR 1272; antrea-io/antrea issue
// 2301); an endpoint not in it is winerror.h HCN_E_ENDPOINT_NOT_ATTACHED
// (the simulator reports it as KindNotFound).
func (s *Simulator) RemoveNamespaceEndpoint(ctx context.Context, namespaceID, endpointID string) error {
	op := OpRemoveNamespaceEndpoint
	return s.call(ctx, op, endpointID, func() error {
		ns, ok := s.namespaces[strings.ToUpper(namespaceID)]
		if !ok {
			return newError(op, KindNotFound, namespaceID, "no such namespace")
		}
		id := strings.ToUpper(endpointID)
		if !slices.Contains(ns.EndpointIDs, id) {
			return newError(op, KindNotFound, endpointID, "endpoint is not attached to namespace %s", ns.ID)
		}
		ns.EndpointIDs = slices.DeleteFunc(ns.EndpointIDs, func(x string) bool { return x == id })
		if ep := s.endpoints[id]; ep != nil {
			ep.HostComputeNamespace = ""
		}
		return nil
	})
}
