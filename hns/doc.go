// Package hns is nodenet's seam to the Windows Host Networking Service.
//
// Everything Windows in nodenet (the node network, pod endpoints, the
// service proxy's load balancers) goes through [Interface]. Its types are
// our own and mirror the HNS v2 JSON schema field for field, so that:
//
//   - every HNS user compiles and is tested on any OS (hcn's types are
//     Windows-only, which is why kube-proxy's winkernel tests only run on
//     Windows);
//   - the Windows client (client_windows.go; only this package's _windows
//     files import github.com/Microsoft/hnslib/hcn) is a thin JSON-level
//     translation, and takes feature support from hnslib's version ranges
//     (features_windows.go);
//   - the [Simulator] can hold the same objects HNS holds.
//
// Two implementations exist:
//
//   - the hcn client (build tag windows): [NewClient];
//   - [Simulator] (all platforms): an in-memory HNS that rejects what HNS
//     rejects, counts calls, injects faults and latency, simulates an HNS
//     service restart, dumps its state like `hnsdiag list ... -d`, and traces
//     packets through the programmed load balancers ([Simulator.Trace]).
//
// Contract shared by both implementations:
//   - methods are safe for concurrent use;
//   - errors are *[Error] values classified by [ErrorKind]; callers use the
//     predicates ([IsNotFound], [IsAlreadyExists], [IsPortAlreadyExists],
//     [IsNotSupported], [IsTransient], [IsInvalid], [IsInUse]) and never
//     string matching. A transient error never means "absent";
//   - returned objects are copies: mutating them does not change HNS;
//   - a context that is already done fails the call without reaching HNS.
package hns
