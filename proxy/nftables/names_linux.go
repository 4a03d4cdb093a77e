package nftables

import (
	"net/netip"
	"strconv"
	"strings"

	"github.com/nodenet/nodenet/proxy"
)

// TableName is the name of nodenet's table in the inet family.
const TableName = "nodenet"

// family holds the per-family spelling of everything the rules need, so
// the rule builders stay family-agnostic.
type family struct {
	ipFamily proxy.IPFamily
	suffix   string // "v4" or "v6": the suffix of per-family object names
	ip       string // "ip" or "ip6": the payload selector and the nat family
	addrType string // "ipv4_addr" or "ipv6_addr"
	loopback string // the loopback range node ports never answer on

	// Names of the family's sets and maps.
	serviceIPs          string // frontend IP . proto . port : verdict
	serviceNodePorts    string // proto . node port : verdict
	noEndpointServices  string // frontend IP . proto . port : drop or reject
	noEndpointNodePorts string // proto . node port : drop or reject
	firewallIPs         string // load-balancer IP . proto . port : source-range chain
	clusterIPs          string // allocated cluster IPs
	serviceCIDRs        string // where cluster IPs are allocated from
	localTraffic        string // detect-local: pod sources
	nodePortAddrs       string // where node ports answer
	hairpin             string // local endpoint . same endpoint

	// From Options, normalized to this family.
	serviceCIDRPrefixes  []netip.Prefix
	localTrafficPrefixes []netip.Prefix
	nodePortPrefixes     []netip.Prefix // empty: every local address
	nodeIPs              []netip.Addr
}

func newFamily(f proxy.IPFamily) *family {
	fam := &family{ipFamily: f, suffix: "v4", ip: "ip", addrType: "ipv4_addr", loopback: "127.0.0.0/8"}
	if f == proxy.IPv6 {
		fam.suffix, fam.ip, fam.addrType, fam.loopback = "v6", "ip6", "ipv6_addr", "::1"
	}
	n := func(s string) string { return s + "-" + fam.suffix }
	fam.serviceIPs = n("service-ips")
	fam.serviceNodePorts = n("service-nodeports")
	fam.noEndpointServices = n("no-endpoint-services")
	fam.noEndpointNodePorts = n("no-endpoint-nodeports")
	fam.firewallIPs = n("firewall-ips")
	fam.clusterIPs = n("cluster-ips")
	fam.serviceCIDRs = n("service-cidrs")
	fam.localTraffic = n("local-traffic")
	fam.nodePortAddrs = n("nodeport-addresses")
	fam.hairpin = n("hairpin")
	return fam
}

// protocols are those nft can DNAT a port for.
var protocols = []string{"tcp", "udp", "sctp"}

// endpointsMap names the map of proto endpoints the pick chains look up:
// "endpoints-<proto>-vN", keyed by frontend IP . port . index, or
// "nodeport-endpoints-<proto>-vN", keyed by node port . index. There is a
// map per protocol because nft 1.0.6 cannot use a typeof map keyed by
// "meta l4proto . th dport" that it reads back from the kernel in a rule
// that matched a protocol ("conflicting protocols specified: tcp vs. th").
func (f *family) endpointsMap(proto string, nodePort bool) string {
	if nodePort {
		return "nodeport-endpoints-" + proto + "-" + f.suffix
	}
	return "endpoints-" + proto + "-" + f.suffix
}

// Per-service-port object kinds: the prefix of their names.
const (
	kindService  = "svc" // cluster IP traffic
	kindExternal = "ext" // node port, external IP and load-balancer IP traffic
	kindCluster  = "clu" // eTP Local short-circuit to cluster-wide endpoints
	kindFirewall = "fw"  // loadBalancerSourceRanges
	kindAffinity = "aff" // ClientIP affinity set of one endpoint
)

// portBase names a service port for its chains and sets:
// "<namespace>/<name>/<protocol>/<port>" plus "/<port name>" for a named
// port. Namespaces, names and port names are DNS labels ([a-z0-9-]) and a
// port name always holds a letter, so the result is unique per service
// port, readable, and made only of characters nft allows in names
// ([A-Za-z0-9_./-]). The longest possible name (63+63+4+5+15 plus
// separators, prefixes and an IPv6 endpoint) stays under nft's 256, so no
// hashing is needed.
func portBase(sp *proxy.ServicePort) string {
	var b strings.Builder
	b.WriteString(sp.Key.Namespace)
	b.WriteByte('/')
	b.WriteString(sp.Key.Name)
	b.WriteByte('/')
	b.WriteString(protoName(sp.Key.Protocol))
	b.WriteByte('/')
	b.WriteString(strconv.Itoa(int(sp.Port)))
	if sp.Key.Port != "" {
		b.WriteByte('/')
		b.WriteString(sp.Key.Port)
	}
	return b.String()
}

// objectName is "<kind>-<base>-<family suffix>".
func objectName(kind, base string, f *family) string {
	return kind + "-" + base + "-" + f.suffix
}

// affinitySetName names the affinity set of one endpoint of a service
// port: "aff-<base>-<family>/<ip>/<port>", with an IPv6 address's colons
// turned into underscores (nft names allow neither ':' nor '[').
func affinitySetName(base string, f *family, ep proxy.Endpoint) string {
	return objectName(kindAffinity, base, f) + "/" + strings.ReplaceAll(ep.IP.String(), ":", "_") + "/" + strconv.Itoa(int(ep.Port))
}

// pickChainName names a shared chain that DNATs a service port's traffic
// to one of n endpoints by a map lookup: "pick-<n>-<proto>-<family>", or
// "pick-nodeport-..." for node ports, whose map is keyed without the
// destination address.
func pickChainName(n int, proto string, nodePort bool, f *family) string {
	kind := "pick-"
	if nodePort {
		kind = "pick-nodeport-"
	}
	return kind + strconv.Itoa(n) + "-" + proto + "-" + f.suffix
}

// protoName is the protocol as nft spells it.
func protoName(p proxy.Protocol) string {
	switch p {
	case proxy.TCP:
		return "tcp"
	case proxy.UDP:
		return "udp"
	case proxy.SCTP:
		return "sctp"
	}
	return ""
}
