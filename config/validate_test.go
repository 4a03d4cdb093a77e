package config

// Address plan (every test in this file):
//   cluster CIDRs   10.244.0.0/16, fd00:10:244::/56
//   service CIDRs   10.96.0.0/12,  fd00:10:96::/112
//   this node's pod CIDRs 10.244.1.0/24, fd00:10:244:1::/64
//   source VIP      10.244.1.2 ("auto"); 10.244.1.7 explicit

import (
	"os"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

const dualStackYAML = `apiVersion: nodenet.io/v1alpha1
kind: AgentConfiguration
clusterCIDRs: [10.244.0.0/16, "fd00:10:244::/56"]
serviceCIDRs: [10.96.0.0/12, "fd00:10:96::/112"]
`

func TestValidateCrossFieldRules(t *testing.T) {
	tests := []struct {
		name         string
		yaml         string
		os           OS
		caps         Capabilities
		wantErrs     []fieldErr
		wantWarnings []string
		wantFamilies []IPFamily
	}{
		{
			name:         "overlay with dual-stack CIDRs warns and runs IPv4 only",
			yaml:         dualStackYAML + "ipFamilyPolicy: PreferDualStack\n",
			os:           OSWindows,
			wantWarnings: []string{"ipFamilyPolicy", "clusterCIDRs[1]", "serviceCIDRs[1]"},
			wantFamilies: []IPFamily{IPv4},
		},
		{
			name:         "overlay with an IPv6 cluster CIDR under SingleStack warns that it is unused",
			yaml:         dualStackYAML,
			os:           OSLinux,
			wantWarnings: []string{"clusterCIDRs[1]", "serviceCIDRs[1]"},
			wantFamilies: []IPFamily{IPv4},
		},
		{
			name:         "overlay with RequireDualStack is an error",
			yaml:         dualStackYAML + "ipFamilyPolicy: RequireDualStack\n",
			os:           OSWindows,
			wantErrs:     []fieldErr{{field.ErrorTypeForbidden, "ipFamilyPolicy"}},
			wantWarnings: []string{"clusterCIDRs[1]", "serviceCIDRs[1]"},
		},
		{
			name:     "overlay with only an IPv6 cluster CIDR is an error",
			yaml:     "apiVersion: nodenet.io/v1alpha1\nkind: AgentConfiguration\nclusterCIDRs: [\"fd00:10:244::/56\"]\nserviceCIDRs: [\"fd00:10:96::/112\"]\n",
			os:       OSLinux,
			wantErrs: []fieldErr{{field.ErrorTypeInvalid, "clusterCIDRs"}},
		},
		{
			name:         "l2bridge with PreferDualStack runs both families",
			yaml:         dualStackYAML + "ipFamilyPolicy: PreferDualStack\nnetwork: {mode: l2bridge}\n",
			os:           OSLinux,
			wantFamilies: []IPFamily{IPv4, IPv6},
		},
		{
			name:         "l2bridge with SingleStack runs the first cluster CIDR's family and warns about the other",
			yaml:         dualStackYAML + "network: {mode: l2bridge}\n",
			os:           OSLinux,
			wantWarnings: []string{"clusterCIDRs[1]", "serviceCIDRs[1]"},
			wantFamilies: []IPFamily{IPv4},
		},
		{
			name:     "RequireDualStack with one family is an error on each CIDR list",
			yaml:     cfgYAML + "ipFamilyPolicy: RequireDualStack\nnetwork: {mode: l2bridge}\n",
			os:       OSLinux,
			wantErrs: []fieldErr{{field.ErrorTypeInvalid, "clusterCIDRs"}, {field.ErrorTypeInvalid, "serviceCIDRs"}},
		},
		{
			name:     "a VNI below 4096 on a Windows overlay is an error",
			yaml:     cfgYAML + "network: {vxlan: {vni: 4095}}\n",
			os:       OSWindows,
			wantErrs: []fieldErr{{field.ErrorTypeInvalid, "network.vxlan.vni"}},
		},
		{
			name:         "a VNI of 1 is fine on Linux",
			yaml:         cfgYAML + "network: {vxlan: {vni: 1}}\n",
			os:           OSLinux,
			wantFamilies: []IPFamily{IPv4},
		},
		{
			name:     "a VNI above 24 bits and a port above 65535 are errors",
			yaml:     cfgYAML + "network: {vxlan: {vni: 16777216, port: 65536}}\n",
			os:       OSLinux,
			wantErrs: []fieldErr{{field.ErrorTypeInvalid, "network.vxlan.vni"}, {field.ErrorTypeInvalid, "network.vxlan.port"}},
		},
		{
			name:     "overlay with the WinOverlay gate off is an error",
			yaml:     cfgYAML + "featureGates: {WinOverlay: false}\n",
			os:       OSWindows,
			wantErrs: []fieldErr{{field.ErrorTypeForbidden, "network.mode"}},
		},
		{
			name:         "l2bridge with the WinOverlay gate off is fine",
			yaml:         cfgYAML + "featureGates: {WinOverlay: false}\nnetwork: {mode: l2bridge}\n",
			os:           OSWindows,
			wantFamilies: []IPFamily{IPv4},
		},
		{
			name:     "DSR with the WinDSR gate off is an error",
			yaml:     cfgYAML + "featureGates: {WinDSR: false}\nproxy: {enableDSR: true}\n",
			os:       OSWindows,
			wantErrs: []fieldErr{{field.ErrorTypeForbidden, "proxy.enableDSR"}},
		},
		{
			name:     "DSR on a Linux target is an error",
			yaml:     cfgYAML + "proxy: {enableDSR: true}\n",
			os:       OSLinux,
			wantErrs: []fieldErr{{field.ErrorTypeForbidden, "proxy.enableDSR"}},
		},
		{
			name:     "DSR on a host whose HNS lacks it is an error",
			yaml:     cfgYAML + "proxy: {enableDSR: true}\n",
			os:       OSWindows,
			caps:     Capabilities{Known: true, DSR: false},
			wantErrs: []fieldErr{{field.ErrorTypeForbidden, "proxy.enableDSR"}},
		},
		{
			name:         "DSR on a host whose HNS has it is fine",
			yaml:         cfgYAML + "proxy: {enableDSR: true}\n",
			os:           OSWindows,
			caps:         Capabilities{Known: true, DSR: true},
			wantFamilies: []IPFamily{IPv4},
		},
		{
			name:         "l2bridge with vxlan settings warns that they are ignored",
			yaml:         cfgYAML + "network: {mode: l2bridge, vxlan: {vni: 4096}}\n",
			os:           OSWindows,
			wantWarnings: []string{"network.vxlan"},
			wantFamilies: []IPFamily{IPv4},
		},
		{
			name:         "l2bridge with an explicit source VIP warns that it is ignored",
			yaml:         cfgYAML + "network: {mode: l2bridge, sourceVIP: 10.244.1.7}\n",
			os:           OSWindows,
			wantWarnings: []string{"network.sourceVIP"},
			wantFamilies: []IPFamily{IPv4},
		},
		{
			name:     "an explicit source VIP outside the cluster CIDR is an error",
			yaml:     cfgYAML + "network: {sourceVIP: 192.168.10.2}\n",
			os:       OSWindows,
			wantErrs: []fieldErr{{field.ErrorTypeInvalid, "network.sourceVIP"}},
		},
		{
			name:     "an IPv6 source VIP is an error because overlay is IPv4 only",
			yaml:     dualStackYAML + "network: {sourceVIP: \"fd00:10:244:1::2\"}\n",
			os:       OSWindows,
			wantErrs: []fieldErr{{field.ErrorTypeInvalid, "network.sourceVIP"}},
			// the IPv6 CIDRs are still reported as unused
			wantWarnings: []string{"clusterCIDRs[1]", "serviceCIDRs[1]"},
		},
		{
			name:     "an MTU below 1280 is an error when IPv6 runs",
			yaml:     dualStackYAML + "ipFamilyPolicy: PreferDualStack\nnetwork: {mode: l2bridge, mtu: 1000}\n",
			os:       OSLinux,
			wantErrs: []fieldErr{{field.ErrorTypeInvalid, "network.mtu"}},
		},
		{
			name:         "an MTU of 1000 is fine for IPv4",
			yaml:         cfgYAML + "network: {mtu: 1000}\n",
			os:           OSLinux,
			wantFamilies: []IPFamily{IPv4},
		},
		{
			name:         "a minSyncPeriod of 0 is allowed",
			yaml:         cfgYAML + "minSyncPeriod: 0s\n",
			os:           OSLinux,
			wantFamilies: []IPFamily{IPv4},
		},
		{
			name:     "negative periods are errors",
			yaml:     cfgYAML + "syncPeriod: -1s\nminSyncPeriod: -1s\n",
			os:       OSLinux,
			wantErrs: []fieldErr{{field.ErrorTypeInvalid, "syncPeriod"}, {field.ErrorTypeInvalid, "minSyncPeriod"}},
		},
		{
			name:     "a cluster CIDR must be canonical",
			yaml:     "apiVersion: nodenet.io/v1alpha1\nkind: AgentConfiguration\nclusterCIDRs: [10.244.1.0/16]\nserviceCIDRs: [10.96.0.0/12]\n",
			os:       OSLinux,
			wantErrs: []fieldErr{{field.ErrorTypeInvalid, "clusterCIDRs[0]"}},
		},
		{
			name: "missing CIDRs are required-field errors",
			yaml: "apiVersion: nodenet.io/v1alpha1\nkind: AgentConfiguration\n",
			os:   OSLinux,
			wantErrs: []fieldErr{
				{field.ErrorTypeRequired, "clusterCIDRs"},
				{field.ErrorTypeRequired, "serviceCIDRs"},
			},
		},
		{
			name:     "a duplicate node port address is an error",
			yaml:     cfgYAML + "proxy: {nodePortAddresses: [primary, primary]}\n",
			os:       OSLinux,
			wantErrs: []fieldErr{{field.ErrorTypeDuplicate, "proxy.nodePortAddresses[1]"}},
		},
		{
			name:     "a Linux network name longer than a device name is an error",
			yaml:     cfgYAML + "network: {name: nodenet-network-0}\n",
			os:       OSLinux,
			wantErrs: []fieldErr{{field.ErrorTypeTooLong, "network.name"}},
		},
		{
			name:     "Windows paths are not absolute on a Linux target",
			yaml:     cfgYAML + "cni: {dataDir: 'C:\\ProgramData\\nodenet'}\n",
			os:       OSLinux,
			wantErrs: []fieldErr{{field.ErrorTypeInvalid, "cni.dataDir"}},
		},
		{
			name:         "an unset backend limit follows the host",
			yaml:         cfgYAML,
			os:           OSWindows,
			wantFamilies: []IPFamily{IPv4},
		},
		{
			name:         "a backend limit of 1024 is the most any Windows release takes",
			yaml:         cfgYAML + "windows: {maxBackendsPerLoadBalancer: 1024}\n",
			os:           OSWindows,
			wantFamilies: []IPFamily{IPv4},
		},
		{
			name:     "a backend limit above 1024 is an error",
			yaml:     cfgYAML + "windows: {maxBackendsPerLoadBalancer: 1025}\n",
			os:       OSWindows,
			wantErrs: []fieldErr{{field.ErrorTypeInvalid, "windows.maxBackendsPerLoadBalancer"}},
		},
		{
			name:         "agent pod CIDR allocation defaults its mask sizes and is valid",
			yaml:         cfgYAML + "network: {podCIDRAllocation: agent}\n",
			os:           OSLinux,
			wantFamilies: []IPFamily{IPv4},
		},
		{
			name:     "an unknown pod CIDR allocator is an error",
			yaml:     cfgYAML + "network: {podCIDRAllocation: kcm}\n",
			os:       OSLinux,
			wantErrs: []fieldErr{{field.ErrorTypeNotSupported, "network.podCIDRAllocation"}},
		},
		{
			name:     "a node mask shorter than the cluster CIDR's is an error",
			yaml:     cfgYAML + "network: {podCIDRAllocation: agent, nodeCIDRMaskSizeIPv4: 15}\n",
			os:       OSLinux,
			wantErrs: []fieldErr{{field.ErrorTypeInvalid, "network.nodeCIDRMaskSizeIPv4"}},
		},
		{
			name:     "an IPv4 node mask that leaves no room for a pod is an error",
			yaml:     cfgYAML + "network: {podCIDRAllocation: agent, nodeCIDRMaskSizeIPv4: 31}\n",
			os:       OSWindows,
			wantErrs: []fieldErr{{field.ErrorTypeInvalid, "network.nodeCIDRMaskSizeIPv4"}},
		},
		{
			name:     "a dual-stack IPv6 node mask shorter than the IPv6 cluster CIDR's is an error",
			yaml:     dualStackYAML + "ipFamilyPolicy: PreferDualStack\nnetwork: {mode: l2bridge, podCIDRAllocation: agent, nodeCIDRMaskSizeIPv6: 48}\n",
			os:       OSLinux,
			wantErrs: []fieldErr{{field.ErrorTypeInvalid, "network.nodeCIDRMaskSizeIPv6"}},
		},
		{
			name:         "mask sizes under controller allocation are ignored with a warning",
			yaml:         cfgYAML + "network: {nodeCIDRMaskSizeIPv4: 26}\n",
			os:           OSLinux,
			wantWarnings: []string{"network.nodeCIDRMaskSizeIPv4"},
			wantFamilies: []IPFamily{IPv4},
		},
		{
			name:     "a runtime endpoint without a scheme is an error",
			yaml:     cfgYAML + "cni: {runtimeEndpoint: /run/containerd/containerd.sock}\n",
			os:       OSLinux,
			wantErrs: []fieldErr{{field.ErrorTypeInvalid, "cni.runtimeEndpoint"}},
		},
		{
			name:     "a named pipe runtime endpoint is an error on a Linux target",
			yaml:     cfgYAML + "cni: {runtimeEndpoint: 'npipe:////./pipe/containerd-containerd'}\n",
			os:       OSLinux,
			wantErrs: []fieldErr{{field.ErrorTypeInvalid, "cni.runtimeEndpoint"}},
		},
		{
			name:         "CRI-O's socket is a valid runtime endpoint",
			yaml:         cfgYAML + "cni: {runtimeEndpoint: 'unix:///var/run/crio/crio.sock'}\n",
			os:           OSLinux,
			wantFamilies: []IPFamily{IPv4},
		},
		{
			name:     "a negative orphan grace period is an error",
			yaml:     cfgYAML + "cni: {orphanGracePeriod: -1m}\n",
			os:       OSLinux,
			wantErrs: []fieldErr{{field.ErrorTypeInvalid, "cni.orphanGracePeriod"}},
		},
		{
			name:         "an orphan grace period under a minute is warned about",
			yaml:         cfgYAML + "cni: {orphanGracePeriod: 15s}\n",
			os:           OSWindows,
			wantWarnings: []string{"cni.orphanGracePeriod"},
			wantFamilies: []IPFamily{IPv4},
		},
		{
			name:         "a zero orphan grace period turns orphan release off",
			yaml:         cfgYAML + "cni: {orphanGracePeriod: 0s}\n",
			os:           OSLinux,
			wantFamilies: []IPFamily{IPv4},
		},
		{
			name:         "UNC and forward-slash Windows paths are absolute",
			yaml:         cfgYAML + "cni: {dataDir: '\\\\server\\share\\nodenet', binDir: 'D:/cni/bin'}\n",
			os:           OSWindows,
			wantFamilies: []IPFamily{IPv4},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			opts := testOptions(tt.os)
			opts.Capabilities = tt.caps
			cfg, warnings, err := Load([]byte(tt.yaml), opts)
			if cfg == nil {
				t.Fatalf("Load: %v", err)
			}
			diffErrs(t, FieldErrors(err), tt.wantErrs)
			diffWarnings(t, warnings, tt.wantWarnings)
			if tt.wantErrs == nil {
				if diff := cmp.Diff(tt.wantFamilies, cfg.EffectiveIPFamilies()); diff != "" {
					t.Errorf("EffectiveIPFamilies (-want +got):\n%s", diff)
				}
			}
		})
	}
}

