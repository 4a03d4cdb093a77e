package hnsnet

import (
	"context"
	"fmt"
	"net/netip"
	"time"

	"github.com/nodenet/nodenet/hns"
)

// Readiness defaults, flannel's: its Windows backends poll every 500 ms,
// 5 s for the network's management IP and then up to 45 s for the host
// interface holding it (flannel-io/flannel
// pkg/backend/vxlan/device_windows.go ensureNetwork and
// checkHostNetworkReady; pkg/backend/hostgw/hostgw_windows.go).
const (
	DefaultReadyTimeout      = 50 * time.Second
	DefaultReadyPollInterval = 500 * time.Millisecond
)

// NotReadyError says the HNS network exists but is not usable yet: HNS
// returned from CreateNetwork before filling in its provider address, or
// the host interface holding the node IP has not come back (the host
// loses connectivity for a moment while HNS moves the adapter to its
// vSwitch). EnsureLocal returns it when the wait runs out; the
// controller's next resync tries again.
type NotReadyError struct {
	Network string
	Waited  time.Duration
	Missing string
}

func (e *NotReadyError) Error() string {
	return fmt.Sprintf("HNS network %q is not ready after %s: %s", e.Network, e.Waited, e.Missing)
}

// waitReady waits, as flannel does, until nw is usable (HNS answers
// CreateNetwork before it is): its provider address, then the host
// interface holding the management IP, which it returns (the host vNIC).
func (n *Network) waitReady(ctx context.Context, nw *hns.Network, up uplink, nodeIP netip.Addr) (*hns.Network, Adapter, error) {
	nw, err := n.waitProviderAddress(ctx, nw)
	if err != nil {
		return nil, Adapter{}, err
	}
	ip, ok := managementIP(nw, up, nodeIP)
	if !ok {
		n.log.V(2).Info("the uplink holds no IPv4 address to wait for; using it as it was", "adapter", up.Holder.Name)
		return nw, up.Holder, nil
	}
	vnic, err := n.waitHostInterface(ctx, nw.Name, ip)
	if err != nil {
		return nil, Adapter{}, err
	}
	return nw, vnic, nil
}

// managementIP is the address the host vNIC holds once the network is up
// (flannel waits for the interface holding the management IP): the
// provider address when HNS reports one, else the node IP when the uplink
// held it, else the uplink's first IPv4 address.
func managementIP(nw *hns.Network, up uplink, nodeIP netip.Addr) (netip.Addr, bool) {
	if pa := providerAddress(nw); pa.IsValid() {
		return pa, true
	}
	for _, p := range up.Holder.IPs {
		if p.Addr() == nodeIP {
			return nodeIP, true
		}
	}
	for _, p := range up.Holder.IPs {
		if p.Addr().Is4() {
			return p.Addr(), true
		}
	}
	return netip.Addr{}, false
}

// waitProviderAddress returns the Overlay network once it reports its
// provider address (the management IP, as flannel's vxlan backend reads
// it), polling GetNetworkByID; a network that has it costs no call.
func (n *Network) waitProviderAddress(ctx context.Context, nw *hns.Network) (*hns.Network, error) {
	if nw.Type != hns.NetworkTypeOverlay {
		return nw, nil
	}
	start := time.Now()
	for {
		if providerAddress(nw).IsValid() {
			return nw, nil
		}
		if err := n.pause(ctx, start, nw.Name, "it has no provider address (management IP) yet"); err != nil {
			return nil, err
		}
		again, err := n.hns.GetNetworkByID(ctx, nw.ID)
		if err != nil {
			return nil, fmt.Errorf("read HNS network %q while waiting for it: %w", nw.Name, err)
		}
		nw = again
	}
}

// waitHostInterface returns the host adapter holding ip, polling the
// adapter list until one does.
func (n *Network) waitHostInterface(ctx context.Context, network string, ip netip.Addr) (Adapter, error) {
	start := time.Now()
	for {
		ads, err := n.adapters(ctx)
		if err != nil {
			return Adapter{}, fmt.Errorf("list host adapters: %w", err)
		}
		if a, ok := adapterWithIP(ads, ip); ok {
			return a, nil
		}
		if err := n.pause(ctx, start, network, fmt.Sprintf("no host interface holds the management IP %s (adapters: %s)", ip, adapterNames(ads))); err != nil {
			return Adapter{}, err
		}
	}
}

// pause sleeps one poll interval, or returns a *NotReadyError once the
// wait that began at start has run out.
func (n *Network) pause(ctx context.Context, start time.Time, network, missing string) error {
	waited := time.Since(start)
	if waited+n.readyPoll > n.readyTimeout {
		return &NotReadyError{Network: network, Waited: waited.Round(time.Millisecond), Missing: missing}
	}
	t := time.NewTimer(n.readyPoll)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return fmt.Errorf("waiting for HNS network %q (%s): %w", network, missing, ctx.Err())
	case <-t.C:
		return nil
	}
}

func providerAddress(nw *hns.Network) netip.Addr {
	for _, p := range nw.Policies {
		if p.Type == hns.NetworkPolicyProviderAddress && p.ProviderAddress != nil {
			if a, err := netip.ParseAddr(p.ProviderAddress.ProviderAddress); err == nil {
				return a
			}
		}
	}
	return netip.Addr{}
}
