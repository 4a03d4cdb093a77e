// Package nftables is nodenet's Linux service proxy backend: it programs
// the brain's proxy.State into one nftables table, inet nodenet, one
// atomic transaction per sync, over netlink from inside the process (no
// nft child, no text on the hot path; see Programming the kernel). No
// other table is touched.
//
// One inet table serves both families, so a dual-stack sync is one
// transaction and the hooks are registered once; sets and maps are
// typed, so they come in pairs suffixed -v4 and -v6.
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
// lists the table's object names once (netlink GETCHAIN and GETSET
// dumps; nft would list every rule). If the marker of that plan
// is there and the chains, sets and maps are exactly the ones it would
// create (no chain deleted, no emptied chain of the previous run left),
// it adopts the table: it writes nothing, and the affinity sets keep
// their clients. At 10k services × 10 endpoints that costs well under a
// second and no transaction (BENCHMARKS.md). Otherwise — another
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
//
// # Programming the kernel
//
// The backend builds each sync as a sequence of operations on knftables
// objects (used as plain descriptions; rules are nft text from a small
// fixed vocabulary) on an internal/nftnl transaction and hands them to a
// transport. The netlink encoder, rule compiler, socket and dumps are
// internal/nftnl's, table-neutral: cni/hostport and overlay/egress
// program their own tables through the same code.
//
//   - netlink (the agent; Options.NFT nil): each operation is encoded as
//     it is added into nf_tables netlink messages of one
//     NFNL_MSG_BATCH_BEGIN … END batch, which goes to the kernel in one
//     sendmsg on a NETLINK_NETFILTER socket that New opens (in the
//     network namespace New runs in). The kernel applies a batch as one
//     transaction: all of it or, if any message fails, none
//     (TestABatchCommitsWholeOrNotAtAll). It takes a batch per sendmsg
//     (nfnetlink_rcv_batch), so the batch is not split over several
//     sends: its buffers (1 MiB chunks, passed as one iovec list) are
//     sized to it, the socket's send buffer is forced to fit it
//     (SO_SNDBUFFORCE, as nft does), and only the last message asks for
//     an ack, so a 30k-message batch gets one answer, or the errors of
//     the messages that failed, named back to their objects. The buffers
//     are dropped after each sync: nothing stays at peak size.
//   - knftables (Options.NFT set): the same operations as a knftables
//     transaction — its Fake in unit tests (whose Dump and
//     LastTransaction the tests read), `nodenetctl proxy render -o
//     nft`, or knftables.New (the nft binary) to debug.
//
// Elements go in bulk: consecutive additions (or deletions) to one set
// share NEWSETELEM (DELSETELEM) messages as large as the kernel takes —
// the element list is one attribute, whose length is 16 bits, so about
// 1,300 elements of endpoints-tcp-v4 or 800 verdict elements a message —
// and a full sync of 10k services × 10 endpoints (110k elements, 10k
// chains, 20k rules) is about 30k messages, 11 MiB, in one batch. The
// plan is streamed: a port is planned, encoded and dropped before the
// next, so the sync holds the batch and the element registry, never
// every plan, object and text at once.
//
// Rules are compiled from their text by nftnl's compileRule, which knows
// exactly the statements nodenet's tables use and refuses anything else;
// each compiles to the expressions nft 1.0.6 generates for it (read with
// nft --debug=netlink): in the inet family an ip/ip6 match first checks meta
// nfproto and a tcp/udp/sctp field meta l4proto; concatenated keys load
// each field into the next 4-byte register (a 1-byte protocol or 2-byte
// port padded to 4); numgen indexes are host-order integers; verdict maps
// carry verdict data; DNAT from a map takes the address and port from
// the looked-up value's registers; "{ … }" becomes an anonymous constant
// set (an interval set for prefixes, adjacent ones merged) created just
// before its rule, or with one element a match of that element, as nft
// does; sets carry nft's userdata (typeof, comment) so `nft list` prints
// them as declared. TestEveryRuleShapeLoadsThroughNetlink
// writes a state with every shape through netlink and through nft into
// two namespaces and requires the two `nft list` outputs, and the
// expressions the kernel holds for every rule (`nft --debug=netlink
// list`), to be equal; the packet tests send real traffic through the
// netlink-built table.
//
// Why these libraries: the expressions are marshalled by
// github.com/google/nftables' expr package (the kernel attribute
// encoding of each expression, kept up to date upstream), but its
// Conn.Flush asks for an ack of every message (30k acks overflow the
// receive buffer of a full sync) and SetAddElements puts all its
// elements into one message (over the 64 KiB attribute limit at a few
// thousand), and mdlayher/netlink marshals a batch into one contiguous
// buffer; so the batch, socket and dumps are our own, on
// golang.org/x/sys/unix.
//
// Nothing in the agent runs nft: the proxy, cni/hostport (pod hostPorts)
// and overlay/egress (pod egress masquerading) all program their tables
// over netlink through internal/nftnl, and the agent's status dump
// (`nodenetctl dump nft`) lists the three tables over netlink too
// (object names, rule counts and comments, set elements), so the agent's
// image has no nft. The nft binary stays a tool: tests use it to inspect
// the kernel and to write the reference tables the netlink ones are
// compared with, and an operator may run `nft list table inet nodenet`
// on the node to read the rules themselves.
package nftables
