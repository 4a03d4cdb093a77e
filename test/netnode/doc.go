// Package netnode builds multi-node network test environments on one Linux
// machine: an underlay L2 segment, a network namespace per "node" attached
// to it, and pods in those nodes wired through the real CNI path. It is
// the one harness of every test that needs namespaces: the e2e tests of
// the node network and of the service proxy, test/cluster and the demo,
// and the tests of cni and overlay/linuxnet.
//
// Layout of one environment (Env), for slot k (see below):
//
//	root netns      nnu<k>   192.168.(77+k).1/24  veth into the underlay;
//	                                             bind the apiserver here
//	nnu<k>-underlay br0      bridge joining every node's eth0 and nnu<k>
//	nnu<k>-<node>   eth0     192.168.(77+k).(11+i)/24 for the i-th node
//	                         (.11, .12, ...); ip_forward=1 (unless
//	                         Options.NoForwarding), IPv6 off (unless
//	                         Options.EnableIPv6)
//	nnu<k>-<node>-<pod>      a pod's netns (named, so `ip netns exec` works);
//	                         a hand-wired pod's host end is vp<N> in the node
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
// Pods get their network in one of two ways: through CNI (Runtime, with
// NodenetCNI for nodenet's own server, in this process or in a child
// process a test can kill), or wired by hand into a bridge (WirePod) for
// tests of the node network itself. Probes (Ping, NoPing, TCPExchange,
// AnswerUDP, Stream) and WatchNetlink check what the dataplane does.
//
// Processes a test runs in a node (nodenet-agent in test/cluster, the CNI
// server child, flanneld) start through StartProcess, so they die with the
// test binary.
//
// Everything New and the helpers create is removed with t.Cleanup. The
// package needs root (internal/testroot.Require is called for you). It
// takes a TB, which *testing.T satisfies and a program can implement
// (test/cluster's RunProgram), so demos build the same environments;
// CleanStale removes what a killed process left in the slots.
package netnode
