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
// The service proxy without a cluster:
//
//	nodenetctl proxy render --config FILE --manifests DIR [--node NAME] [--node-ip IP] [-o nft|state]
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
// Exit status: 0 on success, 1 when a config has errors, the agent can't be
// reached or a doctor check fails, 2 on a usage error. The logic lives in
// the agent's packages; this command parses flags and prints.
package main
