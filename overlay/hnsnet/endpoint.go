package hnsnet

import (
	"context"
	"fmt"
	"net/netip"
	"strings"

	"github.com/nodenet/nodenet/hns"
)

// ensureEndpoint makes our own endpoint on nw exist with plan's address:
// the source VIP (overlay) or the host endpoint (l2bridge, attached to the
// host). One ListEndpoints read when it is already right.
func (n *Network) ensureEndpoint(ctx context.Context, p *plan, nw *hns.Network, up uplink) (*hns.Endpoint, error) {
	eps, err := n.hns.ListEndpoints(ctx, nw.ID)
	if err != nil {
		return nil, fmt.Errorf("list endpoints of HNS network %q: %w", nw.Name, err)
	}
	var named, holder *hns.Endpoint
	for i := range eps {
		ep := &eps[i]
		if strings.EqualFold(ep.Name, p.epName) && named == nil {
			named = ep
		}
		if !ep.IsRemote() && hasIP(ep, p.epIP) && holder == nil {
			holder = ep
		}
	}
	if named != nil && named == holder {
		return n.attachHost(ctx, p, named)
	}
	if named != nil {
		// Ours, with a stale address (the pod CIDR or offset changed).
		if err := n.hns.DeleteEndpoint(ctx, named.ID); err != nil && !hns.IsNotFound(err) {
			return nil, fmt.Errorf("replace endpoint %q (%s): %w", named.Name, strings.Join(named.IPs(), ","), err)
		}
		n.log.Info("deleted own endpoint with a stale address", "endpoint", named.Name, "had", named.IPs(), "want", p.epIP)
	}
	if holder != nil {
		// kube-proxy creates the source VIP endpoint without a name and
		// outside any namespace: adopt that one, refuse anything else.
		if holder.Name == "" && holder.HostComputeNamespace == "" {
			n.log.Info("adopted an unnamed endpoint holding our address", "endpoint", holder.ID, "ip", p.epIP)
			return n.attachHost(ctx, p, holder)
		}
		return nil, fmt.Errorf("address %s, reserved for %s, is held by endpoint %s (%q) on HNS network %q", p.epIP, p.epName, holder.ID, holder.Name, nw.Name)
	}
	want := &hns.Endpoint{
		Name:               p.epName,
		HostComputeNetwork: nw.ID,
		IpConfigurations:   []hns.IPConfig{{IpAddress: p.epIP.String(), PrefixLength: uint8(p.cidrs[0].Bits())}},
		SchemaVersion:      hns.V2,
	}
	if p.netType == hns.NetworkTypeOverlay && len(up.Holder.MAC) == 6 {
		// kube-proxy gives its source-VIP endpoint the host's MAC.
		want.MacAddress = dashMAC(up.Holder.MAC)
	}
	ep, err := n.hns.CreateEndpoint(ctx, want)
	if err != nil {
		return nil, fmt.Errorf("create endpoint %q (%s) on HNS network %q: %w", p.epName, p.epIP, nw.Name, err)
	}
	n.log.Info("created endpoint", "endpoint", ep.Name, "id", ep.ID, "ip", p.epIP)
	return n.attachHost(ctx, p, ep)
}

// attachHost attaches the l2bridge host endpoint to the host, as flannel
// host-gw does with HNS v1's HostAttach(1) (compartment 1, the host's).
// In the v2 API that is membership of the host's default namespace, which
// every Windows host has (hns.HostDefaultNamespace): the endpoint's
// HostComputeNamespace says it is attached; otherwise it joins that
// namespace (1 write). Only a host that lists none gets one created.
func (n *Network) attachHost(ctx context.Context, p *plan, ep *hns.Endpoint) (*hns.Endpoint, error) {
	if p.netType != hns.NetworkTypeL2Bridge || ep.HostComputeNamespace != "" {
		return ep, nil
	}
	nss, err := n.hns.ListNamespaces(ctx)
	if err != nil {
		return nil, fmt.Errorf("list HNS namespaces to attach endpoint %q to the host: %w", ep.Name, err)
	}
	ns := hns.HostDefaultNamespace(nss)
	if ns == nil {
		n.log.Info("Warning: HNS lists no default host namespace; creating one", "endpoint", ep.Name, "namespaces", len(nss))
		if ns, err = n.hns.CreateNamespace(ctx, &hns.Namespace{Type: hns.NamespaceTypeHostDefault}); err != nil {
			return nil, fmt.Errorf("create the host namespace for endpoint %q: %w", ep.Name, err)
		}
	}
	if err := n.hns.AddNamespaceEndpoint(ctx, ns.ID, ep.ID); err != nil {
		return nil, fmt.Errorf("attach endpoint %q to the host namespace %s: %w", ep.Name, ns.ID, err)
	}
	ep.HostComputeNamespace = ns.ID
	return ep, nil
}

func hasIP(ep *hns.Endpoint, ip netip.Addr) bool {
	for _, c := range ep.IpConfigurations {
		if a, err := netip.ParseAddr(c.IpAddress); err == nil && a == ip {
			return true
		}
	}
	return false
}
