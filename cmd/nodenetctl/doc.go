// Command nodenetctl is the operator's CLI for nodenet.
//
// Today it checks and converts configs:
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
// Exit status: 0 when the config is valid, 1 when it has errors or can't be
// read, 2 on a usage error. The logic lives in agent/config; this command
// only parses flags and prints.
package main
