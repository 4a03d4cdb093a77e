package nftables

import (
	"net/netip"
	"slices"
	"strconv"

	"sigs.k8s.io/knftables"
)

// Top-level chains. Filter chains run before DNAT (priority dstnat-10) so
// they see the address the client used; filter-output-post-dnat runs after
// it to catch what the services chain did not DNAT.
const (
	chainServices        = "services"
	chainMasquerading    = "masquerading"
	chainFirewallCheck   = "firewall-check"
	chainServiceEPCheck  = "service-endpoints-check"
	chainNodePortEPCheck = "nodeport-endpoints-check"
	chainClusterIPsCheck = "cluster-ips-check"
	chainReject          = "reject-chain"
)

type baseChain struct {
	name     string
	typ      knftables.BaseChainType
	hook     knftables.BaseChainHook
	priority int // numeric: nft 1.0.6 rejects "dstnat" on the output hook
	jumps    []string
}

// baseChains are hooked into netfilter. "reject" is valid only in input,
// forward and output before kernel 5.9, so no-endpoint checks happen
// there rather than in prerouting (as kube-proxy does).
var baseChains = []baseChain{
	{"filter-prerouting", knftables.FilterType, knftables.PreroutingHook, -110, []string{chainFirewallCheck}},
	{"filter-input", knftables.FilterType, knftables.InputHook, -110, []string{chainNodePortEPCheck, chainServiceEPCheck}},
	{"filter-forward", knftables.FilterType, knftables.ForwardHook, -110, []string{chainServiceEPCheck, chainClusterIPsCheck}},
	{"filter-output", knftables.FilterType, knftables.OutputHook, -110, []string{chainServiceEPCheck, chainFirewallCheck}},
	{"filter-output-post-dnat", knftables.FilterType, knftables.OutputHook, -90, []string{chainClusterIPsCheck}},
	{"nat-prerouting", knftables.NATType, knftables.PreroutingHook, -100, []string{chainServices}},
	{"nat-output", knftables.NATType, knftables.OutputHook, -100, []string{chainServices}},
	{"nat-postrouting", knftables.NATType, knftables.PostroutingHook, 100, []string{chainMasquerading}},
}

// writeSkeleton adds to tx everything in the table that does not belong
// to one service port: base chains, dispatch chains and their rules, and
// the shared sets and maps. Chains and static sets are flushed and
// refilled, so the same call both builds a new table and re-asserts an
// existing one; the per-service maps are only declared, never flushed.
func (b *Backend) writeSkeleton(tx *txn) {
	for _, f := range b.fams {
		b.declareFamilySets(tx, f)
	}

	rules := map[string][]rule{}
	add := func(chain, text, comment string) { rules[chain] = append(rules[chain], rule{text, comment}) }
	for _, bc := range baseChains {
		for _, j := range bc.jumps {
			if bc.typ == knftables.FilterType {
				add(bc.name, "ct state new jump "+j, "")
			} else {
				add(bc.name, "jump "+j, "")
			}
		}
	}
	for _, f := range b.fams {
		lookup := f.ip + " daddr . meta l4proto . th dport vmap @"
		add(chainServices, lookup+f.serviceIPs, "")
		np := b.nodePortMatch(f)
		add(chainServices, np+" meta l4proto . th dport vmap @"+f.serviceNodePorts, "")
		add(chainNodePortEPCheck, np+" meta l4proto . th dport vmap @"+f.noEndpointNodePorts, "")
		add(chainServiceEPCheck, lookup+f.noEndpointServices, "")
		add(chainFirewallCheck, lookup+f.firewallIPs, "")
		add(chainClusterIPsCheck, f.ip+" daddr @"+f.clusterIPs+" reject", "reject traffic to unknown ports of cluster IPs")
		if len(f.serviceCIDRPrefixes) > 0 {
			add(chainClusterIPsCheck, f.ip+" daddr @"+f.serviceCIDRs+" drop", "drop traffic to unallocated cluster IPs")
		}
		add(chainMasquerading, "ct status dnat "+f.ip+" saddr . "+f.ip+" daddr @"+f.hairpin+" "+b.setMark,
			"hairpin: a pod reached itself through a service")
	}
	add(chainMasquerading, "meta mark & "+b.mark+" == 0 return", "")
	add(chainMasquerading, "meta mark set meta mark ^ "+b.mark, "")
	add(chainMasquerading, "masquerade fully-random", "")
	add(chainReject, "reject", "")

	// Every chain exists before any rule jumps to it.
	var chains []*knftables.Chain
	for _, bc := range baseChains {
		chains = append(chains, &knftables.Chain{
			Name:     bc.name,
			Type:     knftables.PtrTo(bc.typ),
			Hook:     knftables.PtrTo(bc.hook),
			Priority: knftables.PtrTo(knftables.BaseChainPriority(strconv.Itoa(bc.priority))),
		})
	}
	for _, name := range []string{chainServices, chainMasquerading, chainFirewallCheck, chainServiceEPCheck,
		chainNodePortEPCheck, chainClusterIPsCheck, chainReject} {
		chains = append(chains, &knftables.Chain{Name: name})
	}
	for _, c := range chains {
		tx.Add(c)
	}
	for _, c := range chains {
		writeChain(tx, c, rules[c.Name])
	}
}

