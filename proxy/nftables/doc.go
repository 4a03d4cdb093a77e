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
// Syncs: later syncs diff: the backend keeps the ServicePorts it
// programmed, re-plans the changed ones (all of them, plus the shared
// chains, on a full sync) and writes only the chains, sets and elements
// that differ. Removed service chains are emptied at once and deleted a
// second later, when old kernels have noticed their map elements are
// gone. The first sync after a failure replaces the table in one
// transaction.
//
// # Restarts
//
// The table is a function of the Options and the programmed service
// ports (a randomized test checks that any history of partial syncs
// ends in the table a new backend would build). Its fingerprint — the
// XOR of a SHA-256 prefix of each port's plan as written, and one of the
// shared part as written plus layoutVersion — is kept up to date as
// ports change, and recorded as the name of an empty chain state-<hex>:
// a transaction that changes it deletes the old marker and adds the new
// one, and one that does not flushes the marker, which fails if the
// table no longer holds what this backend believes it does (another
// writer, a lost table) and makes the next sync replace it.
//
// A new backend's first sync plans the whole state without writing and
// lists the table's object names once (ListAll: use knftables'
// UseNetlink, as nft would list every rule). If the marker of that plan
// is there and the chains, sets and maps are exactly the ones it would
// create (no chain deleted, no emptied chain of the previous run left),
// it adopts the table: it writes nothing, and the affinity sets keep
// their clients. At 10k services × 10 endpoints that costs 0.23 s and no
// transaction, against 2.3–2.8 s for a replacement. Otherwise — another
// state (services changed while the agent was down), other Options,
// another layout, a table of an older nodenet — it replaces the table.
//
// The trade-off: adoption compares names, not content. A change behind
// nodenet's back that keeps every name (a map element or a rule of a
// service chain deleted or edited) is not seen at a restart, nor by the
// periodic full sync, which re-asserts the shared chains and static sets
// but checks service ports only against what the backend remembers. It
// lasts until a sync rewrites that chain or element, or until a
// transaction fails on it (deleting what is gone) and
// the next sync replaces the table. To have the table rebuilt at once,
// delete the marker chain (nft delete chain inet nodenet state-…): the
// next sync, at the latest the periodic one, fails on it and the one
// after replaces the table.
package nftables
