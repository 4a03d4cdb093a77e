// Package linuxnet is the Linux dataplane of overlay.Interface, built on
// netlink in the node's network namespace.
//
// It builds the data-plane shape of flannel's vxlan backend so real
// flanneld nodes and nodenet nodes reach each other's pods:
//
//   - a bridge named after the network (LocalSpec.Name) that pods attach
//     to, holding the pods' gateway addresses, its MAC pinned at creation
//     so it does not change as pod ports join and leave;
//   - in overlay mode a vxlan device "<name>.<VNI>" (the name part
//     truncated to fit IFNAMSIZ) on the uplink, learning off, holding
//     <pod CIDR network address>/32, routed (not a bridge port), and per
//     remote node an FDB entry VTEP MAC → node IP, a permanent neighbour
//     <its pod CIDR network address> → VTEP MAC and a route
//     <its pod CIDR> via <its pod CIDR network address> onlink;
//   - in l2bridge mode (host-gw) no vxlan device and per remote node a
//     route <its pod CIDR> via <its node IP> on the uplink.
//
// The VTEP MAC of a device linuxnet creates is derived from the node IP
// and the VNI (see VTEPMAC), so it survives agent restarts and reboots
// and the published flannel backend-data stays valid. An existing device
// keeps the MAC it has: changing it would cut the node off until every
// peer learned the new one.
//
// Ownership: routes linuxnet adds carry RouteProtocol, so a sync removes
// only its own stale routes (also those left by an earlier run) and never
// anyone else's. FDB and neighbour entries on the vxlan device are all
// linuxnet's.
//
// Every call reads the state it needs in bulk once and writes only the
// differences; a node that is already right gets zero netlink writes.
//
// The package is Linux only; elsewhere it is empty.
package linuxnet
