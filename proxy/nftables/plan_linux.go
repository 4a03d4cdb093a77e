package nftables

import (
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"time"

	"sigs.k8s.io/knftables"

	"github.com/nodenet/nodenet/proxy"
)

// A portPlan is everything one service port puts in the table. Plans are
// pure functions of the ServicePort and the Options, so the backend keeps
// only the ServicePort it last programmed and plans it again to diff.
type portPlan struct {
	chains []*chainPlan
	sets   []setPlan
	elems  []element
	picks  []pickPlan
}

type chainPlan struct {
	name  string
	rules []rule
}

func (c *chainPlan) add(text, comment string) { c.rules = append(c.rules, rule{text, comment}) }

// rule is one rule's text and optional comment.
type rule struct{ text, comment string }

func (r rule) object(chain string) *knftables.Rule {
	o := &knftables.Rule{Chain: chain, Rule: r.text}
	if r.comment != "" {
		o.Comment = knftables.PtrTo(r.comment)
	}
	return o
}

// setPlan is a ClientIP affinity set: the clients that picked one endpoint.
type setPlan struct {
	name    string
	timeout time.Duration
}

// element is a set or map element, with key and value as nft spells
// them (concatenations joined by " . "; value "" for a set element).
type element struct {
	set, key, value string
}

// pickPlan is a shared chain that DNATs to one of n endpoints looked up in
// an endpoints map by frontend and a random index.
type pickPlan struct {
	name     string
	f        *family
	proto    string
	n        int
	nodePort bool
}

// rule DNATs by the lookup; "<proto> dport" also matches the protocol,
// which nft wants before it maps a port.
func (p pickPlan) rule() rule {
	key := p.f.ip + " daddr . " + p.proto + " dport"
	if p.nodePort {
		key = p.proto + " dport"
	}
	return rule{text: "dnat " + p.f.ip + " addr . port to " + key + " . numgen random mod " + strconv.Itoa(p.n) +
		" map @" + p.f.endpointsMap(p.proto, p.nodePort)}
}

// planPort plans sp, one frontend kind at a time.
func (b *Backend) planPort(sp *proxy.ServicePort) *portPlan {
	pb := &portBuilder{
		b:     b,
		sp:    sp,
		f:     b.byFamily[sp.Key.Family],
		base:  portBase(sp),
		proto: protoName(sp.Key.Protocol),
		port:  strconv.Itoa(int(sp.Port)),
		plan:  &portPlan{},
	}
	pb.clusterIP()
	pb.external()
	pb.firewall()
	pb.hairpin()
	return pb.plan
}

type portBuilder struct {
	b     *Backend
	sp    *proxy.ServicePort
	f     *family
	base  string
	proto string
	port  string
	plan  *portPlan
}

func (pb *portBuilder) chain(kind string) *chainPlan {
	c := &chainPlan{name: objectName(kind, pb.base, pb.f)}
	pb.plan.chains = append(pb.plan.chains, c)
	return c
}

func (pb *portBuilder) elem(set, key, value string) {
	pb.plan.elems = append(pb.plan.elems, element{set, key, value})
}

// frontend is the key of an address frontend in the per-family maps.
func (pb *portBuilder) frontend(ip netip.Addr) string {
	return ip.String() + " . " + pb.proto + " . " + pb.port
}

// noEndpointsVerdict is what a frontend without usable endpoints does:
// reject when the service has no endpoints at all, drop when it has some
// that this traffic may not use (a Local policy with none on this node).
func (pb *portBuilder) noEndpointsVerdict() string {
	if !pb.sp.HasEndpoints {
		return "goto " + chainReject
	}
	return "drop"
}

// clusterIP plans the cluster IP frontend: InternalEndpoints, with
// off-cluster clients masqueraded so replies come back through this node.
func (pb *portBuilder) clusterIP() {
	sp, f := pb.sp, pb.f
	if !sp.ClusterIP.IsValid() {
		return
	}
	pb.elem(f.clusterIPs, sp.ClusterIP.String(), "")
	if len(sp.InternalEndpoints) == 0 {
		pb.elem(f.noEndpointServices, pb.frontend(sp.ClusterIP), pb.noEndpointsVerdict())
		return
	}
	c := pb.chain(kindService)
	switch {
	case pb.b.masqueradeAll:
		c.add(pb.b.setMark, "masquerade all service traffic")
	case len(f.localTrafficPrefixes) > 0:
		c.add(f.ip+" saddr != @"+f.localTraffic+" "+pb.b.setMark, "masquerade off-cluster traffic")
	}
	pb.pick(c, sp.InternalEndpoints, []netip.Addr{sp.ClusterIP}, false)
	pb.elem(f.serviceIPs, pb.frontend(sp.ClusterIP), "goto "+c.name)
}

