// Package status is the agent's local API: what nodenetctl reads from a
// running agent over a root-only unix socket (HTTP), as JSON. The agent
// serves it (package agent); nodenetctl is its client (Client here).
// Everything in it describes this node only.
package status

import (
	"time"
)

// SocketName is the local API socket's file name, in the directory of the
// CNI socket (config cni.socketPath): /var/run/nodenet/agent.sock on Linux.
const SocketName = "agent.sock"

// Paths the agent serves on the socket (GET).
const (
	// PathStatus returns a Status.
	PathStatus = "/v1/status"
	// PathServices returns a Services: what the proxy programmed.
	PathServices = "/v1/services"
	// PathDump returns a Dump: what the dataplane holds, readable.
	PathDump = "/v1/dump"
)

// Status is the agent's view of this node.
type Status struct {
	NodeName string `json:"nodeName"`
	// Dataplane is the --dataplane value: linux, hns or sim.
	Dataplane string `json:"dataplane"`
	// Version is the agent's build version.
	Version   string        `json:"version"`
	StartedAt time.Time     `json:"startedAt"`
	Network   NetworkStatus `json:"network"`
	CNI       CNIStatus     `json:"cni"`
	Proxy     ProxyStatus   `json:"proxy"`
	// HNS is the host's HNS: set on the hns and sim dataplanes.
	HNS *HNSStatus `json:"hns,omitempty"`
}

// HNSStatus is the host's HNS and what nodenet uses of it.
type HNSStatus struct {
	// Simulated is true on --dataplane=sim.
	Simulated bool `json:"simulated,omitempty"`
	// Version is the HNS version ("15.5"); empty when it could not be
	// read, with Error saying why (HNS restarting, say).
	Version string `json:"version,omitempty"`
	Error   string `json:"error,omitempty"`
	// WindowsBuild is the host's build ("17763.2746").
	WindowsBuild string `json:"windowsBuild,omitempty"`
	// Features are the HNS features nodenet decides on, each with the
	// HNS versions that have it.
	Features []HNSFeature `json:"features,omitempty"`
	// HostMaxBackendsPerLoadBalancer is what the host's build takes;
	// MaxBackendsPerLoadBalancer what the proxy applies (the config's
	// windows.maxBackendsPerLoadBalancer when set, else the host's).
	HostMaxBackendsPerLoadBalancer int `json:"hostMaxBackendsPerLoadBalancer,omitempty"`
	MaxBackendsPerLoadBalancer     int `json:"maxBackendsPerLoadBalancer,omitempty"`
}

// HNSFeature is one HNS feature on this host.
type HNSFeature struct {
	// Name is the hns.Feature ("ModifyLoadbalancer").
	Name      string `json:"name"`
	Supported bool   `json:"supported"`
	// Versions are the HNS versions that have it ("9.3–9.x or ≥ 10.2").
	Versions string `json:"versions"`
}

// NetworkStatus is the node network part.
type NetworkStatus struct {
	// Mode is overlay or l2bridge; Name the network's name; ID its
	// dataplane ID (HNS network ID, or the Linux bridge name).
	Mode string `json:"mode"`
	Name string `json:"name"`
	ID   string `json:"id,omitempty"`
	// VNI and Port are the VXLAN settings (overlay only).
	VNI       int      `json:"vni,omitempty"`
	Port      int      `json:"port,omitempty"`
	PodCIDRs  []string `json:"podCIDRs,omitempty"`
	NodeIP    string   `json:"nodeIP,omitempty"`
	SourceVIP string   `json:"sourceVIP,omitempty"`
	// Ready is false until the network exists; Reason and Message then
	// say why (the Node condition's reason and message).
	Ready   bool   `json:"ready"`
	Reason  string `json:"reason,omitempty"`
	Message string `json:"message,omitempty"`
	// RemoteNodes counts the other nodes routed to.
	RemoteNodes int `json:"remoteNodes"`
}

// CNIStatus is the CNI server.
type CNIStatus struct {
	SocketPath   string `json:"socketPath"`
	ConflistPath string `json:"conflistPath"`
	// Ready is true once the server wires pods (the network exists).
	Ready bool `json:"ready"`
	// OrphanRelease is the release of addresses no pod sandbox holds
	// (config cni.orphanGracePeriod); nil when it is off.
	OrphanRelease *OrphanReleaseStatus `json:"orphanRelease,omitempty"`
}

