package hnsnet

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"slices"

	"github.com/nodenet/nodenet/config"
	"github.com/nodenet/nodenet/hns"
	"github.com/nodenet/nodenet/overlay"
)

// local is what EnsureLocal made or adopted; SyncRemotes and Check work
// from it.
type local struct {
	plan       *plan
	networkID  string
	endpointID string
	uplink     uplink
}

// EnsureLocal implements overlay.Interface.
func (n *Network) EnsureLocal(ctx context.Context, spec overlay.LocalSpec) (*overlay.LocalNetwork, error) {
	start := n.hns.writes
	p, err := planFor(spec)
	if err != nil {
		return nil, err
	}
	if p.netType == hns.NetworkTypeL2Bridge && n.routes == nil {
		return nil, fmt.Errorf("hnsnet: l2bridge mode needs Options.HostRoutes")
	}
	if p.netType == hns.NetworkTypeL2Bridge && n.forwarding == nil {
		return nil, fmt.Errorf("hnsnet: l2bridge mode needs Options.Forwarding")
	}
	up, err := n.findUplink(ctx, &p.spec)
	if err != nil {
		return nil, err
	}
	if err := n.checkHostFeatures(ctx, p); err != nil {
		return nil, err
	}
	want := p.desiredNetwork(up.Name)
	nw, err := n.ensureNetwork(ctx, p, want)
	if err != nil {
		return nil, err
	}
	nw, vnic, err := n.waitReady(ctx, nw, up, spec.NodeIP)
	if err != nil {
		return nil, err
	}
	if p.netType == hns.NetworkTypeOverlay {
		if err := n.ensureHostRoute(ctx, nw); err != nil {
			return nil, err
		}
	}
	ep, err := n.ensureEndpoint(ctx, p, nw, up)
	if err != nil {
		return nil, err
	}
	if p.netType == hns.NetworkTypeL2Bridge {
		if err := n.enableForwarding(ctx, p, vnic); err != nil {
			return nil, err
		}
	}
	out := &overlay.LocalNetwork{
		Mode:        spec.Mode,
		Name:        nw.Name,
		ID:          nw.ID,
		PodCIDRs:    slices.Clone(p.cidrs),
		Gateways:    slices.Clone(p.gateways),
		Reserved:    []netip.Addr{p.epIP},
		MTU:         mtu(spec, up.Holder),
		NodeIP:      spec.NodeIP,
		NodeIPv6:    spec.NodeIPv6,
		Uplink:      up.Name,
		NodeSubnets: nodeSubnets(up.Holder),
	}
	if p.netType == hns.NetworkTypeOverlay {
		out.SourceVIP, out.SourceVIPEndpointID = p.epIP, ep.ID
		if out.VtepMAC, err = n.vtepMAC(ctx, nw); err != nil {
			return nil, err
		}
	}
	n.cur = &local{plan: p, networkID: nw.ID, endpointID: ep.ID, uplink: up}
	out.Writes = n.hns.writes - start
	n.log.V(2).Info("local network ready", "network", nw.Name, "id", nw.ID, "mode", spec.Mode, "endpoint", ep.ID, "writes", out.Writes)
	return out, nil
}

// ensureNetwork adopts the network of the spec's name when it matches, and
// otherwise creates it (or, with AllowRecreate, replaces it).
func (n *Network) ensureNetwork(ctx context.Context, p *plan, want *hns.Network) (*hns.Network, error) {
	have, err := n.hns.GetNetworkByName(ctx, want.Name)
	switch {
	case err == nil:
		m := mismatch(have, want)
		if m == nil {
			return have, nil
		}
		if !p.spec.AllowRecreate {
			return nil, m
		}
		if err := n.removeNetwork(ctx, p, have, m); err != nil {
			return nil, err
		}
	case !hns.IsNotFound(err):
		return nil, fmt.Errorf("look up HNS network %q: %w", want.Name, err)
	}
	created, err := n.hns.CreateNetwork(ctx, want)
	if err != nil {
		return nil, fmt.Errorf("create HNS network %q: %w", want.Name, err)
	}
	n.log.Info("created HNS network", "network", created.Name, "id", created.ID, "type", created.Type)
	return created, nil
}

// removeNetwork deletes a mismatching network for AllowRecreate, but only
// when nothing but our own endpoint is on it: deleting it under pods (or
// the proxy's remote endpoints) would cut them off.
func (n *Network) removeNetwork(ctx context.Context, p *plan, have *hns.Network, m *overlay.MismatchError) error {
	eps, err := n.hns.ListEndpoints(ctx, have.ID)
	if err != nil {
		return fmt.Errorf("list endpoints of HNS network %q: %w", have.Name, err)
	}
	var ours []string
	pods, remote := 0, 0
	for _, ep := range eps {
		switch {
		case isOurs(ep.Name, have.Name):
			ours = append(ours, ep.ID)
		case ep.IsRemote():
			remote++
		default:
			pods++
		}
	}
	if pods+remote > 0 {
		return fmt.Errorf("network.allowRecreate is set but HNS network %q still has %d pod endpoints and %d remote endpoints attached; "+
			"drain the node (or delete them) before it can be recreated: %w", have.Name, pods, remote, m)
	}
	for _, id := range ours {
		if err := n.hns.DeleteEndpoint(ctx, id); err != nil && !hns.IsNotFound(err) {
			return fmt.Errorf("delete endpoint %s of HNS network %q: %w", id, have.Name, err)
		}
	}
	if err := n.hns.DeleteNetwork(ctx, have.ID); err != nil {
		return fmt.Errorf("delete mismatching HNS network %q: %w", have.Name, err)
	}
	n.log.Info("deleted mismatching HNS network to recreate it", "network", have.Name, "id", have.ID, "field", m.Field, "have", m.Have, "want", m.Want)
	return nil
}

