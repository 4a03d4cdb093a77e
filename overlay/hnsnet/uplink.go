package hnsnet

import (
	"context"
	"fmt"
	"net/netip"
	"strings"

	"github.com/nodenet/nodenet/overlay"
)

// hostVNICPrefix and hostVNICSuffix wrap the physical adapter's name in the
// name of the host vNIC Windows creates when an HNS network takes the
// adapter: the node IP moves from "Ethernet" to "vEthernet (Ethernet)".
// NetAdapterName must name the physical adapter, so we map back, as
// flannel does when it looks up its external interface again.
const (
	hostVNICPrefix = "vEthernet ("
	hostVNICSuffix = ")"
)

// physicalName returns the adapter an HNS host vNIC stands for, or name.
func physicalName(name string) string {
	if strings.HasPrefix(name, hostVNICPrefix) && strings.HasSuffix(name, hostVNICSuffix) && len(name) > len(hostVNICPrefix)+len(hostVNICSuffix) {
		return name[len(hostVNICPrefix) : len(name)-len(hostVNICSuffix)]
	}
	return name
}

// uplink is the adapter the network binds to.
type uplink struct {
	// Name is the physical adapter (the NetAdapterName policy).
	Name string
	// Holder is the adapter that holds the node IP now (the physical one
	// before the network exists, its host vNIC after).
	Holder Adapter
}

// findUplink resolves spec's uplink with reads only. A missing adapter is
// a *overlay.SpecError.
func (n *Network) findUplink(ctx context.Context, spec *overlay.LocalSpec) (uplink, error) {
	ads, err := n.adapters(ctx)
	if err != nil {
		return uplink{}, fmt.Errorf("list host adapters: %w", err)
	}
	holder, held := adapterWithIP(ads, spec.NodeIP)
	if spec.ExternalInterface != "" {
		for _, a := range ads {
			if strings.EqualFold(a.Name, spec.ExternalInterface) || strings.EqualFold(physicalName(a.Name), spec.ExternalInterface) {
				if !held || !strings.EqualFold(physicalName(holder.Name), physicalName(a.Name)) {
					holder = a
				}
				return uplink{Name: physicalName(a.Name), Holder: holder}, nil
			}
		}
		return uplink{}, &overlay.SpecError{Field: "network.externalInterface",
			Reason: fmt.Sprintf("no host adapter is named %q (adapters: %s)", spec.ExternalInterface, adapterNames(ads))}
	}
	if !held {
		return uplink{}, &overlay.SpecError{Field: "network.externalInterface",
			Reason: fmt.Sprintf("no host adapter holds the node IP %s (adapters: %s); set network.externalInterface", spec.NodeIP, adapterNames(ads))}
	}
	return uplink{Name: physicalName(holder.Name), Holder: holder}, nil
}

func adapterWithIP(ads []Adapter, ip netip.Addr) (Adapter, bool) {
	for _, a := range ads {
		for _, p := range a.IPs {
			if p.Addr() == ip {
				return a, true
			}
		}
	}
	return Adapter{}, false
}

func adapterNames(ads []Adapter) string {
	names := make([]string, 0, len(ads))
	for _, a := range ads {
		names = append(names, fmt.Sprintf("%q", a.Name))
	}
	return strings.Join(names, ", ")
}
