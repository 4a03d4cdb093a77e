package config

import (
	"fmt"
	"net"
	"net/netip"
	"reflect"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	kubeproxyv1alpha1 "k8s.io/kube-proxy/config/v1alpha1"
)

// Import of kube-proxy's KubeProxyConfiguration (the published
// k8s.io/kube-proxy/config/v1alpha1 types). Every field either maps onto
// the AgentConfiguration or produces a warning naming it; warnings use
// kube-proxy's field paths.
//
// A kube-proxy config lacks two facts nodenet needs:
//   - the network mode: inferred as overlay when winkernel.sourceVip is set
//     (only Overlay networks use one), else l2bridge, with a warning saying
//     so;
//   - the service CIDRs: left empty, so validation reports
//     "serviceCIDRs: Required value" and the operator adds that one field.
//
// A comma-separated dual-stack clusterCIDR sets ipFamilyPolicy
// PreferDualStack, which is what kube-proxy did with it.

func convertKubeProxy(j []byte, target OS) (*AgentConfiguration, Warnings, field.ErrorList, error) {
	kp := &kubeproxyv1alpha1.KubeProxyConfiguration{}
	strictErrs, err := decodeStrict(j, kp)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("decoding %s: %w", kubeProxyKind, err)
	}
	cfg, warnings := fromKubeProxy(kp, target)
	return cfg, warnings, strictErrs, nil
}

func fromKubeProxy(kp *kubeproxyv1alpha1.KubeProxyConfiguration, target OS) (*AgentConfiguration, Warnings) {
	cfg := &AgentConfiguration{TypeMeta: metav1.TypeMeta{APIVersion: APIVersion, Kind: Kind}}
	var w Warnings
	kubeProxyRoot(kp, cfg, &w)
	kubeProxySyncPeriods(kp, cfg)
	kubeProxyMode(kp, target, &w)
	kubeProxyWinkernel(kp, cfg, target, &w)
	kubeProxyDetectLocal(kp, cfg, &w)
	kubeProxyNodePorts(kp, cfg, target, &w)
	kubeProxyLinux(kp, cfg, &w)
	kubeProxyDropped(kp, &w)
	return cfg, w
}

func kubeProxyRoot(kp *kubeproxyv1alpha1.KubeProxyConfiguration, cfg *AgentConfiguration, w *Warnings) {
	for _, name := range sortedKeys(kp.FeatureGates) {
		if name == FeatureWinDSR || name == FeatureWinOverlay {
			if cfg.FeatureGates == nil {
				cfg.FeatureGates = map[string]bool{}
			}
			cfg.FeatureGates[name] = kp.FeatureGates[name]
			continue
		}
		w.add(field.NewPath("featureGates").Key(name), "not a nodenet feature gate (known: %s); dropped", strings.Join(KnownFeatureGates(), ", "))
	}
	// kube-proxy normalizes the override like a hostname.
	cfg.NodeName = strings.ToLower(strings.TrimSpace(kp.HostnameOverride))

	// bindAddress is, despite its name, kube-proxy's node IP override;
	// the unspecified address means "not set".
	if kp.BindAddress != "" {
		if ip, err := netip.ParseAddr(kp.BindAddress); err != nil {
			w.add(field.NewPath("bindAddress"), "%q is not an IP address; dropped", kp.BindAddress)
		} else if !ip.IsUnspecified() {
			cfg.NodeIPOverride = []string{ip.String()}
		}
	}
	for _, s := range strings.Split(kp.ClusterCIDR, ",") {
		if s = strings.TrimSpace(s); s != "" {
			cfg.ClusterCIDRs = append(cfg.ClusterCIDRs, s)
		}
	}
	if len(cfg.ClusterCIDRs) > 1 {
		cfg.IPFamilyPolicy = IPFamilyPolicyPreferDualStack
	}
	cfg.Proxy.HealthzBindAddress = withDefaultPort(kp.HealthzBindAddress, DefaultHealthzBindAddress)
	cfg.Proxy.MetricsBindAddress = withDefaultPort(kp.MetricsBindAddress, DefaultMetricsBindAddress)
	cfg.Windows.RunAsService = kp.WindowsRunAsService
}

// withDefaultPort appends the default address's port to a bare IP, as
// kube-proxy does.
func withDefaultPort(addr, def string) string {
	if _, err := netip.ParseAddr(addr); err != nil {
		return addr
	}
	_, port, _ := net.SplitHostPort(def)
	return net.JoinHostPort(addr, port)
}

