package hostport

import (
	"fmt"
	"net/netip"
	"strings"

	"sigs.k8s.io/knftables"

	"github.com/nodenet/nodenet/internal/nftnl"
)

var (
	allMaps   = []string{mapAnyV4, mapHostIPv4, mapAnyV6, mapHostIPv6}
	allChains = []string{chainPrerouting, chainOutput, chainPostrouting, chainHostPorts}
)

// ruleset is what ensure programs besides the map elements; two rulesets
// with the same fingerprint program the same rules.
type ruleset struct {
	table    string
	mark     uint32
	podCIDRs []netip.Prefix
}

func (r ruleset) fingerprint() string {
	return fmt.Sprintf("%s %#x %v", r.table, r.mark, r.podCIDRs)
}

// hostPortMaps are the four DNAT maps of table.
func hostPortMaps(table string) []*knftables.Map {
	m := func(name, typ, comment string) *knftables.Map {
		return &knftables.Map{Family: knftables.InetFamily, Table: table, Name: name, Type: typ, Comment: &comment}
	}
	return []*knftables.Map{
		m(mapAnyV4, "inet_proto . inet_service : ipv4_addr . inet_service", "hostPorts on every IPv4 address"),
		m(mapHostIPv4, "ipv4_addr . inet_proto . inet_service : ipv4_addr . inet_service", "hostPorts on one IPv4 hostIP"),
		m(mapAnyV6, "inet_proto . inet_service : ipv6_addr . inet_service", "hostPorts on every IPv6 address"),
		m(mapHostIPv6, "ipv6_addr . inet_proto . inet_service : ipv6_addr . inet_service", "hostPorts on one IPv6 hostIP"),
	}
}

// ensure queues onto tx everything but the elements: the table, the four
// chains, the four maps (added, so existing elements stay) and the chains'
// rules (flushed and written again, so rules that drifted are repaired).
// The whole transaction is atomic: a packet sees the old rules or the new.
func (r ruleset) ensure(tx *nftnl.Tx) {
	fam := knftables.InetFamily
	tx.Add(&knftables.Table{Family: fam, Name: r.table,
		Comment: knftables.PtrTo("nodenet: pod hostPorts (cni/hostport); written by the nodenet agent")})

	base := func(name string, hook knftables.BaseChainHook, prio knftables.BaseChainPriority, comment string) {
		tx.Add(&knftables.Chain{Family: fam, Table: r.table, Name: name,
			Type: knftables.PtrTo(knftables.NATType), Hook: &hook, Priority: &prio, Comment: &comment})
	}
	// Priorities are spelled as numbers: the netlink encoder takes nothing
	// else, nft 1.0.6 refuses "dstnat" on the output hook, and the Fake's
	// Dump then says what the kernel gets.
	base(chainPrerouting, knftables.PreroutingHook, "-100", "hostPorts of traffic arriving at the node")
	base(chainOutput, knftables.OutputHook, "-100", "hostPorts of traffic the node sends to itself")
	base(chainPostrouting, knftables.PostroutingHook, "100", "masquerade hairpin hostPort traffic")
	tx.Add(&knftables.Chain{Family: fam, Table: r.table, Name: chainHostPorts,
		Comment: knftables.PtrTo("DNAT to a local address's hostPort")})

	for _, m := range hostPortMaps(r.table) {
		tx.Add(m)
	}

	for _, c := range allChains {
		tx.Flush(&knftables.Chain{Family: fam, Table: r.table, Name: c})
	}
	rule := func(chain, format string, args ...any) {
		tx.Add(&knftables.Rule{Family: fam, Table: r.table, Chain: chain, Rule: fmt.Sprintf(format, args...)})
	}

	rule(chainPrerouting, "fib daddr type local jump %s", chainHostPorts)
	// Loopback destinations from a loopback source are left alone: a
	// DNATed packet from 127.0.0.1 or ::1 can't leave the node (see
	// doc.go). From one of the node's own addresses (curl --interface
	// NODE_IP http://127.0.0.1:PORT, as upstream's HostPort conformance
	// spec connects) 127.0.0.1 is a hostIP like any other.
	rule(chainOutput, "ip saddr 127.0.0.0/8 ip daddr 127.0.0.0/8 return")
	rule(chainOutput, "ip6 daddr ::1 return")
	rule(chainOutput, "fib daddr type local jump %s", chainHostPorts)

	// Hairpin: a pod on this node reaching a hostPort is DNATed to a pod on
	// the same bridge, which would answer it directly, bypassing the
	// conntrack entry that undoes the DNAT. Mark exactly the packets the
	// DNAT rules below will rewrite (the same map lookup) and masquerade
	// them in postrouting, so the answer comes back through the node.
	var v4, v6 []string
	for _, p := range r.podCIDRs {
		if p.Addr().Is4() {
			v4 = append(v4, p.Masked().String())
		} else {
			v6 = append(v6, p.Masked().String())
		}
	}
	if len(v4) > 0 {
		rule(chainHostPorts, "ip saddr %s ip daddr . meta l4proto . th dport @%s meta mark set meta mark | %#x", anonSet(v4), mapHostIPv4, r.mark)
		rule(chainHostPorts, "ip saddr %s meta l4proto . th dport @%s meta mark set meta mark | %#x", anonSet(v4), mapAnyV4, r.mark)
	}
	if len(v6) > 0 {
		rule(chainHostPorts, "ip6 saddr %s ip6 daddr . meta l4proto . th dport @%s meta mark set meta mark | %#x", anonSet(v6), mapHostIPv6, r.mark)
		rule(chainHostPorts, "ip6 saddr %s meta l4proto . th dport @%s meta mark set meta mark | %#x", anonSet(v6), mapAnyV6, r.mark)
	}
	// The DNATs; a lookup that misses ends the rule. One hostIP's mapping
	// and an every-address mapping of the same port never coexist (Add
	// refuses the second), so the order between them doesn't matter.
	rule(chainHostPorts, "dnat ip to ip daddr . meta l4proto . th dport map @%s", mapHostIPv4)
	rule(chainHostPorts, "meta nfproto ipv4 dnat ip to meta l4proto . th dport map @%s", mapAnyV4)
	rule(chainHostPorts, "dnat ip6 to ip6 daddr . meta l4proto . th dport map @%s", mapHostIPv6)
	rule(chainHostPorts, "meta nfproto ipv6 dnat ip6 to meta l4proto . th dport map @%s", mapAnyV6)

	rule(chainPostrouting, "meta mark & %#x == 0 return", r.mark)
	rule(chainPostrouting, "meta mark set meta mark ^ %#x", r.mark)
	rule(chainPostrouting, "masquerade fully-random")
}

// anonSet renders an anonymous set: "{ a, b }".
func anonSet(elems []string) string {
	return "{ " + strings.Join(elems, ", ") + " }"
}
