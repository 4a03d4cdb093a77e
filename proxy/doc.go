// Package proxy is nodenet's service proxy brain (KEP-2104's "node-local
// brain"): it turns Services, EndpointSlices and this node's Node into the
// state this node needs, per service port and IP family, and hands a full
// snapshot plus the set of changed service ports to a Backend (nftables on
// Linux, HNS load balancers on Windows). Backends never read Kubernetes
// objects: every traffic-policy, topology, readiness and DSR rule is applied
// here, once, so the backends stay small and agree with each other.
//
// Subpackages: brain (objects → State), source (informers or a folder of
// manifests), diffstore (rebuild-then-diff for backends), runner (the
// bounded-frequency sync loop), metrics (kube-proxy's Prometheus metrics),
// healthcheck (/healthz, /livez and the per-service health-check node
// ports), and the backends (nftables, hns).
package proxy
