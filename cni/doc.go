// Package cni is nodenet's CNI: the thin plugin that container runtimes
// exec (cmd/nodenet-cni runs PluginMain), the agent-side server it forwards
// every request to over a unix socket, and the conflist the agent renders
// for the runtime.
//
// The split follows Antrea: the plugin parses nothing it doesn't have to,
// holds no state and maps transport failures to CNI error codes (agent not
// reachable → 11, try again later); the server owns IPAM (ipam) and the
// pod wiring (Wiring: cni/vethbridge on Linux, cni/hnsendpoint on
// Windows), serializes work per container ID and rolls back a failed ADD.
// SandboxReconciler releases, as a DEL would, the attachments that no pod
// sandbox of the container runtime holds (read over CRI by cni/cri) once
// they are older than a grace period: what an ADD cut short by an agent
// restart leaves, since the runtime then sends neither DEL nor GC.
//
// The plugin side lives in cni/plugin and the wire protocol in cni/api, so
// the binary a runtime starts for every pod links neither IPAM nor HNS nor
// the Kubernetes libraries (their init alone would double its start time).
// The protocol is one HTTP POST of an api.Request (JSON) to /v1/cni on the
// unix socket; the answer is an api.Response holding either the CNI result
// in the current spec version (the plugin converts it to the version the
// runtime asked for) or a CNI error. `curl --unix-socket` can talk to it.
package cni