// kubeProxySyncPeriods reads the sync periods from the section of the
// configured mode, as kube-proxy does; winkernel has none and uses the
// iptables section. Zero means unset in kube-proxy's v1alpha1.
func kubeProxySyncPeriods(kp *kubeproxyv1alpha1.KubeProxyConfiguration, cfg *AgentConfiguration) {
	syncPeriod, minSyncPeriod := kp.IPTables.SyncPeriod, kp.IPTables.MinSyncPeriod
	switch kp.Mode {
	case "ipvs":
		syncPeriod, minSyncPeriod = kp.IPVS.SyncPeriod, kp.IPVS.MinSyncPeriod
	case "nftables":
		syncPeriod, minSyncPeriod = kp.NFTables.SyncPeriod, kp.NFTables.MinSyncPeriod
	}
	cfg.SyncPeriod = syncPeriod
	if minSyncPeriod.Duration != 0 {
		cfg.MinSyncPeriod = &minSyncPeriod
	}
}

func kubeProxyMode(kp *kubeproxyv1alpha1.KubeProxyConfiguration, target OS, w *Warnings) {
	native := kubeproxyv1alpha1.ProxyMode("nftables")
	if target == OSWindows {
		native = "kernelspace"
	}
	if kp.Mode != "" && kp.Mode != native {
		w.add(field.NewPath("mode"), "%q not carried over: nodenet programs HNS on Windows and nftables on Linux", kp.Mode)
	}
}

func kubeProxyWinkernel(kp *kubeproxyv1alpha1.KubeProxyConfiguration, cfg *AgentConfiguration, target OS, w *Warnings) {
	wk := kp.Winkernel
	path := field.NewPath("winkernel")
	cfg.Network.Name = wk.NetworkName
	if wk.NetworkName == "" && target == OSWindows {
		w.add(path.Child("networkName"), "not set: kube-proxy then reads KUBE_NETWORK from its environment; set network.name to that value (default %q)", DefaultNetworkName)
	}
	cfg.Proxy.EnableDSR = wk.EnableDSR
	cfg.Network.SourceVIP = wk.SourceVip
	if wk.SourceVip != "" {
		cfg.Network.Mode = NetworkModeOverlay
		w.add(path.Child("sourceVip"), "network mode inferred as overlay (only Overlay networks use a source VIP); VXLAN VNI %d and port %d apply unless network.vxlan says otherwise, and must match the existing network", DefaultVNI, DefaultVXLANPort)
	} else {
		cfg.Network.Mode = NetworkModeL2Bridge
		w.add(path.Child("sourceVip"), "not set, so network mode inferred as l2bridge; set network.mode: overlay if the cluster uses VXLAN")
	}
	if wk.RootHnsEndpointName != "" {
		w.add(path.Child("rootHnsEndpointName"), "not carried over: nodenet creates and names its own host endpoint")
	}
	if wk.ForwardHealthCheckVip {
		w.add(path.Child("forwardHealthCheckVip"), "not carried over: nodenet has no such setting")
	}
}

func kubeProxyDetectLocal(kp *kubeproxyv1alpha1.KubeProxyConfiguration, cfg *AgentConfiguration, w *Warnings) {
	switch mode := kp.DetectLocalMode; mode {
	case "", "ClusterCIDR":
		cfg.Proxy.DetectLocal.Mode = DetectLocalClusterCIDR
	case "BridgeInterface", "InterfaceNamePrefix":
		// Both mean "from a pod on this node", which NodeCIDR expresses.
		cfg.Proxy.DetectLocal.Mode = DetectLocalNodeCIDR
		w.add(field.NewPath("detectLocalMode"), "%s is not supported; converted to NodeCIDR (traffic from this node's pod CIDR is local)", mode)
	default:
		cfg.Proxy.DetectLocal.Mode = DetectLocalMode(mode) // NodeCIDR, or reported by validation
	}
}

