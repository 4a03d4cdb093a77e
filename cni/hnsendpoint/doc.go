// Package hnsendpoint is the Windows pod wiring: it implements cni.Wiring
// with one local HNS endpoint per pod interface, attached to the pod's HCN
// namespace (CNI_NETNS carries the namespace GUID under containerd). It
// uses only hns.Interface, so it compiles everywhere and is tested on Linux
// against hns.Simulator.
//
// # Endpoint
//
// Name: EndpointName, "nodenet-pod:<containerID>:<ifname>". IP
// configurations: the pod's addresses with their CIDR prefix lengths.
// Routes: a default route per address family via the address's gateway.
// MAC: DefaultMACPrefix ("0E-2A") followed by the four bytes of the pod's
// IPv4 address, win-overlay's convention (containernetworking/plugins
// v1.9.1 plugins/main/windows/win-overlay: endpointMacPrefix, default
// "0E-2A", then "%02x" of each IPv4 byte); used in both modes so a pod's
// MAC is stable across retries. An IPv6-only pod gets an HNS-assigned MAC.
// DNS: the runtime's (the dns capability) when it sent any, else the node
// network's.
//
// # Policies
//
// Derived only from cni.NodeNetwork and the pod; nothing is hard-coded.
//
//	both modes  OutBoundNAT  Exceptions = ClusterCIDRs + ServiceCIDRs + NodeSubnets
//	both modes  SDNRoute     DestinationPrefix = each service CIDR, NeedEncap
//	overlay     ProviderAddress = the node's IPv4 address
//	l2bridge    SDNRoute     DestinationPrefix = each node IP as /32 (/128), NeedEncap
//	EnableDSR   OutBoundNAT  Destinations = the pod's own IPs ("loopbackDSR")
//	hostPorts   PortMapping  InternalPort, ExternalPort, Protocol 6|17, VIP = HostIP
//
// Sources:
//   - overlay: kubernetes-sigs/sig-windows-tools
//     hostprocess/flannel/flanneld/flannel-overlay.yml and start.ps1 fill
//     OutBoundNAT Exceptions with the service and pod subnets, an SDNROUTE
//     for the service subnet with NeedEncap, and a ProviderAddress with the
//     management IP; win-overlay itself adds that ProviderAddress
//     (ApplyDefaultPAPolicy(hnsNetwork.ManagementIP)) and its sample-v2.conf
//     has the same three policies; microsoft/SDN
//     Kubernetes/flannel/overlay/cni/config/cni.conf has the OutBoundNAT and
//     service ROUTE with NeedEncap.
//   - l2bridge: win-bridge's sample-v2.conf (plugins v1.9.1) and microsoft/SDN
//     Kubernetes/flannel/l2bridge/cni/config/cni.conf: OutBoundNAT
//     exceptions for the cluster CIDR, service CIDR and node subnet, an
//     SDNRoute with NeedEncap for the service CIDR and another for the node
//     IP as /32, and loopbackDSR.
//   - loopback DSR: pkg/hns ApplyLoopbackDSRPolicy (plugins v1.9.1), an
//     OutBoundNAT policy with Settings.Destinations = [pod IP], added only
//     when HNS supports DSR. Here a host without DSR fails the ADD with a
//     clear error instead of silently dropping the policy.
//   - port mappings: pkg/hns ApplyPortMappingPolicy (v2 schema):
//     PortMapping {InternalPort: containerPort, ExternalPort: hostPort,
//     Protocol: the protocol number, VIP: hostIP}. SCTP is refused: HNS
//     has no SCTP. A hostIP of 0.0.0.0 or :: means every node address and
//     is sent as no VIP.
//
// Check and Add's reuse decision compare only the policy types above
// (OutBoundNAT, SDNRoute, ProviderAddress, PortMapping), order-insensitive:
// policies of other types on the endpoint (a network policy agent's ACLs)
// are not drift.
package hnsendpoint
