package config

import (
	"os"
	"slices"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Defaults that don't depend on the target OS.
const (
	DefaultSyncPeriod              = 30 * time.Second
	DefaultMinSyncPeriod           = 1 * time.Second
	DefaultNetworkName             = "nodenet"
	DefaultVNI                     = 4096
	DefaultVXLANPort               = 4789
	DefaultHealthzBindAddress      = "0.0.0.0:10256"
	DefaultMetricsBindAddress      = "127.0.0.1:10249"
	DefaultConflistName            = "10-nodenet.conflist"
	DefaultConntrackMaxPerCore     = 32768
	DefaultConntrackMin            = 131072
	DefaultConntrackTCPEstablished = 24 * time.Hour
	DefaultConntrackTCPCloseWait   = 1 * time.Hour
	DefaultOrphanGracePeriod       = 5 * time.Minute

	// NodePortAddressPrimary is the NodePortAddresses keyword for the Node
	// object's primary IP of each family.
	NodePortAddressPrimary = "primary"
	// NodeNameEnv is the environment variable NodeName defaults from; the
	// DaemonSets set it from the downward API.
	NodeNameEnv = "NODE_NAME"
)

// DefaultingOptions are the inputs of SetDefaults.
type DefaultingOptions struct {
	// OS is the target platform; empty means HostOS(). Values other than
	// OSWindows get Linux defaults.
	OS OS
	// Shared marks a config that many nodes will read (a ConfigMap, what
	// nodenetctl config convert writes by default): defaults that describe
	// the machine doing the loading, rather than the node that will run it,
	// stay unset (nodeName, the per-OS cni paths) so each node fills in its
	// own when it loads the file.
	Shared bool
	// Getenv reads an environment variable; nil means os.Getenv.
	Getenv func(key string) string
	// Hostname returns this machine's name; nil means os.Hostname.
	Hostname func() (string, error)
}

// SetDefaults fills every unset field of cfg with its default (each field's
// comment names it). It is idempotent, and leaves explicit values alone even
// when they are invalid: validation reports those.
func SetDefaults(cfg *AgentConfiguration, opts DefaultingOptions) {
	target := opts.OS.rules()
	if cfg.APIVersion == "" {
		cfg.APIVersion = APIVersion
	}
	if cfg.Kind == "" {
		cfg.Kind = Kind
	}
	setRootDefaults(cfg, opts)
	setNetworkDefaults(&cfg.Network)
	setProxyDefaults(&cfg.Proxy, cfg.ClusterCIDRs)
	setCNIDefaults(&cfg.CNI, target, opts.Shared)
	setLinuxDefaults(&cfg.Linux)
}

func setRootDefaults(cfg *AgentConfiguration, opts DefaultingOptions) {
	if cfg.NodeName == "" && !opts.Shared {
		cfg.NodeName = defaultNodeName(opts)
	}
	if cfg.IPFamilyPolicy == "" {
		cfg.IPFamilyPolicy = IPFamilyPolicySingleStack
	}
	if cfg.SyncPeriod.Duration == 0 {
		cfg.SyncPeriod = metav1.Duration{Duration: DefaultSyncPeriod}
	}
	if cfg.MinSyncPeriod == nil {
		cfg.MinSyncPeriod = &metav1.Duration{Duration: DefaultMinSyncPeriod}
	}
	if cfg.ConfigHardFail == nil {
		cfg.ConfigHardFail = ptr(true)
	}
}

// defaultNodeName is NODE_NAME, else the hostname as kube-proxy normalizes
// it (trimmed, lowercased); empty when neither is available, which
// validation then reports.
func defaultNodeName(opts DefaultingOptions) string {
	getenv := opts.Getenv
	if getenv == nil {
		getenv = os.Getenv
	}
	if name := strings.TrimSpace(getenv(NodeNameEnv)); name != "" {
		return name
	}
	hostname := opts.Hostname
	if hostname == nil {
		hostname = os.Hostname
	}
	name, err := hostname()
	if err != nil {
		return ""
	}
	return strings.ToLower(strings.TrimSpace(name))
}

func setNetworkDefaults(n *NetworkConfiguration) {
	if n.Mode == "" {
		n.Mode = NetworkModeOverlay
	}
	if n.Name == "" {
		n.Name = DefaultNetworkName
	}
	// VXLAN is only defaulted where it is used, so that a vxlan section in
	// an l2bridge config can only have come from the file (and is warned
	// about).
	if n.Mode == NetworkModeOverlay {
		if n.VXLAN == nil {
			n.VXLAN = &VXLANConfiguration{}
		}
		if n.VXLAN.VNI == 0 {
			n.VXLAN.VNI = DefaultVNI
		}
		if n.VXLAN.Port == 0 {
			n.VXLAN.Port = DefaultVXLANPort
		}
	}
	if n.SourceVIP == "" {
		n.SourceVIP = SourceVIPAuto
	}
	if n.PodCIDRAllocation == "" {
		n.PodCIDRAllocation = PodCIDRAllocationController
	}
	// Mask sizes only where they are used, like VXLAN.
	if n.PodCIDRAllocation == PodCIDRAllocationAgent {
		if n.NodeCIDRMaskSizeIPv4 == nil {
			n.NodeCIDRMaskSizeIPv4 = ptr(int32(DefaultNodeCIDRMaskSizeIPv4))
		}
		if n.NodeCIDRMaskSizeIPv6 == nil {
			n.NodeCIDRMaskSizeIPv6 = ptr(int32(DefaultNodeCIDRMaskSizeIPv6))
		}
	}
}

func setProxyDefaults(p *ProxyConfiguration, clusterCIDRs []string) {
	if p.DetectLocal.Mode == "" {
		p.DetectLocal.Mode = DetectLocalClusterCIDR
	}
	if len(p.DetectLocal.ClusterCIDRs) == 0 {
		p.DetectLocal.ClusterCIDRs = slices.Clone(clusterCIDRs)
	}
	if len(p.NodePortAddresses) == 0 {
		p.NodePortAddresses = []string{NodePortAddressPrimary}
	}
	if p.HealthzBindAddress == "" {
		p.HealthzBindAddress = DefaultHealthzBindAddress
	}
	if p.MetricsBindAddress == "" {
		p.MetricsBindAddress = DefaultMetricsBindAddress
	}
}

func setCNIDefaults(c *CNIConfiguration, target OS, shared bool) {
	d := cniDefaults(target)
	fill := func(field *string, def string) {
		if *field == "" {
			*field = def
		}
	}
	fill(&c.ConflistName, d.ConflistName)
	if c.OrphanGracePeriod == nil {
		c.OrphanGracePeriod = &metav1.Duration{Duration: DefaultOrphanGracePeriod}
	}
	if shared {
		return // the paths depend on each node's OS
	}
	fill(&c.SocketPath, d.SocketPath)
	fill(&c.ConfDir, d.ConfDir)
	fill(&c.BinDir, d.BinDir)
	fill(&c.DataDir, d.DataDir)
	fill(&c.RuntimeEndpoint, d.RuntimeEndpoint)
}

func setLinuxDefaults(l *LinuxConfiguration) {
	if l.MasqueradePodEgress == nil {
		l.MasqueradePodEgress = ptr(true)
	}
	setConntrackDefaults(&l.Conntrack)
}

func setConntrackDefaults(c *ConntrackConfiguration) {
	if c.MaxPerCore == nil {
		c.MaxPerCore = ptr(int32(DefaultConntrackMaxPerCore))
	}
	if c.Min == nil {
		c.Min = ptr(int32(DefaultConntrackMin))
	}
	if c.TCPEstablishedTimeout == nil {
		c.TCPEstablishedTimeout = &metav1.Duration{Duration: DefaultConntrackTCPEstablished}
	}
	if c.TCPCloseWaitTimeout == nil {
		c.TCPCloseWaitTimeout = &metav1.Duration{Duration: DefaultConntrackTCPCloseWait}
	}
}

func ptr[T any](v T) *T { return &v }
