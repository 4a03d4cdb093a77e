package config

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// API identity of the one config.
const (
	// GroupName is the API group of AgentConfiguration.
	GroupName = "nodenet.io"
	// APIVersion is the only apiVersion this package reads and writes.
	APIVersion = GroupName + "/v1alpha1"
	// Kind is the kind of the one config.
	Kind = "AgentConfiguration"
)

// AgentConfiguration is the one config of nodenet-agent: the node network,
// the CNI server and the service proxy all take their facts from it, so they
// cannot disagree.
//
// It is shaped like KEP-784's kube-proxy v1alpha2: settings that must be the
// same on every node (cluster-wide) sit beside the few that describe this
// node (node-local), and platform specifics live in the windows and linux
// sections. Each field's comment says which kind it is. A config shared by
// many nodes (a ConfigMap) should leave node-local fields unset so that each
// node defaults its own.
type AgentConfiguration struct {
	// TypeMeta holds apiVersion nodenet.io/v1alpha1 and kind
	// AgentConfiguration; SetDefaults and Marshal fill them in.
	metav1.TypeMeta `json:",inline"`

	// ClusterCIDRs are the pod CIDRs of the whole cluster (kube-controller-
	// manager's --cluster-cidr), at most one per IP family, IPv4 first by
	// convention: e.g. [10.244.0.0/16]. Required; no default. Cluster-wide.
	ClusterCIDRs []string `json:"clusterCIDRs,omitempty"`
	// ServiceCIDRs are the cluster's service CIDRs (kube-apiserver's
	// --service-cluster-ip-range), at most one per IP family: e.g.
	// [10.96.0.0/12]. Required; no default (kube-proxy and flannel configs
	// don't carry them). Must not overlap ClusterCIDRs. Cluster-wide.
	ServiceCIDRs []string `json:"serviceCIDRs,omitempty"`
	// NodeName is the name of this node's Node object. Default: the
	// NODE_NAME environment variable, else the lowercased hostname.
	// Node-local: leave it unset in a shared config.
	NodeName string `json:"nodeName,omitempty"`
	// NodeIPOverride replaces the node IPs read from the Node object's
	// status, at most one per IP family. Default: none (use the Node's
	// addresses). Node-local.
	NodeIPOverride []string `json:"nodeIPOverride,omitempty"`
	// IPFamilyPolicy says which IP families this node runs: SingleStack (the
	// family of the first cluster CIDR), PreferDualStack (every family in
	// ClusterCIDRs) or RequireDualStack (both families; an error when the
	// CIDRs or the network mode can't provide them). Default: SingleStack.
	// Overlay networks are IPv4 only whatever this says (KEP-5100); see
	// EffectiveIPFamilies. Cluster-wide.
	IPFamilyPolicy IPFamilyPolicy `json:"ipFamilyPolicy,omitempty"`
	// SyncPeriod is how often the proxy re-syncs its whole state even when
	// nothing changed. Must be greater than 0. Default: 30s. Cluster-wide.
	SyncPeriod metav1.Duration `json:"syncPeriod"`
	// MinSyncPeriod is the least time between two proxy syncs; changes that
	// arrive sooner are batched. 0 means every change syncs at once. Must not
	// exceed SyncPeriod. Default: 1s. Cluster-wide.
	MinSyncPeriod *metav1.Duration `json:"minSyncPeriod,omitempty"`
	// ConfigHardFail decides what the agent does when this config has
	// errors: true exits, false logs them and runs with what it could read.
	// This package only reports; the decision is the agent's. Default: true.
	// Cluster-wide.
	ConfigHardFail *bool `json:"configHardFail,omitempty"`
	// FeatureGates switches features by name. Known gates: WinDSR and
	// WinOverlay; both are on unless set to false here. An unknown name is an
	// error. Default: empty. Cluster-wide.
	FeatureGates map[string]bool `json:"featureGates,omitempty"`

	// Network is the node network: its mode, name and encapsulation.
	Network NetworkConfiguration `json:"network"`
	// Proxy holds the service proxy's settings.
	Proxy ProxyConfiguration `json:"proxy"`
	// CNI holds where the CNI server listens and where its files go.
	CNI CNIConfiguration `json:"cni"`
	// Windows holds settings that only Windows nodes (or the HNS simulator)
	// use.
	Windows WindowsConfiguration `json:"windows"`
	// Linux holds settings that only Linux nodes use.
	Linux LinuxConfiguration `json:"linux"`
}

