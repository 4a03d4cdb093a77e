// Package apiserver runs a real etcd and kube-apiserver for integration
// tests and local demos. Both listen on loopback unless
// Options.BindAddress puts the apiserver on another address (an underlay
// bridge that test nodes in other network namespaces reach).
//
// The binaries are built once by hack/build-kube-binaries.sh and found
// through NODENET_KUBE_APISERVER and NODENET_ETCD, else in the build cache
// (${NODENET_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/nodenet}); Options can
// name them explicitly.
//
// Contract:
//   - Start returns only once /readyz answers 200 and the "default"
//     namespace exists, so callers can create objects at once.
//   - Every server gets its own temp dir (etcd data, certs, keys, logs) and
//     random ports, so test packages may run servers in parallel.
//   - Clients authenticate with a random bearer token for user "admin" in
//     group system:masters; authorization is AlwaysAllow. Anonymous requests
//     are refused, /readyz included.
//   - The serving certificate is self-signed by the apiserver (--cert-dir);
//     RESTConfig and WriteKubeconfig carry its CA, so TLS is verified.
//   - Controllers are absent: no kube-controller-manager, no scheduler, no
//     endpoint reconciler. The ServiceAccount admission plugin is off so Pods
//     can be created without service accounts.
//   - Stop kills both processes and removes the temp dir; it is idempotent.
//     StartForTest registers Stop with t.Cleanup, skips the test when the
//     binaries are missing, and fails it instead when CI=true.
package apiserver