// externalIPs returns the port's external and load-balancer IPs, without
// duplicates or the cluster IP (which keeps its own meaning).
func (pb *portBuilder) externalIPs() []netip.Addr {
	var ips []netip.Addr
	for _, list := range [][]netip.Addr{pb.sp.ExternalIPs, pb.sp.LoadBalancerIPs} {
		for _, ip := range list {
			if ip == pb.sp.ClusterIP || proxy.FamilyOf(ip) != pb.f.ipFamily || slices.Contains(ips, ip) {
				continue
			}
			ips = append(ips, ip)
		}
	}
	return ips
}

// external plans node ports, external IPs and load-balancer IPs: they use
// ExternalEndpoints and masquerade unless eTP is Local, in which case this
// node's pods and the node itself may still use cluster-wide endpoints
// (kube-proxy's short-circuit, as if the traffic had gone out to the load
// balancer and come back).
func (pb *portBuilder) external() {
	sp, f := pb.sp, pb.f
	ips := pb.externalIPs()
	if len(ips) == 0 && sp.NodePort == 0 {
		return
	}
	nodePortKey := pb.proto + " . " + strconv.Itoa(int(sp.NodePort))
	hasEndpoints := len(sp.ExternalEndpoints) > 0
	var short *chainPlan
	if sp.HasEndpoints && sp.ExternalPolicyLocal && len(sp.ClusterEndpoints) > 0 {
		short = pb.chain(kindCluster)
		pb.inlinePick(short, sp.ClusterEndpoints)
	}
	if hasEndpoints || short != nil {
		c := pb.chain(kindExternal)
		if !sp.ExternalPolicyLocal {
			c.add(pb.b.setMark, "masquerade external traffic")
		} else if short != nil {
			if len(f.localTrafficPrefixes) > 0 {
				c.add(f.ip+" saddr @"+f.localTraffic+" goto "+short.name, "short-circuit pod traffic")
			}
			c.add("fib saddr type local "+pb.b.setMark+" goto "+short.name, "masquerade and short-circuit node traffic")
		}
		if hasEndpoints {
			pb.pick(c, sp.ExternalEndpoints, ips, sp.NodePort != 0)
		}
		for _, ip := range ips {
			pb.elem(f.serviceIPs, pb.frontend(ip), "goto "+c.name)
		}
		if sp.NodePort != 0 {
			pb.elem(f.serviceNodePorts, nodePortKey, "goto "+c.name)
		}
	}
	if !hasEndpoints {
		// Traffic the ext chain did not short-circuit falls through to
		// the filter chains, which drop or reject it.
		v := pb.noEndpointsVerdict()
		for _, ip := range ips {
			pb.elem(f.noEndpointServices, pb.frontend(ip), v)
		}
		if sp.NodePort != 0 {
			pb.elem(f.noEndpointNodePorts, nodePortKey, v)
		}
	}
}

// firewall plans loadBalancerSourceRanges: traffic to a load-balancer IP
// from outside the ranges is dropped before DNAT. Like kube-proxy, node
// ports and external IPs are not filtered, and when the ranges include
// this node its connections to a load-balancer IP are admitted even when
// their source is a load-balancer IP: a VIP-mode load-balancer IP is
// often a local address, so the kernel picks it as the source and the
// packet loops back without ever reaching the load balancer.
func (pb *portBuilder) firewall() {
	sp, f := pb.sp, pb.f
	var ranges []netip.Prefix
	for _, p := range sp.LoadBalancerSourceRanges {
		if proxy.FamilyOf(p.Addr()) == f.ipFamily {
			ranges = append(ranges, p)
		}
	}
	var lbIPs []netip.Addr
	for _, ip := range sp.LoadBalancerIPs {
		if proxy.FamilyOf(ip) == f.ipFamily && !slices.Contains(lbIPs, ip) {
			lbIPs = append(lbIPs, ip)
		}
	}
	if len(ranges) == 0 || len(lbIPs) == 0 {
		return
	}
	ranges = normalizePrefixes(ranges)
	c := pb.chain(kindFirewall)
	if slices.ContainsFunc(f.nodeIPs, func(ip netip.Addr) bool {
		return slices.ContainsFunc(ranges, func(p netip.Prefix) bool { return p.Contains(ip) })
	}) {
		sources := slices.Clone(lbIPs)
		slices.SortFunc(sources, netip.Addr.Compare)
		c.add(f.ip+" saddr "+anonymousSet(sources)+" return", "the node is in the ranges: admit it from a load-balancer IP")
	}
	c.add(f.ip+" saddr != "+anonymousSet(ranges)+" drop", "loadBalancerSourceRanges")
	for _, ip := range lbIPs {
		pb.elem(f.firewallIPs, pb.frontend(ip), "goto "+c.name)
	}
}

// anonymousSet spells elems as an nft match operand: the element itself,
// or "{ a, b, … }" for several.
func anonymousSet[T fmt.Stringer](elems []T) string {
	if len(elems) == 1 {
		return elems[0].String()
	}
	parts := make([]string, len(elems))
	for i, e := range elems {
		parts[i] = e.String()
	}
	return "{ " + strings.Join(parts, ", ") + " }"
}