// IPFamilyPolicy says which IP families a node runs.
type IPFamilyPolicy string

// Supported IP family policies.
const (
	IPFamilyPolicySingleStack      IPFamilyPolicy = "SingleStack"
	IPFamilyPolicyPreferDualStack  IPFamilyPolicy = "PreferDualStack"
	IPFamilyPolicyRequireDualStack IPFamilyPolicy = "RequireDualStack"
)

// IPFamily is an IP address family. Its values match k8s.io/api/core/v1's
// IPFamily so consumers can convert directly.
type IPFamily string

// IP families.
const (
	IPv4 IPFamily = "IPv4"
	IPv6 IPFamily = "IPv6"
)

// Feature gate names.
const (
	// FeatureWinDSR gates direct server return on Windows load balancers.
	FeatureWinDSR = "WinDSR"
	// FeatureWinOverlay gates overlay (VXLAN) networks on Windows.
	FeatureWinOverlay = "WinOverlay"
)

// KnownFeatureGates returns the names FeatureGates accepts, sorted.
func KnownFeatureGates() []string {
	return []string{FeatureWinDSR, FeatureWinOverlay}
}

// NetworkMode is how pods on different nodes reach each other.
type NetworkMode string

// Supported network modes.
const (
	// NetworkModeOverlay encapsulates pod traffic in VXLAN: an HNS Overlay
	// network on Windows, a vxlan device plus a bridge on Linux.
	NetworkModeOverlay NetworkMode = "overlay"
	// NetworkModeL2Bridge routes pod traffic natively between nodes on one
	// L2 segment: an HNS L2Bridge network on Windows, a bridge plus routes on
	// Linux.
	NetworkModeL2Bridge NetworkMode = "l2bridge"
)

// SourceVIPAuto is the NetworkConfiguration.SourceVIP value that picks the
// address at SourceVIPOffset in this node's IPv4 pod CIDR.
const SourceVIPAuto = "auto"

// Reserved offsets in each node's pod CIDR. IPAM must not hand them out.
const (
	// GatewayOffset is the pods' gateway: HNS's network gateway on Windows,
	// the bridge address on Linux (e.g. 10.244.1.1 in 10.244.1.0/24).
	GatewayOffset = 1
	// SourceVIPOffset is where SourceVIPAuto puts the source VIP
	// (e.g. 10.244.1.2 in 10.244.1.0/24): the address the Windows startup
	// scripts used to reserve with host-local IPAM for kube-proxy's sourceVip.
	SourceVIPOffset = 2
)

