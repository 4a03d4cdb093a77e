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
//
// Wire protocol: one HTTP POST of a Request (JSON) to /v1/cni on the unix
// socket; the answer is a Response holding either the CNI result in the
// current spec version (the plugin converts it to the version the runtime
// asked for) or a CNI error. `curl --unix-socket` can talk to it.
package cni
