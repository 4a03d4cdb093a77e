package hnsnet

import (
	"net/netip"
	"slices"
	"strconv"
	"strings"

	"github.com/nodenet/nodenet/hns"
	"github.com/nodenet/nodenet/overlay"
)

// mismatch compares an existing network with the desired one field by
// field (type, subnets, VSID, VXLAN port, adapter) and returns the first
// difference, or nil when the network can be adopted as is. Other
// policies (remote subnet routes, HNS's own DrMacAddress,
// ProviderAddress, HostRoute) are not part of the identity.
func mismatch(have, want *hns.Network) *overlay.MismatchError {
	m := func(field, h, w string) *overlay.MismatchError {
		return &overlay.MismatchError{Network: want.Name, Field: field, Have: h, Want: w}
	}
	if !strings.EqualFold(string(have.Type), string(want.Type)) {
		return m("type", string(have.Type), string(want.Type))
	}
	if h, w := subnetList(have, want.Type), subnetList(want, want.Type); h != w {
		return m("subnet", orNone(h), w)
	}
	if want.Type == hns.NetworkTypeOverlay {
		if h, w := vsid(have), vsid(want); h != w {
			return m("VNI", strconv.FormatUint(uint64(h), 10), strconv.FormatUint(uint64(w), 10))
		}
		if h, w := vxlanPort(have), vxlanPort(want); h != w {
			return m("VXLAN port", strconv.Itoa(int(h)), strconv.Itoa(int(w)))
		}
	}
	if h, w := adapterOf(have), adapterOf(want); !strings.EqualFold(h, w) {
		return m("adapter", orNone(h), w)
	}
	return nil
}

// subnetList is the network's subnets that matter for typ: IPv4 only on
// an overlay network, all of them on l2bridge; sorted, comma-joined.
func subnetList(n *hns.Network, typ hns.NetworkType) string {
	var out []string
	for _, sn := range n.Subnets() {
		p, err := netip.ParsePrefix(sn.IpAddressPrefix)
		if err != nil {
			out = append(out, sn.IpAddressPrefix)
			continue
		}
		if typ == hns.NetworkTypeOverlay && !p.Addr().Is4() {
			continue
		}
		out = append(out, p.Masked().String())
	}
	slices.Sort(out)
	return strings.Join(out, ",")
}

func vsid(n *hns.Network) uint32 {
	for _, sn := range n.Subnets() {
		for _, p := range sn.Policies {
			if p.Type == hns.SubnetPolicyVSID && p.Isolation != nil {
				return p.Isolation.IsolationID
			}
		}
	}
	return 0
}

func vxlanPort(n *hns.Network) uint16 {
	for _, p := range n.Policies {
		if p.Type == hns.NetworkPolicyVxlanPort && p.VxlanPort != nil {
			return p.VxlanPort.Port
		}
	}
	return DefaultVXLANPort
}

func adapterOf(n *hns.Network) string {
	for _, p := range n.Policies {
		if p.Type == hns.NetworkPolicyNetAdapterName && p.NetAdapterName != nil {
			return p.NetAdapterName.NetworkAdapterName
		}
	}
	return ""
}

func orNone(s string) string {
	if s == "" {
		return "(none)"
	}
	return s
}
