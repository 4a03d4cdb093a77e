package config

import (
	"fmt"
	"net/netip"
	"slices"
	"unicode"

	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Bounds of NetworkConfiguration fields.
const (
	// MinMTU is the least MTU accepted: IPv4's minimum datagram size.
	MinMTU = 576
	// MinIPv6MTU is the least MTU accepted when IPv6 runs (RFC 8200).
	MinIPv6MTU = 1280
	// MaxMTU is the largest MTU accepted: common jumbo-frame hardware tops
	// out at 9216.
	MaxMTU = 9216
	// MaxVNI is the largest 24-bit VXLAN network identifier.
	MaxVNI = 1<<24 - 1
	// MinWindowsVNI is the least VNI HNS accepts for an overlay network.
	MinWindowsVNI = 4096
	// MaxNetworkNameLength keeps the name usable as a Linux device name
	// (IFNAMSIZ - 1).
	MaxNetworkNameLength = 15
)

func (v *validator) validateNetwork() {
	n := &v.cfg.Network
	path := field.NewPath("network")
	modes := []NetworkMode{NetworkModeOverlay, NetworkModeL2Bridge}
	if !slices.Contains(modes, n.Mode) {
		v.err(field.NotSupported(path.Child("mode"), n.Mode, modes))
	}
	if n.Mode == NetworkModeOverlay && !v.cfg.FeatureEnabled(FeatureWinOverlay) {
		v.err(field.Forbidden(path.Child("mode"), "overlay needs WinOverlay, and featureGates.WinOverlay is false"))
	}
	v.validateNetworkName(path.Child("name"), n.Name)
	v.validateVXLAN(path.Child("vxlan"), n)
	v.validateMTU(path.Child("mtu"), n.MTU)
	v.validateSourceVIP(path.Child("sourceVIP"), n)
	v.validateExternalInterface(path.Child("externalInterface"), n.ExternalInterface)
	v.validatePodCIDRAllocation(path, n)
}

// validatePodCIDRAllocation checks the allocator and, with "agent", that
// each cluster CIDR holds at least one node subnet of its family's size.
func (v *validator) validatePodCIDRAllocation(path *field.Path, n *NetworkConfiguration) {
	allocators := []PodCIDRAllocation{PodCIDRAllocationController, PodCIDRAllocationAgent}
	if !slices.Contains(allocators, n.PodCIDRAllocation) {
		v.err(field.NotSupported(path.Child("podCIDRAllocation"), n.PodCIDRAllocation, allocators))
		return
	}
	if n.PodCIDRAllocation != PodCIDRAllocationAgent {
		for _, f := range []struct {
			name string
			size *int32
		}{{"nodeCIDRMaskSizeIPv4", n.NodeCIDRMaskSizeIPv4}, {"nodeCIDRMaskSizeIPv6", n.NodeCIDRMaskSizeIPv6}} {
			if f.size != nil {
				v.warn(path.Child(f.name), "ignored: podCIDRAllocation is %s, mask sizes only apply to agent", n.PodCIDRAllocation)
			}
		}
		return
	}
	for _, s := range v.cfg.ClusterCIDRs {
		p, err := netip.ParsePrefix(s)
		if err != nil {
			continue // clusterCIDRs has its own error
		}
		name, size, most := "nodeCIDRMaskSizeIPv4", n.NodeCIDRMaskSizeIPv4, int32(MaxNodeCIDRMaskSizeIPv4)
		if p.Addr().Is6() {
			name, size, most = "nodeCIDRMaskSizeIPv6", n.NodeCIDRMaskSizeIPv6, MaxNodeCIDRMaskSizeIPv6
		}
		if size == nil {
			v.err(field.Required(path.Child(name), "the prefix length of each node's pod CIDR"))
		} else if *size < int32(p.Bits()) || *size > most {
			v.err(field.Invalid(path.Child(name), *size,
				fmt.Sprintf("must be between %d (the prefix length of cluster CIDR %s) and %d", p.Bits(), s, most)))
		}
	}
}

func (v *validator) validateNetworkName(path *field.Path, name string) {
	switch {
	case name == "":
		v.err(field.Required(path, "the HNS network name (kube-proxy's KUBE_NETWORK)"))
	case len(name) > MaxNetworkNameLength:
		v.err(field.TooLong(path, name, MaxNetworkNameLength))
	case !isNetworkName(name):
		v.err(field.Invalid(path, name, "must be letters, digits, '.', '-' or '_', starting with a letter or digit"))
	}
}

func isNetworkName(s string) bool {
	for i, r := range s {
		alnum := r < unicode.MaxASCII && (unicode.IsLetter(r) || unicode.IsDigit(r))
		if !alnum && (i == 0 || (r != '.' && r != '-' && r != '_')) {
			return false
		}
	}
	return true
}

func (v *validator) validateVXLAN(path *field.Path, n *NetworkConfiguration) {
	if n.Mode != NetworkModeOverlay {
		if n.VXLAN != nil {
			v.warn(path, "ignored: network mode is %s, VXLAN settings only apply to overlay", n.Mode)
		}
		return
	}
	if n.VXLAN == nil {
		v.err(field.Required(path, "overlay mode needs VXLAN settings"))
		return
	}
	minVNI, why := int32(1), ""
	if v.target == OSWindows {
		minVNI, why = MinWindowsVNI, " on Windows (HNS reserves lower VNIs)"
	}
	if vni := n.VXLAN.VNI; vni < minVNI || vni > MaxVNI {
		v.err(field.Invalid(path.Child("vni"), vni, fmt.Sprintf("must be between %d and %d%s", minVNI, MaxVNI, why)))
	}
	v.validatePort(path.Child("port"), n.VXLAN.Port)
}

func (v *validator) validatePort(path *field.Path, port int32) {
	for _, msg := range validation.IsValidPortNum(int(port)) {
		v.err(field.Invalid(path, port, msg))
	}
}

func (v *validator) validateMTU(path *field.Path, mtu int32) {
	if mtu == 0 {
		return
	}
	if mtu < MinMTU || mtu > MaxMTU {
		v.err(field.Invalid(path, mtu, fmt.Sprintf("must be 0 (derive from the uplink) or between %d and %d", MinMTU, MaxMTU)))
		return
	}
	if mtu < MinIPv6MTU && slices.Contains(v.cfg.EffectiveIPFamilies(), IPv6) {
		v.err(field.Invalid(path, mtu, fmt.Sprintf("must be at least %d when IPv6 runs", MinIPv6MTU)))
	}
}

func (v *validator) validateSourceVIP(path *field.Path, n *NetworkConfiguration) {
	if n.SourceVIP == SourceVIPAuto {
		return
	}
	if n.SourceVIP == "" {
		v.err(field.Required(path, `"auto" or an IPv4 address in this node's pod CIDR`))
		return
	}
	if errs := validation.IsValidIP(path, n.SourceVIP); len(errs) > 0 {
		v.errList(errs)
		return
	}
	if n.Mode != NetworkModeOverlay {
		v.warn(path, "ignored: network mode is %s, the source VIP only applies to overlay", n.Mode)
		return
	}
	if v.shared {
		v.warn(path, `node-local setting in a shared config: an explicit source VIP fits one node's pod CIDR only; use "auto"`)
	}
	vip := netip.MustParseAddr(n.SourceVIP)
	if !vip.Is4() {
		v.err(field.Invalid(path, n.SourceVIP, "must be IPv4: network mode overlay is IPv4 only"))
		return
	}
	cluster := v.cfg.EffectiveClusterCIDRs()
	if len(cluster) == 0 {
		return // clusterCIDRs has its own error
	}
	for _, p := range cluster {
		if p.Contains(vip) {
			return
		}
	}
	v.err(field.Invalid(path, n.SourceVIP, "must lie inside an IPv4 cluster CIDR (in this node's pod CIDR)"))
}

func (v *validator) validateExternalInterface(path *field.Path, name string) {
	if name == "" {
		return
	}
	if v.shared {
		v.warn(path, "node-local setting in a shared config: every node reading it needs an adapter named %q", name)
	}
	limit := 256 // Windows adapter names
	if v.target != OSWindows {
		limit = MaxNetworkNameLength
	}
	if len(name) > limit {
		v.err(field.TooLong(path, name, limit))
	}
	for _, r := range name {
		if unicode.IsControl(r) || r == '/' || (v.target != OSWindows && unicode.IsSpace(r)) {
			v.err(field.Invalid(path, name, "must not contain '/', control characters or (on Linux) spaces"))
			return
		}
	}
}