func kubeProxyNodePorts(kp *kubeproxyv1alpha1.KubeProxyConfiguration, cfg *AgentConfiguration, target OS, w *Warnings) {
	path := field.NewPath("nodePortAddresses")
	for i, a := range kp.NodePortAddresses {
		switch a {
		case "all":
			cfg.Proxy.NodePortAddresses = append(cfg.Proxy.NodePortAddresses, "0.0.0.0/0", "::/0")
		case "localhost":
			w.add(path.Index(i), "localhost NodePorts are not supported; dropped")
		default:
			cfg.Proxy.NodePortAddresses = append(cfg.Proxy.NodePortAddresses, a)
		}
	}
	allByDefault := kp.Mode == "iptables" || kp.Mode == "ipvs" || (kp.Mode == "" && target == OSLinux)
	if len(kp.NodePortAddresses) == 0 && allByDefault {
		w.add(path, "not set: kube-proxy served NodePorts on all addresses, nodenet defaults to [%s]; set [0.0.0.0/0, ::/0] to keep the old behavior", NodePortAddressPrimary)
	}
}

func kubeProxyLinux(kp *kubeproxyv1alpha1.KubeProxyConfiguration, cfg *AgentConfiguration, w *Warnings) {
	cfg.Linux.MasqueradeAll = kp.IPTables.MasqueradeAll || kp.NFTables.MasqueradeAll
	ct := kp.Conntrack
	cfg.Linux.Conntrack = ConntrackConfiguration{
		MaxPerCore:            ct.MaxPerCore,
		Min:                   ct.Min,
		TCPEstablishedTimeout: ct.TCPEstablishedTimeout,
		TCPCloseWaitTimeout:   ct.TCPCloseWaitTimeout,
		UDPTimeout:            nonZeroDuration(ct.UDPTimeout),
		UDPStreamTimeout:      nonZeroDuration(ct.UDPStreamTimeout),
	}
	if ct.TCPBeLiberal {
		w.add(field.NewPath("conntrack", "tcpBeLiberal"), "not carried over: nodenet leaves conntrack's TCP window tracking alone")
	}
}

func nonZeroDuration(d metav1.Duration) *metav1.Duration {
	if d.Duration == 0 {
		return nil
	}
	return &d
}

// kubeProxyDropped warns about every set field nodenet has no use for.
func kubeProxyDropped(kp *kubeproxyv1alpha1.KubeProxyConfiguration, w *Warnings) {
	dropped := func(set bool, path *field.Path, why string) {
		if set {
			w.add(path, "not carried over: %s", why)
		}
	}
	p := field.NewPath
	dropped(!reflect.ValueOf(kp.ClientConnection).IsZero(), p("clientConnection"), "nodenet-agent takes --kubeconfig or --apiserver (default: its service account at the API server address it discovers)")
	dropped((kp.Logging.Format != "" && kp.Logging.Format != "text") || kp.Logging.Verbosity != 0 || len(kp.Logging.VModule) > 0,
		p("logging"), "pass -v and --logging-format to nodenet-agent")
	dropped(kp.BindAddressHardFail, p("bindAddressHardFail"), "nodenet has no equivalent (configHardFail is about config errors)")
	dropped(kp.EnableProfiling, p("enableProfiling"), "nodenet has no profiling endpoint setting")
	dropped(kp.ShowHiddenMetricsForVersion != "", p("showHiddenMetricsForVersion"), "nodenet has no hidden metrics")
	dropped(kp.OOMScoreAdj != nil, p("oomScoreAdj"), "set it on the DaemonSet")
	dropped(kp.ConfigSyncPeriod.Duration != 0, p("configSyncPeriod"), "nodenet's informers use their own resync")
	dropped(kp.PortRange != "", p("portRange"), "it was only used by the removed userspace proxy")
	dropped(kp.IPTables.MasqueradeBit != nil, p("iptables", "masqueradeBit"), "nodenet picks its own packet marks")
	dropped(kp.NFTables.MasqueradeBit != nil, p("nftables", "masqueradeBit"), "nodenet picks its own packet marks")
	dropped(kp.IPTables.LocalhostNodePorts != nil, p("iptables", "localhostNodePorts"), "localhost NodePorts are not supported")
	ipvs := kp.IPVS
	ipvs.SyncPeriod, ipvs.MinSyncPeriod = metav1.Duration{}, metav1.Duration{}
	dropped(!reflect.ValueOf(ipvs).IsZero(), p("ipvs"), "nodenet has no IPVS dataplane")
	dropped(kp.DetectLocal.BridgeInterface != "", p("detectLocal", "bridgeInterface"), "see detectLocalMode")
	dropped(kp.DetectLocal.InterfaceNamePrefix != "", p("detectLocal", "interfaceNamePrefix"), "see detectLocalMode")
}
