// Package agent is nodenet-agent: it wires the node network (overlay), the
// CNI server (cni) and the service proxy (proxy/proxier) into one process
// that shares one config and one set of facts.
//
// Startup order is what makes flannel + kube-proxy's ordering races
// impossible:
//
//  1. load and validate the config (configHardFail: exit naming the field,
//     touching nothing);
//     then find the API server without the kubernetes Service this agent
//     programs (agent/apiaddr: --apiserver or NODENET_APISERVER, the
//     kubelet's kubeconfig on the node, kube-proxy's ConfigMap, the
//     kubernetes EndpointSlice), unless --kubeconfig or offline files;
//  2. build the dataplanes (linux: netlink + veth/bridge + nftables; hns:
//     the host's HNS; sim: the HNS simulator);
//  3. serve CNI at once, answering "try again later" until the network
//     exists; serve /healthz, /livez, /readyz, /metrics and the local API
//     (agent/status) on a root-only unix socket;
//  4. run the overlay Controller: it waits for this Node's pod CIDR and
//     ensures the network and source VIP; when it is ready, Linux nodes
//     masquerade pod traffic leaving the cluster (overlay/egress, unless
//     linux.masqueradePodEgress is false; kept every sync period), then the
//     network is handed to the CNI server in memory and the conflist is
//     written (from the same config), and the CNI server's allocations
//     start being compared with the runtime's pod sandboxes
//     (cni.runtimeEndpoint; those no sandbox holds for
//     cni.orphanGracePeriod are released); with network.podCIDRAllocation:
//     agent, every agent also runs for the Lease nodenet-pod-cidr-allocator
//     in its namespace (POD_NAMESPACE, else the service account's, else
//     nodenet-system) and the leader sets Nodes' pod CIDRs (ipam/nodecidr);
//  5. then start the proxy once, with the network facts (node IPs, pod
//     CIDRs, network name, source VIP, DSR) handed over in memory.
//
// Shutdown stops serving and the controllers but leaves the dataplane as it
// is, so pods keep working while the agent restarts or upgrades; every part
// adopts what it finds, so a restart with nothing changed writes nothing.
package agent