// OrphanReleaseStatus says how the agent compares its address allocations
// with the container runtime's pod sandboxes and what it released.
type OrphanReleaseStatus struct {
	// RuntimeEndpoint is the CRI endpoint the sandboxes are read from.
	RuntimeEndpoint string `json:"runtimeEndpoint"`
	// GracePeriod and Interval are Go durations ("5m0s", "1m0s").
	GracePeriod string `json:"gracePeriod"`
	Interval    string `json:"interval"`
	// LastRun is when the last comparison ended (zero before the first);
	// LastError why it released nothing, empty when it worked.
	LastRun   time.Time `json:"lastRun,omitzero"`
	LastError string    `json:"lastError,omitempty"`
	// Sandboxes is how many sandboxes the runtime last listed.
	Sandboxes int `json:"sandboxes"`
	// Released counts the attachments released since the agent started;
	// LastReleased are those of the last comparison that released any.
	Released     int                  `json:"released"`
	LastReleased []ReleasedAttachment `json:"lastReleased,omitempty"`
}

// ReleasedAttachment is a pod attachment released for belonging to no
// sandbox.
type ReleasedAttachment struct {
	ContainerID string   `json:"containerID"`
	IfName      string   `json:"ifName"`
	IPs         []string `json:"ips"`
	// Age is how old its allocation was ("7m12s").
	Age      string    `json:"age"`
	Released time.Time `json:"released"`
}

// ProxyStatus is the service proxy.
type ProxyStatus struct {
	// Backend is nftables or hns.
	Backend string `json:"backend"`
	DSR     bool   `json:"dsr"`
	// Source is kubernetes or files:DIR.
	Source string `json:"source"`
	// Running is false until the network is ready and the proxy started.
	Running bool `json:"running"`
	// Syncs counts successful syncs; LastSync is the end of the last one
	// (zero before the first).
	Syncs        int64     `json:"syncs"`
	LastSync     time.Time `json:"lastSync,omitzero"`
	ServicePorts int       `json:"servicePorts"`
	// Healthy is kube-proxy's /healthz answer.
	Healthy bool `json:"healthy"`
}

// Services is what the proxy last programmed, one entry per service port
// and IP family, sorted by Name then Family.
type Services struct {
	Ports []ServicePort `json:"ports"`
}

// ServicePort is one programmed service port.
type ServicePort struct {
	// Name is namespace/name:port/protocol (port omitted when unnamed).
	Name                string     `json:"name"`
	Family              string     `json:"family"`
	Type                string     `json:"type"`
	ClusterIP           string     `json:"clusterIP,omitempty"`
	Port                int        `json:"port"`
	NodePort            int        `json:"nodePort,omitempty"`
	ExternalIPs         []string   `json:"externalIPs,omitempty"`
	LoadBalancerIPs     []string   `json:"loadBalancerIPs,omitempty"`
	SessionAffinity     string     `json:"sessionAffinity,omitempty"` // e.g. "ClientIP 3h0m0s"
	InternalPolicyLocal bool       `json:"internalPolicyLocal,omitempty"`
	ExternalPolicyLocal bool       `json:"externalPolicyLocal,omitempty"`
	InternalEndpoints   []Endpoint `json:"internalEndpoints"`
	ExternalEndpoints   []Endpoint `json:"externalEndpoints,omitempty"`
	// HasEndpoints: false means traffic is rejected; true with no usable
	// endpoints means dropped.
	HasEndpoints bool `json:"hasEndpoints"`
	// TrafficDistribution is the Service's spec.trafficDistribution;
	// Topology the mode its hints gave cluster-wide traffic here
	// ("PreferSameZone", "PreferSameNode", or "" for every endpoint).
	TrafficDistribution string `json:"trafficDistribution,omitempty"`
	Topology            string `json:"topology,omitempty"`
}

// Endpoint is one backend of a ServicePort.
type Endpoint struct {
	// Address is ip:port.
	Address     string `json:"address"`
	Node        string `json:"node,omitempty"`
	Local       bool   `json:"local,omitempty"`
	Ready       bool   `json:"ready"`
	Terminating bool   `json:"terminating,omitempty"`
}

// Dump is the dataplane's state as an operator reads it: chains, rule
// counts, sets and elements for nftables, hnsdiag style for HNS.
type Dump struct {
	Dataplane string `json:"dataplane"`
	// Sections are titled blocks of text (e.g. "nftables table inet
	// nodenet", "HNS load balancers").
	Sections []Section `json:"sections"`
}

// Section is one titled block of a Dump.
type Section struct {
	Title string `json:"title"`
	Text  string `json:"text"`
}
