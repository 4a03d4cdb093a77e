// Package egress makes traffic from this node's pods to the world outside
// the cluster leave with the node's address (Linux), as flannel's
// --ip-masq does: the underlay usually has no route back to pod CIDRs.
//
// # What is programmed
//
// One table, inet nodenet-egress (TableName), owned by us and written only
// in whole transactions, over netlink from inside the agent
// (internal/nftnl: no nft process), holding one chain:
//
//   - chain postrouting (nat, priority 100 = srcnat, spelled numerically
//     for nft 1.0.6), per IP family of this node's pod CIDRs one rule:
//     "ip saddr <pod CIDRs> ip daddr != { <cluster CIDRs>, 224.0.0.0/4 }
//     masquerade fully-random" (ip6 and ff00::/8 for IPv6). Traffic to
//     another pod keeps its source, so pods see each other's real
//     addresses; multicast stays on the link unchanged. fully-random picks
//     source ports at random, so pods that reuse ports don't collide on the
//     node's one address. Service traffic is DNATed before postrouting, so
//     a service whose endpoints are pods is not masqueraded here (the
//     proxy's own table decides), while one whose endpoints are outside
//     the cluster is, as for any other outside address.
//
// # Writes
//
// Every rule's comment carries a hash of the whole ruleset. Ensure lists
// the chain's rules as their handles and comments (a netlink GETRULE
// dump; the rules' expressions are not read back) and writes only when
// the comments differ from the wanted ones, so a second Ensure with the
// same Spec, and a restarted agent's first, write nothing; a rule deleted
// or added behind our back, or a lost table, makes them differ. When it
// writes, it deletes and recreates the whole table in one atomic
// transaction: packets see the old rules or the new, never none, and
// anything else that drifted into the table goes too. Remove deletes the
// table, and writes nothing when there is none.
//
// The rules are nft text compiled by internal/nftnl into the expressions
// nft itself generates for it: TestTheNetlinkTableIsTheOneNFTWrites
// compares `nft list` and the kernel's expressions of a netlink-written
// table with an nft-written one, and the kernel test sends real traffic
// through the netlink-written table.
//
// Windows pods get outbound NAT from their HNS endpoints' policies; this
// package is Linux only and empty elsewhere.
package egress