// NetworkConfiguration describes the node network. Every node of a cluster
// must use the same mode, name, VXLAN settings and MTU rules.
type NetworkConfiguration struct {
	// Mode is overlay (VXLAN) or l2bridge. Default: overlay. Cluster-wide.
	Mode NetworkMode `json:"mode,omitempty"`
	// Name is the HNS network's name on Windows (what kube-proxy's
	// KUBE_NETWORK held) and, on Linux, the node bridge's device name and the
	// base of the other device names; so it is 1-15 characters of letters,
	// digits, '.', '-' and '_', starting with a letter or digit.
	// Default: "nodenet". Cluster-wide.
	Name string `json:"name,omitempty"`
	// VXLAN holds the encapsulation settings of overlay mode. Defaulted only
	// in overlay mode; in l2bridge mode it is ignored (with a warning when
	// set). Cluster-wide.
	VXLAN *VXLANConfiguration `json:"vxlan,omitempty"`
	// MTU is the pods' interface MTU. 0 derives it from the uplink: the
	// uplink's MTU in l2bridge mode, minus the 50-byte VXLAN header in
	// overlay mode. Otherwise MinMTU..MaxMTU, and at least 1280 when IPv6
	// runs. Default: 0. Cluster-wide.
	MTU int32 `json:"mtu"`
	// SourceVIP is the address of the source VIP endpoint that overlay mode
	// SNATs service traffic to (kube-proxy's winkernel.sourceVip): "auto"
	// (the SourceVIPOffset address of this node's IPv4 pod CIDR) or an
	// explicit IPv4 address, which must lie in this node's pod CIDR (checked
	// by ValidateForNode once the pod CIDR is known). Ignored in l2bridge
	// mode. Default: "auto". "auto" is cluster-wide; an explicit address is
	// node-local.
	SourceVIP string `json:"sourceVIP,omitempty"`
	// ExternalInterface names the uplink adapter the network attaches to.
	// Default: empty, meaning the adapter that holds the node IP. Node-local.
	ExternalInterface string `json:"externalInterface,omitempty"`
	// AllowRecreate lets the agent delete and recreate an existing network
	// of this name whose settings differ from this config. When false a
	// mismatch is reported and the agent does not touch the network (it may
	// carry running pods). Default: false. Node-local.
	AllowRecreate bool `json:"allowRecreate"`
	// PodCIDRAllocation says who sets each Node's spec.podCIDRs, which the
	// network waits for: "controller" (kube-controller-manager's Node IPAM,
	// --allocate-node-cidrs) or "agent" (one agent at a time, elected with
	// the Lease "nodenet-pod-cidr-allocator" in the agent's namespace, hands
	// each Node without pod CIDRs a free subnet of every ClusterCIDRs entry
	// at NodeCIDRMaskSizeIPv4/IPv6; for clusters without Node IPAM). A Node
	// it cannot serve gets the condition NodenetPodCIDRUnavailable=True and
	// a CIDRNotAvailable Event. With "agent" the agent's service account
	// also needs create, get and update on that Lease, and the right to
	// patch other Nodes' spec.podCIDRs and that condition (deploy/base's
	// rbac.yaml and node-policy.yaml grant exactly these); Node IPAM must be
	// off: two allocators would hand out the same subnets. Default:
	// "controller". Cluster-wide.
	PodCIDRAllocation PodCIDRAllocation `json:"podCIDRAllocation,omitempty"`
	// NodeCIDRMaskSizeIPv4 is the prefix length of each Node's IPv4 pod
	// CIDR when PodCIDRAllocation is "agent" (kube-controller-manager's
	// --node-cidr-mask-size-ipv4): at least the IPv4 cluster CIDR's prefix
	// length, at most 30. Default: 24 with "agent", else unset. Cluster-wide.
	NodeCIDRMaskSizeIPv4 *int32 `json:"nodeCIDRMaskSizeIPv4,omitempty"`
	// NodeCIDRMaskSizeIPv6 is the prefix length of each Node's IPv6 pod
	// CIDR when PodCIDRAllocation is "agent" (kube-controller-manager's
	// --node-cidr-mask-size-ipv6): at least the IPv6 cluster CIDR's prefix
	// length, at most 126. Default: 64 with "agent", else unset.
	// Cluster-wide.
	NodeCIDRMaskSizeIPv6 *int32 `json:"nodeCIDRMaskSizeIPv6,omitempty"`
}

// PodCIDRAllocation says who sets Node.spec.podCIDRs.
type PodCIDRAllocation string

// Supported pod CIDR allocators.
const (
	// PodCIDRAllocationController leaves it to kube-controller-manager.
	PodCIDRAllocationController PodCIDRAllocation = "controller"
	// PodCIDRAllocationAgent has the elected nodenet-agent set it.
	PodCIDRAllocationAgent PodCIDRAllocation = "agent"
)

// Bounds and defaults of the agent's pod CIDR allocation.
const (
	DefaultNodeCIDRMaskSizeIPv4 = 24
	DefaultNodeCIDRMaskSizeIPv6 = 64
	// MaxNodeCIDRMaskSizeIPv4 leaves a node room for its gateway, the
	// source VIP and a pod (GatewayOffset, SourceVIPOffset).
	MaxNodeCIDRMaskSizeIPv4 = 30
	MaxNodeCIDRMaskSizeIPv6 = 126
)

// VXLANConfiguration is the encapsulation of overlay mode.
type VXLANConfiguration struct {
	// VNI is the VXLAN network identifier: 1..16777215 on Linux, at least
	// 4096 on Windows (HNS reserves lower VNIs). Default: 4096. Cluster-wide.
	VNI int32 `json:"vni,omitempty"`
	// Port is the VXLAN UDP port, 1..65535; every node must use the same
	// one (flannel on Windows only allows 4789, the IANA port).
	// Default: 4789. Cluster-wide.
	Port int32 `json:"port,omitempty"`
}

