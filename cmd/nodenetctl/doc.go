// Command nodenetctl is the operator's CLI for nodenet.
//
// Configs (no agent needed):
//
//	nodenetctl config validate --config FILE [--os linux|windows] [--node-local]
//	nodenetctl config convert  --config FILE [--os linux|windows] [--node-local] [-o FILE]
//
// Both read an AgentConfiguration, a kube-proxy KubeProxyConfiguration or a
// flannel net-conf.json. validate prints every warning and every error with
// its field path; convert prints the config as an AgentConfiguration (on
// stdout, or written atomically to -o FILE), even when it still has errors
// to fix, such as the serviceCIDRs no kube-proxy or flannel config carries.
//
// What a node programs, without a cluster:
//
//	nodenetctl proxy render --config FILE --manifests DIR [--node NAME] [--node-ip IP] [--pod-cidr CIDR]
//	    [-o nft|state|hns|json] [--windows-server YEAR | --hns-version V]
//
// The folder stands in for the API server (Nodes, Pods, Services,
// EndpointSlices). nft and state render the Linux proxy (Linux builds
// only); hns and json run the agent's Windows parts on the HNS simulator
// of the version asked for (agent.RenderHNS). Bad manifests are errors
// naming file and object; the rest is rendered and the exit status is 1.
//
// The local agent, over its root-only socket (agent/status):
//
//	nodenetctl status | services | dump [hns|nft] [--socket PATH] [-o table|json|yaml]
//	nodenetctl doctor [--kubeconfig FILE]
//
// status shows the network, CNI and proxy with their readiness and sync
// ages; services the service ports programmed on this node with their
// backends; dump what the dataplane holds; doctor checks that the config,
// conflist, network, proxy and Node agree and says what to fix, and on
// Windows reports the HNS version and Windows build, which HNS features
// nodenet uses and which it does without (with the HNS versions that have
// them), and the backends per load balancer.
//
// Uninstalling, on a drained Linux node once the agent is gone:
//
//	nodenetctl cleanup [--config FILE] [--dry-run] [--force]
//
// cleanup removes what the agent and its DaemonSet left (the conflist,
// the plugin, the nftables tables inet nodenet, nodenet-hostport and
// nodenet-egress, the pods' host veths, the vxlan device and the bridge,
// routes of protocol 78, the sockets, the IPAM store), going by the
// agent's config, and prints each. It refuses while an agent answers on
// its socket, and while pods still hold addresses or veths unless
// --force; --dry-run changes nothing. Sysctls stay as they are. A second
// run finds nothing and exits 0.
//
// Exit status: 0 on success, 1 when a config has errors, the agent can't be
// reached, a doctor check fails or cleanup refuses or fails, 2 on a usage
// error. The logic lives in the agent's packages; this command parses
// flags and prints.
package main
