// Package deploy holds the manifests a cluster operator applies to run
// nodenet: kubectl apply -k deploy/ (see README.md here, and
// docs/migration.md for moving nodes off flannel + kube-proxy).
//
// There is no Go code here, only tests that keep the manifests honest.
// Every kustomization (deploy/, its parts, the migration overlay, any
// overlay under deploy/ or examples/) is rendered with kustomize's own
// library, sigs.k8s.io/kustomize/api/krusty, as kubectl does, and the
// tests check what it renders: every object decodes strictly into its
// Kubernetes type (every file too), the kustomizations reach every file,
// an overlay's images entry sets every container's image, the shared
// AgentConfiguration validates for Linux and Windows, the DaemonSets agree
// with the config (ports, paths, mounts, node name) and run no shell, the
// RBAC grants exactly what the agent uses, and a real kube-apiserver
// accepts every rendered object in a strict server-side apply dry run,
// stores them as applied and enforces the node policy.
package deploy
