// Package deploy holds the manifests a cluster operator applies to run
// nodenet: kubectl apply -k deploy/ (see README.md here, and
// docs/migration.md for moving nodes off flannel + kube-proxy).
//
// There is no Go code here, only tests that keep the manifests honest:
// every file decodes strictly into its Kubernetes type, the kustomizations
// reach every file, the shared AgentConfiguration validates for Linux and
// Windows, the DaemonSets agree with the config (ports, paths, node name),
// the ClusterRole grants exactly what the agent uses, and a real
// kube-apiserver accepts every object and enforces the node policy.
package deploy