// writeChain adds chain, empties it and fills it with rules.
func writeChain(tx *txn, chain *knftables.Chain, rules []rule) {
	tx.Add(chain)
	tx.Flush(&knftables.Chain{Name: chain.Name})
	for _, r := range rules {
		tx.Add(r.object(chain.Name))
	}
}

// declareFamilySets declares f's sets and maps and refills the static
// ones (prefix sets from Options).
func (b *Backend) declareFamilySets(tx *txn, f *family) {
	verdictMap := func(name, key, comment string) {
		tx.Add(&knftables.Map{Name: name, Type: key + " : verdict", Comment: knftables.PtrTo(comment)})
	}
	frontend := f.addrType + " . inet_proto . inet_service"
	verdictMap(f.serviceIPs, frontend, "cluster IP, external IP and load-balancer IP dispatch")
	verdictMap(f.serviceNodePorts, "inet_proto . inet_service", "node port dispatch")
	verdictMap(f.noEndpointServices, frontend, "frontends without endpoints: drop or reject")
	verdictMap(f.noEndpointNodePorts, "inet_proto . inet_service", "node ports without endpoints: drop or reject")
	verdictMap(f.firewallIPs, frontend, "load-balancer IPs with loadBalancerSourceRanges")
	// The endpoint maps are keyed by typeof: numgen's type is a plain
	// integer, which "type" cannot spell in a concatenation.
	for _, proto := range protocols {
		tx.Add(&knftables.Map{
			Name:    f.endpointsMap(proto, false),
			TypeOf:  f.ip + " daddr . " + proto + " dport . numgen random mod 1 : " + f.ip + " daddr . " + proto + " dport",
			Comment: knftables.PtrTo("frontend IP . port . index : endpoint, for the pick chains"),
		})
		tx.Add(&knftables.Map{
			Name:    f.endpointsMap(proto, true),
			TypeOf:  proto + " dport . numgen random mod 1 : " + f.ip + " daddr . " + proto + " dport",
			Comment: knftables.PtrTo("node port . index : endpoint, for the pick-nodeport chains"),
		})
	}
	tx.Add(&knftables.Set{Name: f.clusterIPs, Type: f.addrType, Comment: knftables.PtrTo("allocated cluster IPs")})
	tx.Add(&knftables.Set{Name: f.hairpin, Type: f.addrType + " . " + f.addrType,
		Comment: knftables.PtrTo("local endpoints, twice: traffic from one to itself is masqueraded")})

	static := func(name string, prefixes []netip.Prefix, comment string) {
		if len(prefixes) == 0 {
			return
		}
		set := &knftables.Set{Name: name, Type: f.addrType, Flags: []knftables.SetFlag{knftables.IntervalFlag},
			Comment: knftables.PtrTo(comment)}
		tx.Add(set)
		tx.Flush(&knftables.Set{Name: name})
		for _, p := range prefixes {
			tx.Add(&knftables.Element{Set: name, Key: []string{p.String()}})
		}
	}
	static(f.serviceCIDRs, f.serviceCIDRPrefixes, "service CIDRs")
	static(f.localTraffic, f.localTrafficPrefixes, "pod traffic sources (detect-local)")
	static(f.nodePortAddrs, f.nodePortPrefixes, "node port addresses")
}

// nodePortMatch matches packets to f's node ports: a local address other
// than loopback (kube-proxy never served node ports on localhost), inside
// the configured node-port prefixes of f if there are any.
func (b *Backend) nodePortMatch(f *family) string {
	m := "fib daddr type local " + f.ip + " daddr != " + f.loopback
	if len(f.nodePortPrefixes) > 0 {
		m += " " + f.ip + " daddr @" + f.nodePortAddrs
	}
	return m
}

// normalizePrefixes masks prefixes and drops those inside another: nft
// interval sets reject overlapping elements.
func normalizePrefixes(in []netip.Prefix) []netip.Prefix {
	var out []netip.Prefix
	for _, p := range in {
		out = append(out, p.Masked())
	}
	slices.SortFunc(out, func(a, b netip.Prefix) int {
		if c := a.Bits() - b.Bits(); c != 0 {
			return c
		}
		return a.Addr().Compare(b.Addr())
	})
	var kept []netip.Prefix
	for _, p := range out {
		covered := false
		for _, k := range kept {
			if k.Contains(p.Addr()) {
				covered = true
				break
			}
		}
		if !covered {
			kept = append(kept, p)
		}
	}
	slices.SortFunc(kept, func(a, b netip.Prefix) int { return a.Addr().Compare(b.Addr()) })
	return kept
}
