// Package netnode builds multi-node network test environments on one Linux
// machine: an underlay L2 segment, a network namespace per "node" attached
// to it, and pods in those nodes wired through the real CNI path. The e2e
// tests of the node network and of the service proxy share it.
//
// Layout of one environment (Env), for slot k (see below):
//
//	root netns      nnu<k>   192.168.(77+k).1/24  veth into the underlay;
//	                                             bind the apiserver here
//	nnu<k>-underlay br0      bridge joining every node's eth0 and nnu<k>
//	nnu<k>-<node>   eth0     192.168.(77+k).(11+i)/24 for the i-th node
//	                         (.11, .12, ...); ip_forward=1, IPv6 off
//	nnu<k>-<node>-<pod>      a pod's netns (named, so `ip netns exec` works)
//
// The underlay bridge lives in its own namespace so the host's firewall
// (FORWARD policies, br_netfilter) never sees node-to-node traffic; only
// traffic to the host address crosses into the root namespace.
//
// Slots make environments safe to run in parallel, also from different
// test binaries: New takes an exclusive flock on /run/nodenet-netnode/slot-k
// for the first free k (0..31), and every name and the subnet derive from k.
// A slot's lock dies with its process, so New first removes whatever a
// crashed earlier holder of the slot left behind. A slot whose subnet the
// host already routes is skipped.
//
// Everything New and the helpers create is removed with t.Cleanup. The
// package needs root (internal/testroot.Require is called for you). It
// takes a TB, which *testing.T satisfies and a program can implement
// (test/cluster's RunProgram), so demos build the same environments;
// CleanStale removes what a killed process left in the slots.
package netnode
