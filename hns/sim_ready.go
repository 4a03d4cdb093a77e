package hns

import (
	"net/netip"
	"time"
)

// Network readiness. Real HNS returns from CreateNetwork before the
// network is usable: an Overlay network reports its management IP (its
// ProviderAddress policy, which flannel's Windows vxlan backend reads as
// the management IP and polls GetNetworkByID for, every 500 ms for up to
// 5 s, before it uses the network: flannel-io/flannel
// pkg/backend/vxlan/device_windows.go ensureNetwork/getManagementIP;
// host-gw waits the same way for HNS v1's ManagementIP:
// pkg/backend/hostgw/hostgw_windows.go). The simulator adds that policy
// SimulatorOptions.NetworkReadyDelay after the create. The v2 schema has
// no management IP for L2Bridge networks (only HNS v1's HNSNetwork has
// one, hnslib internal/hns/hnsnetwork.go), so they get nothing.

// pendingPA is a provider address a network gets at a later time.
type pendingPA struct {
	at   time.Time
	addr string
}

// scheduleProviderAddress gives a new Overlay network its provider
// address (the ProviderAddress policy flannel polls for:
// pkg/backend/vxlan/device_windows.go getManagementIP) now or after the
// configured delay, unless the request named one itself. s.mu held.
func (s *Simulator) scheduleProviderAddress(n *Network) {
	if n.Type != NetworkTypeOverlay || providerAddressOf(n) != "" {
		return
	}
	addr := s.managementIP(n)
	if addr == "" {
		return
	}
	if s.opts.NetworkReadyDelay <= 0 {
		addProviderAddress(n, addr)
		return
	}
	s.pendingPA[n.ID] = pendingPA{at: s.opts.Now().Add(s.opts.NetworkReadyDelay), addr: addr}
}

// settleNetworks adds the provider addresses whose time has come; every
// call runs it first, so a GetNetworkByID poll sees the address appear as
// flannel's does (pkg/backend/vxlan/device_windows.go ensureNetwork).
// s.mu held.
func (s *Simulator) settleNetworks() {
	if len(s.pendingPA) == 0 {
		return
	}
	now := s.opts.Now()
	for id, p := range s.pendingPA {
		if now.Before(p.at) {
			continue
		}
		if n := s.networks[id]; n != nil {
			addProviderAddress(n, p.addr)
		}
		delete(s.pendingPA, id)
	}
}

// managementIP is the first IPv4 address of the network's adapter (its
// NetAdapterName policy, else the host's first adapter). s.mu held.
func (s *Simulator) managementIP(n *Network) string {
	for _, ip := range s.networkAdapter(n).IPs {
		if a, err := netip.ParseAddr(ip); err == nil && a.Is4() {
			return a.String()
		}
	}
	return ""
}

func providerAddressOf(n *Network) string {
	for _, p := range n.Policies {
		if p.Type == NetworkPolicyProviderAddress && p.ProviderAddress != nil {
			return p.ProviderAddress.ProviderAddress
		}
	}
	return ""
}

func addProviderAddress(n *Network, addr string) {
	n.Policies = append(n.Policies, NetworkPolicy{Type: NetworkPolicyProviderAddress, ProviderAddress: &ProviderAddressPolicy{ProviderAddress: addr}})
}
