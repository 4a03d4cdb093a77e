// Package hnslb is the Windows service proxy backend: it implements
// proxy.Backend with HNS load balancers and remote endpoints, through
// hns.Interface only, so it compiles everywhere and is tested on Linux
// against hns.Simulator (kube-proxy winkernel's behavior is the
// reference; the facts below say where it comes from).
//
// # What it programs
//
// Per service port, one HNS load balancer per frontend, one port mapping
// each (protocol TCP or UDP; SCTP ports get a warning event and nothing
// else, HNS has no SCTP):
//
//	cluster IP       VIP = cluster IP, port → target port, no port flags
//	                 (kube-proxy sets no ILB flag: without VipExternalIP
//	                 the frontend is internal), DSR when Options.EnableDSR
//	node port        no VIP (every node address), LocalRoutedVIP |
//	                 VipExternalIP
//	external IP      VIP = the IP, VipExternalIP
//	ingress IP       VIP = the IP, VipExternalIP
//	health check     with Options.ForwardHealthCheckVIP, per ingress IP:
//	                 TCP health-check node port → the host's endpoint
//
// Backends are InternalEndpoints (cluster IP) and ExternalEndpoints (the
// others), already filtered by the brain (readiness, terminating
// fallback, traffic policies, topology, KEP-5100's DSR rules). A frontend
// with no backend gets no load balancer (kube-proxy's choice; HNS then
// routes the VIP like any address).
//
// DSR: the cluster-IP load balancers carry the DSR flag when EnableDSR
// is on, on every create and update. External frontends use DSR when
// externalTrafficPolicy is Local (all their backends are then local, so
// the reply passes this host's load balancer and the backend sees the
// client's address) on any host with DSR, as kube-proxy does; with eTP
// Cluster they never do, since a remote backend's reply would not pass
// this host. `preserve-destination: "true"` adds DSR, UseMux and
// PreserveDIP on the ingress load balancers and limits node-port and
// ingress backends to local ones. A host without DSR gets an event
// instead (the backend sees the node's address).
//
// Session affinity ClientIP is DistributionType SourceIP where HNS
// supports it (12.0 and newer); elsewhere an event and an Observe count
// (OpAffinityUnsupported), and the port is programmed without it. HNS
// load balancers have no affinity timeout: a timeoutSeconds other than
// the default (10800) gets the same event and count, saying it is not
// applied.
//
// loadBalancerSourceRanges are not enforced, on any HNS version: a port
// with ranges and load-balancer IPs gets a warning event
// (LoadBalancerSourceRangesUnsupported) and an Observe count
// (OpSourceRangesUnsupported), and is programmed as without them.
// kube-proxy winkernel ignores them too (kubernetes issues 107019,
// 120033). Why nothing here can enforce them:
//
//   - A load balancer has no source filter: hnslib's
//     HostComputeLoadBalancer and LoadBalancerPortMapping carry VIPs,
//     ports, flags and the distribution only.
//   - HNS's filter is the endpoint ACL policy (hcn.AclPolicySetting,
//     modelled in hns and honoured by its tracer), which sits on an
//     endpoint's switch port. Only local pods have one here; a remote
//     backend's packets leave this host unfiltered.
//   - An ACL on a backend pod filters what reaches the pod, whatever
//     frontend it came through: a rule keyed on the client's address
//     would also block that client on the cluster IP, the node port,
//     the pod IP and every other Service sharing the pod. Neither the
//     frontend VIP nor the port it was reached on is left to key on
//     after the load balancer's DNAT (only PreserveDIP keeps the VIP),
//     and without DSR the source is the source VIP, not the client.
//   - Any ACL turns the endpoint default-deny (microsoft/Windows-Containers
//     issue 616), so one range on one Service would need allow-all rules
//     that override the default of whoever else programs ACLs there
//     (Calico's network policy, Azure CNI).
//   - Whether HNS evaluates an endpoint's ACLs before or after the load
//     balancer's NAT is not documented; TierAcl (HNS ≥ 14.0) and
//     NetworkACL (≥ 15.0) exist in hnslib without a published meaning for
//     load-balanced traffic.
//
// So a range on one Service can never block another that shares a
// backend: nodenet writes no ACL at all. The event tells the operator to
// enforce the ranges where they are meant to be, at the cloud load
// balancer (or with network policy on the pods).
//
// Source VIP (the SNAT address of non-DSR traffic), per load balancer,
// KEP-5100: on overlay, this node's IP when a backend is (a) outside
// every cluster CIDR or (b) another node's address (hostNetwork pods);
// otherwise (c) the network's source VIP. On l2bridge, the node IP.
//
// Remote endpoints: every backend that is not a local pod is an HNS
// remote endpoint named RemoteEndpointName(ip), MAC 02-11-<address> as
// kube-proxy conjures it; on overlay with a ProviderAddress policy: the
// node whose pod CIDR holds the address, a remote node's own address for
// itself, else this node's IP (addresses outside the cluster leave
// through this node). On overlay each cluster IP also gets one (provider
// address this node, the host's MAC), as kube-proxy creates. A remote
// endpoint is shared by every load balancer using its address and
// deleted when the last one goes. An address inside this node's pod CIDR
// is never made a remote endpoint (it would shadow, and in HNS block, the
// local pod that owns it); one of ours found there is deleted first.
// This node's own address as a backend (a hostNetwork pod here) gets no
// remote endpoint: the load balancer sends it to the host's endpoint (the
// source-VIP endpoint on overlay, the host endpoint on l2bridge), which
// delivers to the node's own stack. A remote endpoint's provider address
// must be known: a pod address inside the cluster CIDRs whose node is not
// in the remote node table yet is left out of its load balancers (never
// tunneled to this node's own address) until the table has it; a change
// of the table forces a full sync. Local pods' endpoints
// are the ones CNI created, found by address in a listing of the network.
//
// Backend limit: at most Options.MaxBackendsPerLoadBalancer (the host's:
// 64 before Windows Server 2019 build 17763.2746, 1024 from it on; HNS
// refuses more with E_INVALIDARG, kubernetes issue 98680) per load
// balancer, ready ones first, then local
// ones, then by address; the cut is reported as a warning event on the
// Service, a log line and an Observe count (OpBackendLimit) rather than
// left to fail in HNS. HNS load balancers have one target port: endpoints
// with another port than the preferred one's are left out, likewise
// reported.
//
// # Syncs and the DiffStore
//
// The desired load balancers, keyed by frontend and owned by service
// port, live in a diffstore.Store. A partial sync re-plans only the
// changed ports and writes exactly what the store's Diff says: an
// endpoint change is one UpdateLoadBalancer per affected frontend where
// HNS supports in-place updates (Features().ModifyLoadbalancer), a delete
// and a create elsewhere, and no listing of HNS unless a pod that is new
// since the last listing must be found. Remote endpoints are created
// when their use count leaves zero and deleted when it returns to it.
//
// A full sync (the first, the periodic one, every one after a failure or
// after the network facts changed) reads HNS with three calls (the
// network, its endpoints, all load balancers), compares everything with
// the desired state and writes only the differences: on a node that is
// already right, zero writes. This is the adoption on start and the
// periodic self-healing alike: a load balancer or remote endpoint
// deleted out of band is back after one full sync.
//
// # What is ours
//
// Load balancers: those whose frontend is a node port (no VIP), a node
// address, inside Options.ServiceCIDRs, any cluster, external or ingress
// IP of a current service, or that use one of our remote endpoints; and
// those this process created. Only these are ever updated or deleted;
// others are left alone (a frontend a service wants that someone else's
// load balancer holds is taken over). Endpoints: remote endpoints whose
// name starts with RemoteEndpointPrefix. Local endpoints (CNI's, the
// source VIP's) are never written; someone else's remote endpoint for an
// address we need is used as it is.
//
// # Errors
//
// Every HNS error fails the sync after the rest of the round was tried
// (a run of maxConsecutiveErrors failures ends it early: HNS is likely
// restarting), the DiffStore round is aborted, and the runner retries
// with a full sync. A failed read is never taken to mean "absent".
// While HNS restarts every call fails transiently (kubernetes issue
// 139519): nothing is concluded from it, a failed feature probe is not
// kept, and the next full sync adopts the load balancers HNS restored.
// "Already exists" or "port already exists" on a create is answered by a
// lookup in the same round: the holder is adopted (and corrected) when it
// has our shape, deleted otherwise, and the create tried once more. An
// in-place update that HNS refuses as not supported, or answers with the
// old definition (HNS 15.4, kubernetes issue 131466), switches the
// backend to delete and create. A new HNS network ID (the network was re-created, e.g. after
// an HNS restart with a non-persistent network) starts from nothing.
package hnslb