func TestAgentPodCIDRAllocationDefaultsKubeControllerManagersMaskSizes(t *testing.T) {
	cfg, _ := mustLoad(t, []byte(cfgYAML+"network: {podCIDRAllocation: agent}\n"), testOptions(OSLinux))
	got := []*int32{cfg.Network.NodeCIDRMaskSizeIPv4, cfg.Network.NodeCIDRMaskSizeIPv6}
	if diff := cmp.Diff([]*int32{ptr(int32(24)), ptr(int32(64))}, got); diff != "" {
		t.Errorf("mask sizes (-want +got):\n%s", diff)
	}
}

func TestValidateWindowsOverlayFile(t *testing.T) {
	data, err := os.ReadFile("testdata/invalid-windows-overlay.yaml")
	if err != nil {
		t.Fatal(err)
	}
	_, errs, _ := loadInvalid(t, data, testOptions(OSWindows))
	diffErrs(t, errs, []fieldErr{
		{field.ErrorTypeForbidden, "network.mode"},
		{field.ErrorTypeInvalid, "network.vxlan.vni"},
		{field.ErrorTypeForbidden, "proxy.enableDSR"},
	})
}

func TestEffectiveCIDRsFollowTheFamilies(t *testing.T) {
	cfg, _ := mustLoad(t, []byte(dualStackYAML+"ipFamilyPolicy: PreferDualStack\n"), testOptions(OSWindows))
	got := map[string][]string{
		"cluster":     prefixStrings(cfg.EffectiveClusterCIDRs()),
		"service":     prefixStrings(cfg.EffectiveServiceCIDRs()),
		"detectLocal": prefixStrings(cfg.EffectiveDetectLocalCIDRs()),
	}
	want := map[string][]string{
		"cluster":     {"10.244.0.0/16"},
		"service":     {"10.96.0.0/12"},
		"detectLocal": {"10.244.0.0/16"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("effective CIDRs of an overlay node (-want +got):\n%s", diff)
	}
	// The stored fields keep what the operator wrote.
	if len(cfg.ClusterCIDRs) != 2 || cfg.IPFamilyPolicy != IPFamilyPolicyPreferDualStack {
		t.Errorf("stored clusterCIDRs %v, ipFamilyPolicy %s were rewritten", cfg.ClusterCIDRs, cfg.IPFamilyPolicy)
	}
}

func TestFeatureEnabledAndHardFail(t *testing.T) {
	cfg := &AgentConfiguration{FeatureGates: map[string]bool{FeatureWinDSR: false}}
	if cfg.FeatureEnabled(FeatureWinDSR) || !cfg.FeatureEnabled(FeatureWinOverlay) {
		t.Errorf("FeatureEnabled: WinDSR=%v WinOverlay=%v, want false, true", cfg.FeatureEnabled(FeatureWinDSR), cfg.FeatureEnabled(FeatureWinOverlay))
	}
	if !cfg.HardFail() {
		t.Error("HardFail with configHardFail unset = false, want true")
	}
	cfg.ConfigHardFail = ptr(false)
	if cfg.HardFail() {
		t.Error("HardFail with configHardFail false = true")
	}
}

func TestValidateForNode(t *testing.T) {
	tests := []struct {
		name     string
		yaml     string
		podCIDRs []string
		wantErrs []fieldErr
		wantVIP  string
	}{
		{
			name:     "auto puts the source VIP at .2 of the IPv4 pod CIDR",
			yaml:     cfgYAML,
			podCIDRs: []string{"10.244.1.0/24"},
			wantVIP:  "10.244.1.2",
		},
		{
			name:     "an explicit source VIP inside the pod CIDR is used as is",
			yaml:     cfgYAML + "network: {sourceVIP: 10.244.1.7}\n",
			podCIDRs: []string{"10.244.1.0/24"},
			wantVIP:  "10.244.1.7",
		},
		{
			name:     "an explicit source VIP in another node's pod CIDR is an error",
			yaml:     cfgYAML + "network: {sourceVIP: 10.244.2.7}\n",
			podCIDRs: []string{"10.244.1.0/24"},
			wantErrs: []fieldErr{{field.ErrorTypeInvalid, "network.sourceVIP"}},
		},
		{
			name:     "the pods' gateway can't be the source VIP",
			yaml:     cfgYAML + "network: {sourceVIP: 10.244.1.1}\n",
			podCIDRs: []string{"10.244.1.0/24"},
			wantErrs: []fieldErr{{field.ErrorTypeInvalid, "network.sourceVIP"}},
		},
		{
			name:     "a pod CIDR outside the cluster CIDR is an error",
			yaml:     cfgYAML,
			podCIDRs: []string{"10.245.1.0/24"},
			wantErrs: []fieldErr{{field.ErrorTypeInvalid, "podCIDRs[0]"}},
		},
		{
			name:     "a pod CIDR inside the service CIDR is an error that names the service CIDR",
			yaml:     cfgYAML,
			podCIDRs: []string{"10.96.1.0/24"},
			wantErrs: []fieldErr{{field.ErrorTypeInvalid, "podCIDRs[0]"}},
		},
		{
			name:     "an unparsable pod CIDR is an error",
			yaml:     cfgYAML,
			podCIDRs: []string{"10.244.1.0"},
			wantErrs: []fieldErr{{field.ErrorTypeInvalid, "podCIDRs[0]"}},
		},
		{
			name:     "an overlay node without pod CIDRs is an error",
			yaml:     cfgYAML,
			wantErrs: []fieldErr{{field.ErrorTypeInvalid, "podCIDRs"}},
		},
		{
			name:     "a /31 pod CIDR has no room for the auto source VIP",
			yaml:     cfgYAML,
			podCIDRs: []string{"10.244.1.0/31"},
			wantErrs: []fieldErr{{field.ErrorTypeInvalid, "network.sourceVIP"}},
		},
		{
			name:     "an overlay node ignores its IPv6 pod CIDR",
			yaml:     dualStackYAML,
			podCIDRs: []string{"10.244.1.0/24", "fd00:10:245:1::/64"},
			wantVIP:  "10.244.1.2",
		},
		{
			name:     "a RequireDualStack node needs both pod CIDRs",
			yaml:     dualStackYAML + "ipFamilyPolicy: RequireDualStack\nnetwork: {mode: l2bridge}\n",
			podCIDRs: []string{"10.244.1.0/24"},
			wantErrs: []fieldErr{{field.ErrorTypeInvalid, "podCIDRs"}},
		},
		{
			name:     "a PreferDualStack node runs with only its primary pod CIDR",
			yaml:     dualStackYAML + "ipFamilyPolicy: PreferDualStack\nnetwork: {mode: l2bridge}\n",
			podCIDRs: []string{"10.244.1.0/24"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, _ := mustLoad(t, []byte(tt.yaml), testOptions(OSWindows))
			diffErrs(t, ValidateForNode(cfg, tt.podCIDRs), tt.wantErrs)
			if tt.wantVIP == "" {
				return
			}
			vip, err := cfg.ResolveSourceVIP(tt.podCIDRs)
			if err != nil || vip.String() != tt.wantVIP {
				t.Errorf("ResolveSourceVIP = %v, %v; want %s", vip, err, tt.wantVIP)
			}
		})
	}
}
