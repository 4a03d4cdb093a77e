// Package hostport makes pods' hostPorts work on Linux: the conflist
// declares the portMappings capability, the runtime hands each ADD the
// pod's hostPorts (cni.Pod.PortMappings), and this package DNATs them with
// nftables. It is a decorator (Wiring) over the pod wiring
// (cni/vethbridge), which stays unaware of hostPorts.
//
// # What is programmed
//
// One table, inet nodenet-hostport, owned by us and written only in
// whole transactions, over netlink from inside the agent
// (internal/nftnl: no nft process; the socket is opened in the node's
// network namespace, Options.HostNetNS, and stays bound to it):
//
//   - four maps, the mappings themselves: hostports-v4 and hostports-v6
//     (key "protocol . port": a hostPort on every local address of the
//     family) and hostip-hostports-v4 and hostip-hostports-v6 (key
//     "hostIP . protocol . port": a hostPort on one address, the mapping's
//     HostIP); the value is "podIP . containerPort". Each element's comment
//     is "<containerID>/<ifname> <namespace>/<name>": the attachment, so
//     Del, Check and List work from the kernel alone after an agent restart
//     (the agent keeps no state across restarts), and the pod, so a
//     conflict names it.
//   - chain hostports: DNAT through the maps (a lookup that misses ends the
//     rule, so traffic that isn't a hostPort passes untouched). Before the
//     DNATs, packets from this node's pod CIDRs that a map will DNAT get the
//     hairpin mark (Options.HairpinMark).
//   - chain prerouting (nat, priority -100): "fib daddr type local jump
//     hostports": traffic arriving at the node for one of its own
//     addresses; traffic routed through the node keeps its destination.
//   - chain output (nat, priority -100, numeric: nft 1.0.6 refuses
//     "dstnat" on the output hook): the same for traffic the node sends to
//     its own addresses, except loopback (below).
//   - chain postrouting (nat, priority 100): masquerade marked packets
//     (and clear the mark). Hairpin: a pod reaching a hostPort through a
//     node address is DNATed to a pod on the same bridge, which would answer
//     it directly with its own address, bypassing the conntrack entry that
//     undoes the DNAT; masqueraded, the answer goes to the node, which
//     undoes both. Only pod sources are masqueraded: clients elsewhere see
//     the real answer path and the pod sees their real address. With
//     br_netfilter (bridge-nf-call-iptables=1, the kernel default once the
//     module is loaded) the DNATed packet is bridged back out of the port
//     it came in on, which needs the port in hairpin mode (cni/vethbridge
//     sets it); without, it is routed. The kernel test covers both.
//
// Adding a pod's hostPorts is one transaction of map elements, no chain is
// rewritten; removing them is one transaction of element deletes (an Add
// and a Del of one mapping take about a millisecond together,
// BENCHMARKS.md). A pod
// without hostPorts costs no kernel call at all. The table, chains, maps
// and rules are "ensured" (added if missing, rules flushed and written
// again) on first use and on every Ready, which repairs drift; elements
// survive.
//
// The rules are nft text (what knftables' Fake shows in the unit tests)
// compiled by internal/nftnl into the expressions nft itself generates:
// TestTheNetlinkTableIsTheOneNFTWrites programs the same pods through
// netlink and through nft into two namespaces and compares `nft list`
// and the kernel's expressions of every rule; TestKernel sends real
// packets through the netlink-written table. Elements are read back with
// a netlink GETSETELEM dump, decoded by the maps' types: key, value and
// the owner comment.
//
// A hostPort that another pod holds for the same family, protocol and port
// on the same hostIP, or on every address when either side is on every
// address (as Kubernetes' scheduler counts them), fails the ADD with an
// error that wraps ErrConflict and names the pod holding it; the pod is
// unwired again. The kernel has the last word: new elements are created
// (NLM_F_EXCL, nft's "create"), which fails if the key exists.
//
// A mirror of the map elements, loaded from the kernel on first use and
// again whenever a transaction fails (and on every List and Check), lets
// Del and Add skip the kernel for pods without hostPorts. Every write to
// the table goes through one mutex.
//
// When a UDP mapping is created, the conntrack entries of UDP flows to its
// port are deleted (as the reference portmap plugin does): a client that
// kept sending to the port before the mapping existed would otherwise keep
// its un-DNATed entry, and miss the pod, for as long as it keeps sending.
//
// # What is not done, and why
//
//   - Localhost: connecting to 127.0.0.1:hostPort or [::1]:hostPort from
//     the node doesn't reach the pod when the connection's source is
//     loopback too (from one of the node's own addresses, 127.0.0.1 is
//     mapped like any hostIP: upstream's HostPort conformance spec checks
//     exactly that). A DNATed packet from a loopback source
//     can't leave the node unless route_localnet is set on the way out (and
//     there is no IPv6 equivalent at all); route_localnet lets neighbours
//     reach the node's localhost-only services (CVE-2020-8558), and
//     kube-proxy's nftables mode dropped localhost NodePorts for the same
//     reason. The output chain leaves loopback destinations alone, so a
//     node process listening on that port keeps working.
//   - Filtering: the node must forward to the pods (net.ipv4.ip_forward,
//     net.ipv6.conf.all.forwarding, and no filter forward chain that drops
//     pod traffic); the node network sets that up, not this package.
//   - Windows: HNS endpoint policies do hostPorts there; the Wiring exists
//     on Linux only (nftables, and knftables v0.0.22, which imports
//     github.com/google/nftables, are Linux-only).
package hostport
