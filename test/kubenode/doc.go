// Package kubenode runs real Kubernetes nodes with nodenet on one Linux
// machine: a real kube-apiserver and etcd (test/apiserver),
// kube-controller-manager (Node IPAM, EndpointSlices, service accounts,
// garbage collection, ...), kube-scheduler, and per node a network
// namespace on the netnode underlay holding containerd 2.x + runc, a
// kubelet and nodenet-agent as the node's only CNI and only service proxy
// (no kube-proxy). It is what the smoke test in `make test` and `make
// conformance` (upstream e2e.test) run against.
//
// Address plan (k is the netnode slot; see test/netnode):
//
//	underlay       192.168.(77+k).0/24; the root namespace .1 runs the
//	               apiserver, controller-manager and scheduler; the i-th
//	               node (from 0) is .(11+i), kubelet's --node-ip
//	cluster CIDR   10.244.0.0/16, a /24 per node from Node IPAM
//	service CIDR   10.96.0.0/12; kubernetes Service 10.96.0.1
//
// Each node's processes run in its network namespace (entered with
// nsenter --net, so they share the host's mount namespace: kubelet's
// volume mounts must be visible to containerd and runc) and get their own
// files under the cluster's work dir (Cluster.Dir): containerd's root,
// state, socket and config; kubelet's root dir, config, pod logs and
// cgroup root (/nodenet-kubenode-<slot>-<node> in every cgroup v1
// hierarchy; the hierarchy itself is shared and never remounted);
// nodenet-agent's config, CNI socket, conf dir (the conflist the agent
// writes) and bin dir (nodenet-cni and the loopback plugin), as
// deploy/README.md documents for Linux. Every process logs to
// <name>.log in its node's dir (or the cluster dir).
//
// Binaries come from the environment, as the build scripts print them:
// hack/build-kube-binaries.sh (kube-apiserver, etcd),
// hack/build-node-binaries.sh (kubelet, kube-controller-manager,
// kube-scheduler, containerd, its shim, ctr, runc, crictl, the CNI
// plugins and the image archives). RequireBinaries skips a test when one
// is missing and fails it under CI=true.
//
// Cleanup, in t's Cleanup: kubelet stops, every pod sandbox is removed
// through CRI (CNI DEL reaches the agent), the agent and containerd stop,
// leftover shims and container processes are killed by PID, everything
// mounted under the work dir is unmounted, the cgroups are removed, and
// the work dir is deleted unless the test failed (then its logs stay).
package kubenode
