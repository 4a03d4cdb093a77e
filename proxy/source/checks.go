package source

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"

	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
)

// check applies the checks across a folder's objects, in file order, and
// removes from want every object they reject; each error names the
// object's file and line, the object and what is wrong with it. The
// first of two conflicting objects wins, as with objects defined twice.
//
//   - A Node whose pod CIDRs do not parse, or overlap an earlier Node's,
//     is rejected: two nodes routing the same addresses would each take
//     the other's pods.
//   - With offline (the folder is where Nodes come from), an
//     EndpointSlice with an endpoint on a Node that no manifest declares,
//     and a Pod on such a Node, are rejected: their node's pod CIDR and
//     address are unknown, so nothing could be programmed right for them.
//   - A Pod whose pod IPs do not parse, lie outside its Node's pod CIDRs,
//     or are another Pod's is rejected (hostNetwork Pods have the node's
//     address and are only checked to parse).
//
// A Node that is rejected still counts as declared: objects naming it are
// not rejected for that (the Node's own error says why its pods are not
// routed).
func check(want map[objectKey]object, offline bool) []error {
	var problems []error
	reject := func(o object, format string, args ...any) {
		problems = append(problems, fmt.Errorf("%s: %s: %s; it is not used", o.where, o.key, fmt.Sprintf(format, args...)))
		delete(want, o.key)
	}
	byKind := func(kind objectKind) []object {
		var out []object
		for k, o := range want {
			if k.kind == kind {
				out = append(out, o)
			}
		}
		slices.SortFunc(out, object.before)
		return out
	}

	// Nodes.
	type claim struct {
		prefix netip.Prefix
		node   object
	}
	var claims []claim
	declared := map[string]bool{}
	podCIDRs := map[string][]netip.Prefix{} // accepted Nodes'
	for _, o := range byKind(kindNode) {
		n := o.obj.(*v1.Node)
		declared[n.Name] = true
		cidrs, err := nodePodCIDRs(n)
		if err != nil {
			reject(o, "%v", err)
			continue
		}
		overlap := false
		for _, p := range cidrs {
			for _, c := range claims {
				if p.Overlaps(c.prefix) {
					reject(o, "pod CIDR %s overlaps %s's %s (%s)", p, c.node.key, c.prefix, c.node.where)
					overlap = true
					break
				}
			}
			if overlap {
				break
			}
		}
		if overlap {
			continue
		}
		for _, p := range cidrs {
			claims = append(claims, claim{prefix: p, node: o})
		}
		podCIDRs[n.Name] = cidrs
	}

	// EndpointSlices.
	if offline {
		for _, o := range byKind(kindSlice) {
			s := o.obj.(*discoveryv1.EndpointSlice)
			for _, ep := range s.Endpoints {
				if ep.NodeName != nil && *ep.NodeName != "" && !declared[*ep.NodeName] {
					reject(o, "endpoint %s is on Node %q, which no manifest declares", strings.Join(ep.Addresses, ","), *ep.NodeName)
					break
				}
			}
		}
	}

	// Pods.
	owner := map[netip.Addr]object{}
	for _, o := range byKind(kindPod) {
		p := o.obj.(*v1.Pod)
		node := p.Spec.NodeName
		if offline && !declared[node] {
			reject(o, "runs on Node %q, which no manifest declares", node)
			continue
		}
		ips, err := podIPs(p)
		if err != nil {
			reject(o, "%v", err)
			continue
		}
		if p.Spec.HostNetwork {
			continue
		}
		if cidrs, ok := podCIDRs[node]; ok {
			if len(cidrs) == 0 {
				reject(o, "its Node %s has no pod CIDR", node)
				continue
			}
			if ip, ok := outside(ips, cidrs); ok {
				reject(o, "pod IP %s is outside Node %s's pod CIDRs %v", ip, node, cidrs)
				continue
			}
		}
		taken := false
		for _, ip := range ips {
			if first, ok := owner[ip]; ok {
				reject(o, "pod IP %s is %s's too (%s)", ip, first.key, first.where)
				taken = true
				break
			}
		}
		if taken {
			continue
		}
		for _, ip := range ips {
			owner[ip] = o
		}
	}
	return problems
}

// nodePodCIDRs reads a Node's spec.podCIDRs (spec.podCIDR on old
// objects).
func nodePodCIDRs(n *v1.Node) ([]netip.Prefix, error) {
	raw := n.Spec.PodCIDRs
	if len(raw) == 0 && n.Spec.PodCIDR != "" {
		raw = []string{n.Spec.PodCIDR}
	}
	var out []netip.Prefix
	for _, s := range raw {
		p, err := netip.ParsePrefix(s)
		if err != nil {
			return nil, fmt.Errorf("pod CIDR %q does not parse: %w", s, err)
		}
		if p != p.Masked() {
			return nil, fmt.Errorf("pod CIDR %q has host bits set (want %s)", s, p.Masked())
		}
		out = append(out, p)
	}
	return out, nil
}

// podIPs reads a Pod's status.podIPs (decodePod made sure of one).
func podIPs(p *v1.Pod) ([]netip.Addr, error) {
	var out []netip.Addr
	for _, s := range p.Status.PodIPs {
		ip, err := netip.ParseAddr(s.IP)
		if err != nil {
			return nil, fmt.Errorf("pod IP %q does not parse: %w", s.IP, err)
		}
		out = append(out, ip.Unmap())
	}
	if p.Status.PodIP != "" && (len(out) == 0 || p.Status.PodIP != p.Status.PodIPs[0].IP) {
		return nil, fmt.Errorf("status.podIP %q is not status.podIPs[0]", p.Status.PodIP)
	}
	return out, nil
}

// outside returns the first of ips that no prefix of its family holds.
func outside(ips []netip.Addr, cidrs []netip.Prefix) (netip.Addr, bool) {
	for _, ip := range ips {
		in := false
		for _, c := range cidrs {
			if c.Contains(ip) {
				in = true
				break
			}
		}
		if !in {
			return ip, true
		}
	}
	return netip.Addr{}, false
}
