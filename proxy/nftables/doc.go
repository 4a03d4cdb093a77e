// Package nftables is nodenet's Linux service proxy backend: it programs
// the brain's proxy.State into one nftables table, inet nodenet, through
// knftables, one atomic transaction per sync. No other table is touched.
//
// One inet table serves both families, so a dual-stack sync is one
// transaction and one nft process, and the hooks are registered once;
// sets and maps are typed, so they come in pairs suffixed -v4 and -v6.
//
// # Table layout
//
// Base chains (numeric priorities; dstnat is -100, srcnat 100):
//
//	filter-prerouting   prerouting -110  ct state new → firewall-check
//	filter-input        input      -110  ct state new → nodeport-endpoints-check, service-endpoints-check
//	filter-forward      forward    -110  ct state new → service-endpoints-check, cluster-ips-check
//	filter-output       output     -110  ct state new → service-endpoints-check, firewall-check
//	filter-output-post-dnat output  -90  ct state new → cluster-ips-check
//	nat-prerouting      prerouting -100  → services
//	nat-output          output     -100  → services
//	nat-postrouting     postrouting 100  → masquerading
//
// Dispatch: services looks the packet up in service-ips-vN (frontend IP .
// protocol . port → goto the service port's chain) and, for local
// addresses (inside nodeport-addresses-vN if NodePortAddresses has
// prefixes of the family; never loopback), in service-nodeports-vN
// (protocol . node port). Frontends without usable endpoints are instead
// in no-endpoint-services-vN / no-endpoint-nodeports-vN, which the filter
// chains turn into a reject (no endpoints at all) or a drop (endpoints
// exist, but a Local policy allows none of them here). firewall-ips-vN
// sends load-balancer IPs with loadBalancerSourceRanges to their fw-
// chain. cluster-ips-check rejects traffic to unknown ports of cluster
// IPs (cluster-ips-vN) and drops traffic to unallocated addresses of the
// service CIDRs (service-cidrs-vN).
//
// Per service port, named "<kind>-<namespace>/<name>/<protocol>/<port>[/<port
// name>]-v4|v6":
//
//	svc-…  cluster IP traffic: masquerade off-cluster sources (ip saddr not
//	       in local-traffic-vN, or everything with MasqueradeAll), then pick
//	       one of InternalEndpoints
//	ext-…  node port, external IP and load-balancer IP traffic: masquerade
//	       (eTP Cluster), or with eTP Local send this node's pods and the
//	       node itself to clu-… (the node masqueraded), then pick one of
//	       ExternalEndpoints; if there are none the packet falls through
//	       and is dropped by the filter chains
//	clu-…  eTP Local only: pick one of ClusterEndpoints
//	fw-…   drop sources outside loadBalancerSourceRanges; if the ranges
//	       include one of Options.NodeIPs, first return for sources that
//	       are the service's load-balancer IPs (kube-proxy's "allow from
//	       node": a VIP-mode load-balancer IP routed locally is the source
//	       of the node's own connections to it)
//	aff-…/<endpoint>  ClientIP affinity: the sources that picked that
//	       endpoint, with the affinity timeout (a set, not a chain)
//
// Picking an endpoint: without affinity a port's chain ends in "goto
// pick-<n>-<protocol>-vN", a chain shared by every port with n endpoints
// of that protocol, whose one rule DNATs through the map
// endpoints-<protocol>-vN keyed by destination . port . (numgen random mod
// n); node ports use pick-nodeport-… and nodeport-endpoints-<protocol>-vN,
// keyed by port . index. So a service costs one chain, two rules and one map element
// per frontend and endpoint, which the kernel loads several times faster
// than a rule per endpoint, and a new connection costs two lookups
// whatever the number of endpoints. With ClientIP affinity the chain
// instead holds one rule per endpoint sending known clients back to it,
// then a cascade "numgen random mod (n-i) == 0 … dnat" that picks
// uniformly, each adding the client to its endpoint's affinity set.
//
// Masquerading: rules set the mark bit Options.MasqueradeMark; the
// masquerading chain masquerades marked packets (clearing the bit) and
// marks hairpin traffic (a local endpoint talking to itself through a
// service: hairpin-vN holds "endpoint . endpoint" for this node's
// endpoints).
//
// Syncs: the first sync, and the first after a failure, replace the table
// in one transaction (adopting whatever an earlier run left). Later syncs
// diff: the backend keeps the ServicePorts it programmed, re-plans the
// changed ones (all of them, plus the shared chains, on a full sync) and
// writes only the chains, sets and elements that differ. Removed service
// chains are emptied at once and deleted a second later, when old kernels
// have noticed their map elements are gone.
package nftables
