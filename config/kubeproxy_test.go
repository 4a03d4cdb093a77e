package config

// Address plan (every test in this file):
//   cluster CIDRs   10.244.0.0/16, fd00:10:244::/56
//   service CIDR    10.96.0.0/12 (never in a kube-proxy config)
//   Windows node    192.168.10.21, pod CIDR 10.244.1.0/24, source VIP 10.244.1.2

import (
	"os"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Every kube-proxy import lacks service CIDRs, and says so.
var serviceCIDRsRequired = fieldErr{field.ErrorTypeRequired, "serviceCIDRs"}

func TestKubeProxyFilesImport(t *testing.T) {
	defaultConntrack := wantDefaultConntrack()
	tests := []struct {
		name         string
		file         string
		os           OS
		want         *AgentConfiguration
		wantWarnings []string
	}{
		{
			name: "a Windows winkernel config becomes an overlay config with DSR",
			file: "kube-proxy-windows.yaml",
			os:   OSWindows,
			want: &AgentConfiguration{
				TypeMeta:       metav1.TypeMeta{APIVersion: "nodenet.io/v1alpha1", Kind: "AgentConfiguration"},
				ClusterCIDRs:   []string{"10.244.0.0/16"},
				NodeName:       "win-node-1",
				IPFamilyPolicy: IPFamilyPolicySingleStack,
				SyncPeriod:     duration(time.Minute),
				MinSyncPeriod:  durationPtr(5 * time.Second),
				ConfigHardFail: ptr(true),
				FeatureGates:   map[string]bool{"WinDSR": true, "WinOverlay": true},
				Network: NetworkConfiguration{
					Mode:              NetworkModeOverlay,
					Name:              "vxlan0",
					VXLAN:             &VXLANConfiguration{VNI: 4096, Port: 4789},
					SourceVIP:         "10.244.1.2",
					PodCIDRAllocation: PodCIDRAllocationController,
				},
				Proxy: ProxyConfiguration{
					EnableDSR:          true,
					DetectLocal:        DetectLocalConfiguration{Mode: DetectLocalClusterCIDR, ClusterCIDRs: []string{"10.244.0.0/16"}},
					NodePortAddresses:  []string{"primary"},
					HealthzBindAddress: "0.0.0.0:10256",
					MetricsBindAddress: "0.0.0.0:10249",
				},
				CNI:     wantWindowsCNI(),
				Windows: WindowsConfiguration{RunAsService: true},
				Linux:   LinuxConfiguration{MasqueradePodEgress: ptr(true), Conntrack: defaultConntrack},
			},
			wantWarnings: []string{
				"featureGates[IPv6DualStack]",
				"winkernel.sourceVip",
				"winkernel.rootHnsEndpointName",
				"clientConnection",
			},
		},
		{
			name: "a kubeadm Linux config becomes a dual-stack l2bridge config",
			file: "kube-proxy-linux.yaml",
			os:   OSLinux,
			want: &AgentConfiguration{
				TypeMeta:       metav1.TypeMeta{APIVersion: "nodenet.io/v1alpha1", Kind: "AgentConfiguration"},
				ClusterCIDRs:   []string{"10.244.0.0/16", "fd00:10:244::/56"},
				NodeName:       "node-1",
				IPFamilyPolicy: IPFamilyPolicyPreferDualStack,
				SyncPeriod:     duration(30 * time.Second),
				MinSyncPeriod:  durationPtr(time.Second),
				ConfigHardFail: ptr(true),
				Network: NetworkConfiguration{
					Mode:              NetworkModeL2Bridge,
					Name:              "nodenet",
					SourceVIP:         "auto",
					PodCIDRAllocation: PodCIDRAllocationController,
				},
				Proxy: ProxyConfiguration{
					DetectLocal: DetectLocalConfiguration{
						Mode:         DetectLocalClusterCIDR,
						ClusterCIDRs: []string{"10.244.0.0/16", "fd00:10:244::/56"},
					},
					NodePortAddresses:  []string{"primary"},
					HealthzBindAddress: "0.0.0.0:10256",
					MetricsBindAddress: "127.0.0.1:10249",
				},
				CNI:     wantLinuxCNI(),
				Windows: WindowsConfiguration{},
				Linux:   LinuxConfiguration{MasqueradeAll: true, MasqueradePodEgress: ptr(true), Conntrack: defaultConntrack},
			},
			wantWarnings: []string{"mode", "winkernel.sourceVip", "nodePortAddresses", "clientConnection"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			checkImport(t, tt.file, tt.os, tt.want, tt.wantWarnings)
		})
	}
}

func TestKubeProxyImportNeedsOnlyServiceCIDRs(t *testing.T) {
	data, err := os.ReadFile("testdata/kube-proxy-windows.yaml")
	if err != nil {
		t.Fatal(err)
	}
	cfg, _, _ := loadInvalid(t, data, testOptions(OSWindows))
	out, err := Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	fixed, _ := mustLoad(t, append(out, "serviceCIDRs: [10.96.0.0/12]\n"...), testOptions(OSWindows))
	if diff := cmp.Diff([]string{"10.96.0.0/12"}, fixed.ServiceCIDRs); diff != "" {
		t.Errorf("serviceCIDRs (-want +got):\n%s", diff)
	}
}

// kubeProxyBase is a Windows overlay kube-proxy config the cases extend.
const kubeProxyBase = `apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
clusterCIDR: 10.244.0.0/16
`

func TestKubeProxyFieldMapping(t *testing.T) {
	tests := []struct {
		name         string
		yaml         string
		os           OS
		got          func(*AgentConfiguration) any
		want         any
		wantErrs     []fieldErr // nil: only serviceCIDRs is missing
		wantWarnings []string
	}{
		{
			name:         "a source VIP infers overlay mode",
			yaml:         "winkernel: {sourceVip: 10.244.1.2}\n",
			os:           OSWindows,
			got:          func(c *AgentConfiguration) any { return c.Network.Mode },
			want:         NetworkModeOverlay,
			wantWarnings: []string{"winkernel.networkName", "winkernel.sourceVip"},
		},
		{
			name:         "no source VIP infers l2bridge mode",
			yaml:         "winkernel: {networkName: cbr0}\n",
			os:           OSWindows,
			got:          func(c *AgentConfiguration) any { return []any{c.Network.Mode, c.Network.Name} },
			want:         []any{NetworkModeL2Bridge, "cbr0"},
			wantWarnings: []string{"winkernel.sourceVip"},
		},
		{
			name:         "BridgeInterface local detection becomes NodeCIDR",
			yaml:         "detectLocalMode: BridgeInterface\ndetectLocal: {bridgeInterface: cbr0}\n",
			os:           OSLinux,
			got:          func(c *AgentConfiguration) any { return c.Proxy.DetectLocal.Mode },
			want:         DetectLocalNodeCIDR,
			wantWarnings: []string{"winkernel.sourceVip", "detectLocalMode", "nodePortAddresses", "detectLocal.bridgeInterface"},
		},
		{
			name:         "nodePortAddresses all expands to both wildcards and localhost is dropped",
			yaml:         "nodePortAddresses: [all, localhost, 192.168.10.0/24]\n",
			os:           OSLinux,
			got:          func(c *AgentConfiguration) any { return c.Proxy.NodePortAddresses },
			want:         []string{"0.0.0.0/0", "::/0", "192.168.10.0/24"},
			wantWarnings: []string{"winkernel.sourceVip", "nodePortAddresses[1]"},
		},
		{
			name:         "a specific bindAddress becomes the node IP override",
			yaml:         "bindAddress: 192.168.10.21\nnodePortAddresses: [primary]\n",
			os:           OSLinux,
			got:          func(c *AgentConfiguration) any { return c.NodeIPOverride },
			want:         []string{"192.168.10.21"},
			wantWarnings: []string{"winkernel.sourceVip"},
		},
		{
			name: "nftables mode takes its sync periods from the nftables section",
			yaml: "mode: nftables\nnodePortAddresses: [primary]\nnftables: {syncPeriod: 45s}\niptables: {syncPeriod: 10s, minSyncPeriod: 2s}\n",
			os:   OSLinux,
			got: func(c *AgentConfiguration) any {
				return []time.Duration{c.SyncPeriod.Duration, c.MinSyncPeriod.Duration}
			},
			want:         []time.Duration{45 * time.Second, time.Second},
			wantWarnings: []string{"winkernel.sourceVip"},
		},
		{
			name: "a bare IP health address gets kube-proxy's default port",
			yaml: "healthzBindAddress: 0.0.0.0\nmetricsBindAddress: 127.0.0.1\nnodePortAddresses: [primary]\n",
			os:   OSLinux,
			got: func(c *AgentConfiguration) any {
				return []string{c.Proxy.HealthzBindAddress, c.Proxy.MetricsBindAddress}
			},
			want:         []string{"0.0.0.0:10256", "127.0.0.1:10249"},
			wantWarnings: []string{"winkernel.sourceVip"},
		},
		{
			name: "conntrack settings carry over and tcpBeLiberal is dropped",
			yaml: "nodePortAddresses: [primary]\nconntrack: {maxPerCore: 0, min: 0, tcpEstablishedTimeout: 1h, udpTimeout: 10s, tcpBeLiberal: true}\n",
			os:   OSLinux,
			got:  func(c *AgentConfiguration) any { return c.Linux.Conntrack },
			want: ConntrackConfiguration{
				MaxPerCore:            ptr(int32(0)),
				Min:                   ptr(int32(0)),
				TCPEstablishedTimeout: durationPtr(time.Hour),
				TCPCloseWaitTimeout:   durationPtr(time.Hour),
				UDPTimeout:            durationPtr(10 * time.Second),
			},
			wantWarnings: []string{"winkernel.sourceVip", "conntrack.tcpBeLiberal"},
		},
		{
			name: "settings nodenet has no use for are each named",
			yaml: "nodePortAddresses: [primary]\nbindAddressHardFail: true\nenableProfiling: true\noomScoreAdj: -999\n" +
				"iptables: {masqueradeBit: 14}\nipvs: {scheduler: rr}\nlogging: {verbosity: 4}\nportRange: 30000-32767\n",
			os:   OSLinux,
			got:  func(c *AgentConfiguration) any { return c.ClusterCIDRs },
			want: []string{"10.244.0.0/16"},
			wantWarnings: []string{"winkernel.sourceVip", "logging", "bindAddressHardFail", "enableProfiling",
				"oomScoreAdj", "portRange", "iptables.masqueradeBit", "ipvs"},
		},
		{
			name:         "a misspelled kube-proxy field is an error naming it",
			yaml:         "winkernel: {sourceVip: 10.244.1.2, enableDsr: true}\n",
			os:           OSWindows,
			got:          func(c *AgentConfiguration) any { return c.Proxy.EnableDSR },
			want:         false,
			wantErrs:     []fieldErr{{field.ErrorTypeForbidden, "winkernel.enableDsr"}, serviceCIDRsRequired},
			wantWarnings: []string{"winkernel.networkName", "winkernel.sourceVip"},
		},
		{
			name:         "a WinDSR gate that is off stops DSR",
			yaml:         "featureGates: {WinDSR: false}\nwinkernel: {networkName: vxlan0, sourceVip: 10.244.1.2, enableDSR: true}\n",
			os:           OSWindows,
			got:          func(c *AgentConfiguration) any { return c.FeatureGates },
			want:         map[string]bool{"WinDSR": false},
			wantErrs:     []fieldErr{serviceCIDRsRequired, {field.ErrorTypeForbidden, "proxy.enableDSR"}},
			wantWarnings: []string{"winkernel.sourceVip"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, errs, warnings := loadInvalid(t, []byte(kubeProxyBase+tt.yaml), testOptions(tt.os))
			wantErrs := tt.wantErrs
			if wantErrs == nil {
				wantErrs = []fieldErr{serviceCIDRsRequired}
			}
			diffErrs(t, errs, wantErrs)
			diffWarnings(t, warnings, tt.wantWarnings)
			if diff := cmp.Diff(tt.want, tt.got(cfg)); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}
