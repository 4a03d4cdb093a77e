package linuxnet

import (
	"context"
	"fmt"
	"net/netip"
	"slices"

	"github.com/vishvananda/netlink"

	"github.com/nodenet/nodenet/config"
	"github.com/nodenet/nodenet/overlay"
)

// EnsureLocal implements overlay.Interface: it checks everything it can
// first (uplink, an existing bridge and vxlan device), so a *SpecError or
// *MismatchError leaves the host untouched, then writes what differs.
func (n *Network) EnsureLocal(ctx context.Context, spec overlay.LocalSpec) (*overlay.LocalNetwork, error) {
	n.writing.take()
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := validateSpec(spec); err != nil {
		return nil, err
	}
	up, err := n.findUplink(spec)
	if err != nil {
		return nil, err
	}
	mtu := spec.MTU
	if mtu == 0 {
		mtu = up.link.Attrs().MTU
		if isOverlay(spec.Mode) {
			mtu -= overlay.VXLANOverhead
		}
	}
	st := &localState{spec: spec, uplink: up.link.Attrs().Name, upIndex: up.link.Attrs().Index, subnets: up.subnets}

	br, replaceBr, err := n.inspectBridge(spec)
	if err != nil {
		return nil, err
	}
	var vw vxlanWant
	var vx netlink.Link
	replaceVx := false
	if isOverlay(spec.Mode) {
		st.vxlan = VXLANDeviceName(spec.Name, spec.VNI)
		st.vxlanIP = netip.PrefixFrom(firstV4(spec.PodCIDRs).Masked().Addr(), 32)
		vw = vxlanWant{name: st.vxlan, vni: spec.VNI, port: spec.Port, local: spec.NodeIP, uplink: up.link, address: st.vxlanIP}
		if vx, replaceVx, err = n.inspectVXLAN(vw, spec.AllowRecreate); err != nil {
			return nil, err
		}
	}

	// From here on we write.
	if err := n.ensureSysctls(forwardingSysctls(spec.PodCIDRs)); err != nil {
		return nil, err
	}
	if _, err := n.ensureBridge(spec, br, replaceBr, mtu); err != nil {
		return nil, err
	}
	out := &overlay.LocalNetwork{
		Mode:        spec.Mode,
		Name:        spec.Name,
		PodCIDRs:    slices.Clone(spec.PodCIDRs),
		Gateways:    slices.Clone(spec.Gateways),
		MTU:         mtu,
		NodeIP:      spec.NodeIP,
		NodeIPv6:    spec.NodeIPv6,
		Uplink:      st.uplink,
		NodeSubnets: slices.Clone(up.subnets),
	}
	if isOverlay(spec.Mode) {
		dev, err := n.ensureVXLAN(vw, vx, replaceVx, mtu)
		if err != nil {
			return nil, err
		}
		out.VtepMAC = slices.Clone(dev.HardwareAddr)
	}
	n.local = st
	out.Writes = n.writing.take()
	n.log.V(2).Info("Local network ready", "name", spec.Name, "mode", spec.Mode, "uplink", st.uplink, "mtu", mtu, "writes", out.Writes)
	return out, nil
}

// validateSpec rejects what no Linux network can be built from, before
// anything is read or written.
func validateSpec(spec overlay.LocalSpec) error {
	switch {
	case spec.Mode != config.NetworkModeOverlay && spec.Mode != config.NetworkModeL2Bridge:
		return &overlay.SpecError{Field: "network.mode", Reason: fmt.Sprintf("unknown mode %q", spec.Mode)}
	case spec.Name == "" || len(spec.Name) > ifNameMax:
		return &overlay.SpecError{Field: "network.name", Reason: fmt.Sprintf("%q is not a valid Linux interface name (1-%d characters)", spec.Name, ifNameMax)}
	case len(spec.PodCIDRs) == 0 || len(spec.PodCIDRs) != len(spec.Gateways):
		return &overlay.SpecError{Field: "pod CIDRs", Reason: fmt.Sprintf("need one gateway per pod CIDR, have %d CIDRs and %d gateways", len(spec.PodCIDRs), len(spec.Gateways))}
	}
	for i, p := range spec.PodCIDRs {
		if !p.Contains(spec.Gateways[i]) {
			return &overlay.SpecError{Field: "pod CIDRs", Reason: fmt.Sprintf("gateway %v is outside pod CIDR %v", spec.Gateways[i], p)}
		}
	}
	if !isOverlay(spec.Mode) {
		return nil
	}
	switch {
	case !firstV4(spec.PodCIDRs).IsValid():
		return &overlay.SpecError{Field: "pod CIDRs", Reason: "overlay mode needs an IPv4 pod CIDR"}
	case spec.VNI == 0 || spec.VNI > 1<<24-1:
		return &overlay.SpecError{Field: "network.vxlan.vni", Reason: fmt.Sprintf("%d is not a VXLAN network identifier (1-16777215)", spec.VNI)}
	case spec.Port == 0:
		return &overlay.SpecError{Field: "network.vxlan.port", Reason: "must be set, to the port every node of the cluster uses"}
	}
	return nil
}

func firstV4(ps []netip.Prefix) netip.Prefix {
	for _, p := range ps {
		if p.Addr().Is4() {
			return p
		}
	}
	return netip.Prefix{}
}

func forwardingSysctls(podCIDRs []netip.Prefix) []string {
	out := []string{ipv4Forward}
	if slices.ContainsFunc(podCIDRs, func(p netip.Prefix) bool { return p.Addr().Is6() }) {
		out = append(out, ipv6Forward)
	}
	return out
}
