// Package ipam hands out pod addresses from this node's pod CIDRs
// (Node.spec.podCIDRs, one per IP family) and remembers them on disk.
//
// # Guarantees
//
//   - Never handed out: the network address, the IPv4 broadcast address, the
//     gateway (Range.Gateway, by default the address at
//     config.GatewayOffset) and every Range.Reserved address (the agent
//     reserves the overlay source VIP there).
//   - An attachment (container ID + interface name) holds at most one
//     address per range. Allocate is idempotent: a retried CNI ADD gets the
//     addresses it already holds. It is atomic across ranges: when one
//     family cannot be served, the addresses it just took in the others are
//     given back.
//   - Allocation is round-robin: each range continues after the address it
//     handed out last, so a released address is reused as late as possible
//     (a restarted pod rarely gets the IP a stale connection still targets).
//   - Safe for concurrent use by goroutines and by processes: every
//     operation holds an in-process mutex and the store's file lock (a flock
//     on Linux, LockFileEx on Windows). The file lock alone is not enough in
//     one process, because goroutines sharing its file descriptor do not
//     exclude each other.
//   - Nothing lives only in memory: every operation rereads the directory,
//     so an agent restart, a node reboot, or another process (host-local
//     itself) sharing the directory never causes a duplicate address.
//   - A full range fails with *ExhaustedError (see IsExhausted), which names
//     the CIDR.
//
// # On-disk format
//
// The store is the directory DataDir/Network, written by the host-local
// plugin's disk backend (containernetworking/plugins, used here as a
// library), so the layout is exactly host-local's:
//
//	DataDir/Network/
//	  lock                  the file lock; empty
//	  10.244.1.3            one file per allocated address, named by it;
//	  fd00:10:244:1::3      content "<containerID>\r\n<ifname>"
//	  last_reserved_ip.0    the last address handed out from range 0
//	  last_reserved_ip.1    ... and from range 1 (ranges are numbered by
//	                        their position in Options.Ranges)
//
// On Windows ':' is not allowed in file names, so an IPv6 address file is
// named with '_' instead (fd00_10_244_1__3), as host-local does there.
// Files written by host-local before it recorded the interface name hold
// only "<containerID>"; they belong to every interface of that container,
// as in host-local, and are listed with an empty IfName.
// Files whose name is not an address are ignored.
//
// # Migrating a node from host-local
//
// Nothing is converted: point the allocator at host-local's directory.
// Set DataDir to host-local's dataDir (default /var/lib/cni/networks, which
// is \var\lib\cni\networks on the system drive on Windows) and Network to the
// "name" of the CNI network whose ipam section used host-local (with
// flannel, the name in its cni-conf.json, e.g. "cbr0"). Running pods
// keep their addresses, their CNI DELs release them, and the reservation a
// startup script made for the source VIP stays held. List the ranges in the
// order host-local had them so round-robin continues where it stopped; in
// any other order the allocator just starts over at the beginning of each
// range once. Because both write the same files under the same lock, the
// migration can be rolled back: host-local sees nodenet's allocations too.
// Copying the files into a new directory instead would lose exactly that,
// which is why there is no import step.
package ipam
