package hnsnet

import (
	"context"
	"fmt"

	"github.com/nodenet/nodenet/hns"
)

// Forwarding turns on IPv4 forwarding on host interfaces. flannel's
// host-gw backend does it on Windows for the L2Bridge network's host vNIC
// (the management IP's interface) and the bridge endpoint's interface
// (flannel-io/flannel pkg/backend/hostgw/hostgw_windows.go, step 7);
// without it the node cannot reach its pods across the bridge.
// Implementations: SystemForwarding (Windows, iphlpapi) and, when
// Options.HNS is an hns.Simulator, the simulated host's vNICs.
type Forwarding interface {
	// EnableForwarding turns IPv4 forwarding on for a; it must be
	// idempotent and change nothing when it is on already.
	EnableForwarding(ctx context.Context, a Adapter) error
}

// hostForwarder is the simulated host's side of Forwarding
// (hns.Simulator.EnableHostForwarding): it knows adapters by their
// physical name.
type hostForwarder interface {
	EnableHostForwarding(adapter string) error
}

// simForwarding turns forwarding on in a simulated host.
type simForwarding struct{ sim hostForwarder }

func (f simForwarding) EnableForwarding(_ context.Context, a Adapter) error {
	return f.sim.EnableHostForwarding(physicalName(a.Name))
}

// defaultForwarding picks Forwarding when Options leave it unset: the
// simulated host's when HNS is simulated, else the system's (nil off
// Windows, where l2bridge mode then needs Options.Forwarding).
func defaultForwarding(h hns.Interface) Forwarding {
	if sim, ok := h.(hostForwarder); ok {
		return simForwarding{sim: sim}
	}
	return systemForwarding()
}

// enableForwarding turns forwarding on for the host vNIC (the interface
// holding the node IP; required) and for the host endpoint's own
// interface when the host lists one (flannel does both).
func (n *Network) enableForwarding(ctx context.Context, p *plan, vnic Adapter) error {
	if err := n.forwarding.EnableForwarding(ctx, vnic); err != nil {
		return fmt.Errorf("enable IPv4 forwarding on the host vNIC %q (index %d): %w", vnic.Name, vnic.Index, err)
	}
	ads, err := n.adapters(ctx)
	if err != nil {
		return fmt.Errorf("list host adapters: %w", err)
	}
	epIf, ok := adapterWithIP(ads, p.epIP)
	if !ok {
		n.log.V(2).Info("the host endpoint has no interface of its own listed; forwarding is on for the host vNIC only", "endpoint", p.epName, "ip", p.epIP)
		return nil
	}
	if epIf.Index == vnic.Index && epIf.Name == vnic.Name {
		return nil
	}
	if err := n.forwarding.EnableForwarding(ctx, epIf); err != nil {
		return fmt.Errorf("enable IPv4 forwarding on %q (index %d), the interface of host endpoint %s: %w", epIf.Name, epIf.Index, p.epIP, err)
	}
	return nil
}