func isOurs(name, network string) bool {
	return name != "" && (name == SourceVIPEndpointName(network) || name == HostEndpointName(network))
}

// vtepMAC is the network's distributed-router MAC, the address HNS
// answers VXLAN traffic on and that flannel's Windows backend publishes
// as VtepMAC. HNS assigns it on create; it lives as long as the network,
// so a restart adopts the same one.
func (n *Network) vtepMAC(ctx context.Context, nw *hns.Network) (net.HardwareAddr, error) {
	if mac, ok := drMAC(nw); ok {
		return mac, nil
	}
	// A create response may not carry what HNS fills in afterwards.
	again, err := n.hns.GetNetworkByID(ctx, nw.ID)
	if err != nil {
		return nil, fmt.Errorf("read HNS network %q for its DR MAC: %w", nw.Name, err)
	}
	if mac, ok := drMAC(again); ok {
		return mac, nil
	}
	return nil, fmt.Errorf("HNS network %q has no DrMacAddress policy yet: other nodes cannot reach it through VXLAN", nw.Name)
}

func drMAC(nw *hns.Network) (net.HardwareAddr, bool) {
	for _, p := range nw.Policies {
		if p.Type == hns.NetworkPolicyDrMacAddress && p.DrMacAddress != nil {
			if mac, err := net.ParseMAC(p.DrMacAddress.Address); err == nil {
				return mac, true
			}
		}
	}
	return nil, false
}

func mtu(spec overlay.LocalSpec, a Adapter) int {
	if spec.MTU > 0 {
		return spec.MTU
	}
	m := a.MTU
	if m <= 0 {
		m = 1500
	}
	if spec.Mode == config.NetworkModeOverlay {
		m -= overlay.VXLANOverhead
	}
	return m
}

func nodeSubnets(a Adapter) []netip.Prefix {
	var out []netip.Prefix
	for _, p := range a.IPs {
		if m := p.Masked(); !slices.Contains(out, m) {
			out = append(out, m)
		}
	}
	return out
}

// ensureHostRoute gives an Overlay network the HostRoute policy, which
// lets the host itself reach the pods on it (node→pod, kubelet probes), as
// flannel adds it after creating its network. A network that has it is
// not written to; a host whose HNS lacks the policy goes without, as with
// flannel (probes from the node then fail, which the log says).
func (n *Network) ensureHostRoute(ctx context.Context, nw *hns.Network) error {
	for _, p := range nw.Policies {
		if p.Type == hns.NetworkPolicyHostRoute {
			return nil
		}
	}
	feat, err := n.hns.Features(ctx)
	if err != nil {
		return fmt.Errorf("read HNS features: %w", err)
	}
	if !feat.HostRoute {
		v, _ := hns.MinimumVersion("HostRoute")
		n.log.Info("Warning: this host's HNS has no HostRoute policy; the node itself cannot reach its pods on the overlay", "needs", v.String())
		return nil
	}
	policy := hns.NetworkPolicy{Type: hns.NetworkPolicyHostRoute, Raw: []byte("{}")}
	if err := n.hns.AddNetworkPolicies(ctx, nw.ID, []hns.NetworkPolicy{policy}); err != nil {
		return fmt.Errorf("add the HostRoute policy to HNS network %q: %w", nw.Name, err)
	}
	nw.Policies = append(nw.Policies, policy)
	return nil
}

// checkHostFeatures refuses, before anything is created, what this host's
// HNS version cannot do (hnslib's ranges, hns.FeaturesFor): a VXLAN port
// other than 4789, an IPv6 pod CIDR without dual-stack. Real HNS would
// refuse the network with a bare HRESULT; the operator gets the field.
func (n *Network) checkHostFeatures(ctx context.Context, p *plan) error {
	ipv6 := false
	for _, c := range p.cidrs {
		ipv6 = ipv6 || c.Addr().Is6()
	}
	customPort := p.netType == hns.NetworkTypeOverlay && p.port != DefaultVXLANPort
	if !customPort && !ipv6 {
		return nil
	}
	feat, err := n.hns.Features(ctx)
	if err != nil {
		return fmt.Errorf("read HNS features: %w", err)
	}
	if customPort && !feat.VxlanPort {
		return &overlay.SpecError{Field: "network.vxlan.port",
			Reason: fmt.Sprintf("this host's HNS cannot use VXLAN port %d (needs HNS %s); use %d", p.port, hns.SupportedVersions(hns.FeatureVxlanPort), DefaultVXLANPort)}
	}
	if ipv6 && !feat.IPv6DualStack {
		return &overlay.SpecError{Field: "node.spec.podCIDRs",
			Reason: fmt.Sprintf("this host's HNS has no IPv6 dual-stack (needs HNS %s); give the node an IPv4 pod CIDR only", hns.SupportedVersions(hns.FeatureIPv6DualStack))}
	}
	return nil
}
