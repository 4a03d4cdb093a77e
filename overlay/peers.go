package overlay

import (
	"fmt"
	"net/netip"
	"slices"

	v1 "k8s.io/api/core/v1"

	"github.com/nodenet/nodenet/config"
)

// PeerRules is what this node expects of other nodes: the same mode, the
// same VNI, pod CIDRs of its own families.
type PeerRules struct {
	Mode     config.NetworkMode
	VNI      uint32
	Families []config.IPFamily
}

// PeerProblem says why another Node cannot be routed to (yet). Reason is a
// CamelCase word fit for an Event reason.
type PeerProblem struct {
	Node    string
	Reason  string
	Message string
}

func (p *PeerProblem) Error() string { return fmt.Sprintf("node %s: %s", p.Node, p.Message) }

// Peer problem reasons.
const (
	PeerNoPodCIDR           = "PeerNoPodCIDR"
	PeerNoNodeIP            = "PeerNoNodeIP"
	PeerMissingAnnotation   = "PeerMissingAnnotation"
	PeerMalformedAnnotation = "PeerMalformedAnnotation"
	PeerVNIMismatch         = "PeerVNIMismatch"
	PeerBackendMismatch     = "PeerBackendMismatch"
)

// RemoteFromNode reads another Node the way flannel's kube subnet manager
// does: pod CIDRs from spec.podCIDRs (spec.podCIDR on old objects), the
// underlay IP from the public-ip annotations (InternalIP when absent), and
// in overlay mode the VTEP MAC and VNI from backend-data. A *PeerProblem
// says why the node cannot be routed to; it never panics on nil maps or
// missing fields.
func RemoteFromNode(n *v1.Node, rules PeerRules) (RemoteNode, *PeerProblem) {
	r := RemoteNode{Name: n.Name}
	problem := func(reason, format string, args ...any) (RemoteNode, *PeerProblem) {
		return RemoteNode{}, &PeerProblem{Node: n.Name, Reason: reason, Message: fmt.Sprintf(format, args...)}
	}
	cidrs, err := PodCIDRsOf(n, rules.Families)
	if err != nil {
		return problem(PeerMalformedAnnotation, "%v", err)
	}
	if len(cidrs) == 0 {
		return problem(PeerNoPodCIDR, "has no pod CIDR of this node's families %v yet", rules.Families)
	}
	r.PodCIDRs = cidrs

	ip, err := peerNodeIP(n, false)
	if err != nil {
		return problem(PeerMalformedAnnotation, "%v", err)
	}
	if !ip.IsValid() {
		return problem(PeerNoNodeIP, "has neither a %s annotation nor an IPv4 InternalIP", AnnotationPublicIP)
	}
	r.NodeIP = ip

	if rules.Mode == config.NetworkModeL2Bridge {
		if slices.ContainsFunc(r.PodCIDRs, func(p netip.Prefix) bool { return p.Addr().Is6() }) {
			// Its IPv6 pods are reached via its IPv6 address; without one
			// only its IPv4 pods are (the dataplane says so).
			if r.NodeIPv6, err = peerNodeIP(n, true); err != nil {
				return problem(PeerMalformedAnnotation, "%v", err)
			}
		}
		if bt := n.Annotations[AnnotationBackendType]; bt != "" && bt != BackendHostGW {
			return problem(PeerBackendMismatch, "runs backend %q but this node runs %q (l2bridge): its pods are unreachable from here until both use the same network mode", bt, BackendHostGW)
		}
		return r, nil
	}
	bt, data := n.Annotations[AnnotationBackendType], n.Annotations[AnnotationBackendData]
	if bt == "" || data == "" {
		return problem(PeerMissingAnnotation, "has no %s/%s annotations yet (is nodenet or flannel running there?)", AnnotationBackendType, AnnotationBackendData)
	}
	if bt != BackendVXLAN {
		return problem(PeerBackendMismatch, "runs backend %q but this node runs %q: its pods are unreachable from here until both use the same network mode", bt, BackendVXLAN)
	}
	vni, mac, err := parseVXLANBackendData(data)
	if err != nil {
		return problem(PeerMalformedAnnotation, "%v", err)
	}
	if uint32(vni) != rules.VNI {
		return problem(PeerVNIMismatch, "uses VXLAN VNI %d but this node uses %d: traffic between the two would be dropped, so no route is programmed; set the same VNI everywhere (network.vxlan.vni here, Backend.VNI in flannel's net-conf.json)", vni, rules.VNI)
	}
	r.VtepMAC = mac
	return r, nil
}

// PodCIDRsOf returns n's pod CIDRs of the given families, in the order the
// Node lists them.
func PodCIDRsOf(n *v1.Node, families []config.IPFamily) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, s := range rawPodCIDRs(n) {
		p, err := netip.ParsePrefix(s)
		if err != nil {
			return nil, fmt.Errorf("spec.podCIDRs: %q is not a CIDR", s)
		}
		fam := config.IPv4
		if p.Addr().Is6() {
			fam = config.IPv6
		}
		if slices.Contains(families, fam) {
			out = append(out, p.Masked())
		}
	}
	return out, nil
}

// rawPodCIDRs is spec.podCIDRs, or spec.podCIDR on objects from before
// dual-stack.
func rawPodCIDRs(n *v1.Node) []string {
	if len(n.Spec.PodCIDRs) == 0 && n.Spec.PodCIDR != "" {
		return []string{n.Spec.PodCIDR}
	}
	return n.Spec.PodCIDRs
}

// peerNodeIP is the underlay address of one family other nodes tunnel or
// route to: flannel's public-ip(v6) annotations (the overwrite first), else
// the InternalIP.
func peerNodeIP(n *v1.Node, ipv6 bool) (netip.Addr, error) {
	keys := []string{AnnotationPublicIPOverwrite, AnnotationPublicIP}
	family := "IPv4"
	if ipv6 {
		keys, family = []string{AnnotationPublicIPv6Overwrite, AnnotationPublicIPv6}, "IPv6"
	}
	for _, key := range keys {
		s, ok := n.Annotations[key]
		if !ok || s == "" {
			continue
		}
		ip, err := netip.ParseAddr(s)
		if err != nil || ip.Is6() != ipv6 || ip.Is4In6() {
			return netip.Addr{}, fmt.Errorf("%s %q is not an %s address", key, s, family)
		}
		return ip, nil
	}
	return NodeInternalIP(n, ipv6), nil
}

// NodeInternalIP returns n's first InternalIP of the family (ExternalIP
// when it has none), or the zero Addr.
func NodeInternalIP(n *v1.Node, ipv6 bool) netip.Addr {
	for _, t := range []v1.NodeAddressType{v1.NodeInternalIP, v1.NodeExternalIP} {
		for _, a := range n.Status.Addresses {
			if a.Type != t {
				continue
			}
			if ip, err := netip.ParseAddr(a.Address); err == nil && ip.Is6() == ipv6 && !ip.Is4In6() {
				return ip
			}
		}
	}
	return netip.Addr{}
}