// ProxyConfiguration holds the service proxy's settings.
type ProxyConfiguration struct {
	// EnableDSR programs load balancers with direct server return, so
	// replies skip the load-balancing node and client IPs are preserved
	// (KEP-5100). Windows only: an error on a Linux target, when the WinDSR
	// gate is false, or when the host's HNS lacks DSR. Default: false.
	// Cluster-wide.
	EnableDSR bool `json:"enableDSR"`
	// DetectLocal says how the proxy tells traffic from pods apart from
	// other traffic. Cluster-wide.
	DetectLocal DetectLocalConfiguration `json:"detectLocal"`
	// NodePortAddresses limits the node addresses NodePort services answer
	// on: each entry a CIDR or "primary" (the Node object's primary IP per
	// family). Default: ["primary"]. Cluster-wide.
	NodePortAddresses []string `json:"nodePortAddresses,omitempty"`
	// HealthzBindAddress is the IP:port of the proxy health server (kube-
	// proxy's /healthz and /livez). Port 0 disables it. Default:
	// "0.0.0.0:10256". Node-local.
	HealthzBindAddress string `json:"healthzBindAddress,omitempty"`
	// MetricsBindAddress is the IP:port of the Prometheus metrics server.
	// Port 0 disables it. Default: "127.0.0.1:10249". Node-local.
	MetricsBindAddress string `json:"metricsBindAddress,omitempty"`
}

// DetectLocalMode says how the proxy recognizes traffic from pods.
type DetectLocalMode string

// Supported local-traffic detection modes.
const (
	// DetectLocalClusterCIDR: traffic from DetectLocal.ClusterCIDRs is local.
	DetectLocalClusterCIDR DetectLocalMode = "ClusterCIDR"
	// DetectLocalNodeCIDR: traffic from this node's pod CIDRs is local.
	DetectLocalNodeCIDR DetectLocalMode = "NodeCIDR"
)

// DetectLocalConfiguration says how the proxy recognizes pod traffic.
type DetectLocalConfiguration struct {
	// Mode is ClusterCIDR or NodeCIDR. Default: ClusterCIDR. Cluster-wide.
	Mode DetectLocalMode `json:"mode,omitempty"`
	// ClusterCIDRs are the CIDRs ClusterCIDR mode treats as pod sources, at
	// most one per family. Default: the root ClusterCIDRs. Cluster-wide.
	ClusterCIDRs []string `json:"clusterCIDRs,omitempty"`
}

// CNIConfiguration says where the agent's CNI server listens and where the
// CNI files go. Every default depends on the target OS (see LoadOptions.OS),
// so a shared config leaves these unset.
type CNIConfiguration struct {
	// SocketPath is the unix socket the CNI server listens on and the
	// nodenet-cni binary dials; shorter than 108 bytes (sun_path).
	// Default: /var/run/nodenet/cni.sock on Linux,
	// C:\ProgramData\nodenet\cni.sock on Windows. Node-local.
	SocketPath string `json:"socketPath,omitempty"`
	// ConfDir is where the conflist is written for the container runtime.
	// Default: /etc/cni/net.d on Linux, C:\etc\cni\net.d on Windows.
	// Node-local.
	ConfDir string `json:"confDir,omitempty"`
	// ConflistName is the conflist's file name in ConfDir; it must end in
	// ".conflist". Default: "10-nodenet.conflist". Node-local.
	ConflistName string `json:"conflistName,omitempty"`
	// BinDir is where the nodenet-cni binary is installed. Default:
	// /opt/cni/bin on Linux, C:\opt\cni\bin on Windows. Node-local.
	BinDir string `json:"binDir,omitempty"`
	// DataDir holds the IPAM store and other agent state. Default:
	// /var/lib/nodenet on Linux, C:\ProgramData\nodenet on Windows.
	// Node-local.
	DataDir string `json:"dataDir,omitempty"`
	// RuntimeEndpoint is the container runtime's CRI endpoint, the one
	// kubelet's containerRuntimeEndpoint names: the agent lists the pod
	// sandboxes there to find addresses no sandbox holds any more (see
	// OrphanGracePeriod). "unix://" and an absolute socket path shorter
	// than 108 bytes, or on Windows "npipe://" and a named pipe
	// ("npipe:////./pipe/<name>"). The agent needs access to it: the Linux
	// DaemonSet mounts /run/containerd. Default: containerd's,
	// unix:///run/containerd/containerd.sock on Linux,
	// npipe:////./pipe/containerd-containerd on Windows. Node-local.
	RuntimeEndpoint string `json:"runtimeEndpoint,omitempty"`
	// OrphanGracePeriod is how old an address allocation must be before
	// the agent releases it for belonging to no pod sandbox the runtime at
	// RuntimeEndpoint lists (in any state). Releasing undoes everything
	// the pod's CNI ADD did, as a DEL would: its interface, its hostPort
	// mappings and its addresses. Such allocations are left when the
	// agent dies during an ADD and the runtime never sends the DEL (or CNI
	// GC) for that sandbox; an allocation that names no owner (the agent
	// was killed while writing it) is removed after the period too. The
	// period covers an ADD still in flight: a sandbox is listed only once
	// the runtime has started it, after its ADD returned (requests the
	// agent is serving are never touched). The agent checks every
	// OrphanGracePeriod/4, at most every minute; when the runtime can't
	// be reached or fails, nothing is released. 0 turns this off (when
	// something other than the runtime at RuntimeEndpoint also adds pods
	// to this network). Default: 5m. Cluster-wide.
	OrphanGracePeriod *metav1.Duration `json:"orphanGracePeriod,omitempty"`
}

