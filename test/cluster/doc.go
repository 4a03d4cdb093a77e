// Package cluster runs a nodenet cluster on one Linux machine, for e2e
// tests and the demo: node network namespaces on an underlay segment
// (test/netnode), a real kube-apiserver they reach (test/apiserver), a
// Node object per node, and one nodenet-agent process per node started
// inside its namespace with its own config, kubeconfig and files. Pods
// are wired through the real CNI path: the nodenet-cni binary, run by
// libcni inside the node, as the conflist the agent wrote says, against
// the agent's socket.
//
// Address plan (k is the netnode slot; see test/netnode):
//
//	underlay       192.168.(77+k).0/24; the host (root namespace, the
//	               "outside" of the cluster) .1, the apiserver listens
//	               there; the i-th node (from 0) .(11+i), its InternalIP
//	cluster CIDR   10.244.0.0/16; the i-th node's pod CIDR
//	               10.244.(i+1).0/24
//	service CIDR   10.96.0.0/12 (the apiserver allocates cluster IPs and
//	               node ports)
//
// Files: one private directory per cluster (Cluster.Dir, under
// os.TempDir, named nncl-*), holding the apiserver's files, the
// kubeconfig and per node (Node.Dir) agent.yaml, run/ (CNI and status
// sockets), net.d/ (the conflist the agent writes), bin/ (nodenet-cni),
// data/ and one log per agent run (agent-N.log).
//
// Everything takes a netnode.TB and is removed in its Cleanup: a test
// passes its *testing.T, a program uses RunProgram. Child processes get
// SIGKILL if this process dies without cleaning up (netnode.StartProcess
// sets Pdeathsig), and Clean removes what such a process left behind.
package cluster
