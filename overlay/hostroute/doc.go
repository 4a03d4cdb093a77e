// Package hostroute reads and writes the host's IP routes on Windows,
// where the l2bridge network reaches other nodes' pod subnets through
// plain host routes (flannel host-gw does the same with its
// routing.RouterWindows), not HNS policies.
//
// Interface is the seam: the iphlpapi implementation (New, Windows only:
// GetIpForwardTable2, CreateIpForwardEntry2, DeleteIpForwardEntry2,
// FreeMibTable) and NewFake, a stateful in-memory route table that rejects
// what Windows rejects, for tests on any OS.
//
// A route is identified the way Windows identifies it: destination prefix,
// next hop and interface. The metric is an attribute, not part of the key.
package hostroute