// hairpin lists this node's endpoints, which a pod may reach itself
// through: such traffic is masqueraded so the reply goes back through the
// node to be un-DNATed.
func (pb *portBuilder) hairpin() {
	var done []netip.Addr
	for _, list := range [][]proxy.Endpoint{pb.sp.InternalEndpoints, pb.sp.ExternalEndpoints, pb.sp.ClusterEndpoints} {
		for _, ep := range list {
			if !ep.Local || slices.Contains(done, ep.IP) {
				continue
			}
			done = append(done, ep.IP)
			pb.elem(pb.f.hairpin, ep.IP.String()+" . "+ep.IP.String(), "")
		}
	}
}

// pick ends chain c with the choice of one of eps. With ClientIP affinity
// the choice is inline rules (an affinity set per endpoint); otherwise it
// is a goto to a shared pick chain and one endpoints-map element per
// frontend and endpoint: far fewer rules for the kernel to load than a
// rule per endpoint, and O(1) per new connection.
func (pb *portBuilder) pick(c *chainPlan, eps []proxy.Endpoint, ips []netip.Addr, nodePort bool) {
	if pb.sp.SessionAffinity > 0 {
		pb.inlinePick(c, eps)
		return
	}
	n := len(eps)
	values := make([]string, n)
	for i, ep := range eps {
		values[i] = ep.IP.String() + " . " + strconv.Itoa(int(ep.Port))
	}
	if nodePort {
		p := pb.usePick(n, true)
		if len(ips) > 0 {
			c.add("th dport "+strconv.Itoa(int(pb.sp.NodePort))+" goto "+p, "")
		} else {
			c.add("goto "+p, "")
		}
		m, prefix := pb.f.endpointsMap(pb.proto, true), strconv.Itoa(int(pb.sp.NodePort))+" . "
		for i := range eps {
			pb.elem(m, prefix+strconv.Itoa(i), values[i])
		}
	}
	if len(ips) > 0 {
		c.add("goto "+pb.usePick(n, false), "")
		m := pb.f.endpointsMap(pb.proto, false)
		for _, ip := range ips {
			prefix := ip.String() + " . " + pb.port + " . "
			for i := range eps {
				pb.elem(m, prefix+strconv.Itoa(i), values[i])
			}
		}
	}
}

func (pb *portBuilder) usePick(n int, nodePort bool) string {
	name := pickChainName(n, pb.proto, nodePort, pb.f)
	for _, p := range pb.plan.picks {
		if p.name == name {
			return name
		}
	}
	pb.plan.picks = append(pb.plan.picks, pickPlan{name: name, f: pb.f, proto: pb.proto, n: n, nodePort: nodePort})
	return name
}

// inlinePick ends c with one rule per endpoint: first, with affinity, a
// client already in an endpoint's set goes back to it; then a cascade
// where rule i matches with probability 1/(n-i), which picks each
// endpoint with probability 1/n without a map.
func (pb *portBuilder) inlinePick(c *chainPlan, eps []proxy.Endpoint) {
	f := pb.f
	affinity := pb.sp.SessionAffinity > 0
	sets := make([]string, len(eps))
	if affinity {
		for i, ep := range eps {
			sets[i] = pb.affinitySet(ep)
			c.add(f.ip+" saddr @"+sets[i]+" update @"+sets[i]+" { "+f.ip+" saddr } "+pb.dnat(ep), "")
		}
	}
	n := len(eps)
	for i, ep := range eps {
		var t strings.Builder
		if i < n-1 {
			t.WriteString("numgen random mod ")
			t.WriteString(strconv.Itoa(n - i))
			t.WriteString(" == 0 ")
		}
		if affinity {
			t.WriteString("update @" + sets[i] + " { " + f.ip + " saddr } ")
		}
		t.WriteString(pb.dnat(ep))
		c.add(t.String(), "")
	}
}

// dnat is the DNAT of one endpoint; nft wants the protocol matched in
// the same rule before it maps a port.
func (pb *portBuilder) dnat(ep proxy.Endpoint) string {
	return "meta l4proto " + pb.proto + " dnat " + pb.f.ip + " to " + ep.AddrPort().String()
}

// affinitySet plans (once) the affinity set of ep and returns its name.
func (pb *portBuilder) affinitySet(ep proxy.Endpoint) string {
	name := affinitySetName(pb.base, pb.f, ep)
	for _, s := range pb.plan.sets {
		if s.name == name {
			return name
		}
	}
	// nft counts set timeouts in whole seconds.
	timeout := max(pb.sp.SessionAffinity.Truncate(time.Second), time.Second)
	pb.plan.sets = append(pb.plan.sets, setPlan{name: name, timeout: timeout})
	return name
}
