// Package nodecidr hands each Node a pod CIDR when nothing else does: the
// agent-side replacement for kube-controller-manager's Node IPAM
// (--allocate-node-cidrs), for clusters that run without it.
//
// One agent at a time allocates: every agent runs an Allocator, which
// takes part in a client-go leader election on the coordination.k8s.io
// Lease LeaseName in the agent's namespace; only the leader writes. It sets
// spec.podCIDRs (and spec.podCIDR) on each Node that has none: one subnet
// of each cluster CIDR (dual-stack: one per family) at the configured
// prefix length, the lowest one that no Node holds.
//
// The Nodes are the only record. A new leader lists every Node before it
// hands anything out; a write carries the Node's resourceVersion, so a
// Node changed meanwhile (another allocator got there first) is read again
// instead of being given a second subnet; and spec.podCIDRs can be set
// only once, which the API server enforces. The lease is not released on
// shutdown, so a new leader starts only after the old one's lease ran out
// and its last writes have landed.
//
// When a cluster CIDR is full the Node gets a Warning Event (reason
// CIDRNotAvailable, as kube-controller-manager records) and the condition
// ConditionType set to True; assigning a subnet later sets it False. A
// Node deletion frees its subnets and retries every Node still waiting.
package nodecidr