// WindowsConfiguration holds settings only Windows nodes, or the HNS
// simulator standing in for one, use.
type WindowsConfiguration struct {
	// RunAsService makes the agent talk to the Windows service control
	// manager. Default: false. Node-local.
	RunAsService bool `json:"runAsService"`
	// HNSVersion overrides the HNS version ("major.minor", e.g. "15.4")
	// the simulator reports, to see what a config would do on that Windows
	// build; the real HNS client ignores it. Default: empty (the
	// simulator's own). Node-local.
	HNSVersion string `json:"hnsVersion,omitempty"`
	// MaxBackendsPerLoadBalancer overrides the most backends nodenet puts
	// in one HNS load balancer. Unset, it follows the host: HNS rejects
	// more than 64 on Windows Server 2019 builds before 17763.2746 and
	// more than 1024 from that build on and on every later release
	// ("invalid number of destinations", kubernetes issue 98680), and the
	// agent reads the host's build. A service with more ready endpoints is
	// programmed with this many and reported (an Event and a metric). Set
	// it only to stay below the host's limit; 0 to 1024. Default: 0 (the
	// host's limit). Cluster-wide.
	MaxBackendsPerLoadBalancer int32 `json:"maxBackendsPerLoadBalancer,omitempty"`
}

// LinuxConfiguration holds settings only Linux nodes use.
type LinuxConfiguration struct {
	// MasqueradeAll SNATs all traffic sent to service IPs, not only traffic
	// from outside the cluster. Default: false. Cluster-wide.
	MasqueradeAll bool `json:"masqueradeAll"`
	// MasqueradePodEgress SNATs traffic from this node's pods to
	// destinations outside every cluster CIDR to the node's address, like
	// flannel's --ip-masq. Turn off when the underlay routes pod CIDRs.
	// Traffic between pods keeps its source either way. Windows nodes
	// ignore it: their pods get outbound NAT from HNS endpoint policies, so
	// one config serves both. Default: true. Cluster-wide.
	MasqueradePodEgress *bool `json:"masqueradePodEgress,omitempty"`
	// Conntrack holds the conntrack sysctls the agent sets, like
	// kube-proxy's. Node-local.
	Conntrack ConntrackConfiguration `json:"conntrack"`
}

// ConntrackConfiguration holds conntrack table settings, like kube-proxy's.
// A nil field leaves the kernel's value alone. All of them are node-local
// (they size and tune this node's kernel table).
type ConntrackConfiguration struct {
	// MaxPerCore is the most tracked connections per CPU core; 0 leaves the
	// limit as is and ignores Min. Default: 32768.
	MaxPerCore *int32 `json:"maxPerCore,omitempty"`
	// Min is the least conntrack table size, whatever MaxPerCore gives.
	// Default: 131072.
	Min *int32 `json:"min,omitempty"`
	// TCPEstablishedTimeout is how long an idle established TCP entry lives.
	// Default: 24h.
	TCPEstablishedTimeout *metav1.Duration `json:"tcpEstablishedTimeout,omitempty"`
	// TCPCloseWaitTimeout is how long an idle CLOSE_WAIT entry lives.
	// Default: 1h.
	TCPCloseWaitTimeout *metav1.Duration `json:"tcpCloseWaitTimeout,omitempty"`
	// UDPTimeout is how long an idle unreplied UDP entry lives.
	// Default: unset (the kernel's value stays).
	UDPTimeout *metav1.Duration `json:"udpTimeout,omitempty"`
	// UDPStreamTimeout is how long an idle assured UDP entry lives.
	// Default: unset (the kernel's value stays).
	UDPStreamTimeout *metav1.Duration `json:"udpStreamTimeout,omitempty"`
}
