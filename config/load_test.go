package config

// Address plan (every test in this file):
//   cluster CIDRs   10.244.0.0/16, fd00:10:244::/56
//   service CIDRs   10.96.0.0/12,  fd00:10:96::/112
//   node IPs        192.168.10.0/24 (Linux .11, Windows .21), fd00:192:168:10::/64
//   this node's pod CIDR 10.244.1.0/24; source VIP "auto" = 10.244.1.2

import (
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

func TestLoadValidFiles(t *testing.T) {
	linuxCNI := wantLinuxCNI()
	windowsCNI := wantWindowsCNI()
	defaultConntrack := wantDefaultConntrack()
	minimal := wantDefaultConfig

	tests := []struct {
		name string
		file string
		os   OS
		want *AgentConfiguration
	}{
		{
			name: "a minimal config gets every default on Linux",
			file: "agent-minimal.yaml",
			os:   OSLinux,
			want: minimal(linuxCNI),
		},
		{
			name: "a minimal config gets Windows paths when the target is Windows",
			file: "agent-minimal.yaml",
			os:   OSWindows,
			want: minimal(windowsCNI),
		},
		{
			name: "a full Windows overlay config keeps every value written",
			file: "agent-windows-overlay.yaml",
			os:   OSWindows,
			want: &AgentConfiguration{
				TypeMeta:       metav1.TypeMeta{APIVersion: "nodenet.io/v1alpha1", Kind: "AgentConfiguration"},
				ClusterCIDRs:   []string{"10.244.0.0/16"},
				ServiceCIDRs:   []string{"10.96.0.0/12"},
				NodeName:       "win-node-1",
				NodeIPOverride: []string{"192.168.10.21"},
				IPFamilyPolicy: IPFamilyPolicySingleStack,
				SyncPeriod:     duration(time.Minute),
				MinSyncPeriod:  durationPtr(0),
				ConfigHardFail: ptr(true),
				FeatureGates:   map[string]bool{"WinDSR": true, "WinOverlay": true},
				Network: NetworkConfiguration{
					Mode:              NetworkModeOverlay,
					Name:              "vxlan0",
					VXLAN:             &VXLANConfiguration{VNI: 4096, Port: 4789},
					MTU:               1450,
					SourceVIP:         "auto",
					PodCIDRAllocation: PodCIDRAllocationController,
					ExternalInterface: "Ethernet 2",
				},
				Proxy: ProxyConfiguration{
					EnableDSR:          true,
					DetectLocal:        DetectLocalConfiguration{Mode: DetectLocalClusterCIDR, ClusterCIDRs: []string{"10.244.0.0/16"}},
					NodePortAddresses:  []string{"primary"},
					HealthzBindAddress: "0.0.0.0:10256",
					MetricsBindAddress: "127.0.0.1:10249",
				},
				CNI:     windowsCNI,
				Windows: WindowsConfiguration{RunAsService: true, HNSVersion: "15.4", MaxBackendsPerLoadBalancer: 64},
				Linux:   LinuxConfiguration{MasqueradePodEgress: ptr(true), Conntrack: defaultConntrack},
			},
		},
		{
			name: "a full dual-stack Linux l2bridge config keeps every value written and has no vxlan section",
			file: "agent-linux-l2bridge.yaml",
			os:   OSLinux,
			want: &AgentConfiguration{
				TypeMeta:       metav1.TypeMeta{APIVersion: "nodenet.io/v1alpha1", Kind: "AgentConfiguration"},
				ClusterCIDRs:   []string{"10.244.0.0/16", "fd00:10:244::/56"},
				ServiceCIDRs:   []string{"10.96.0.0/12", "fd00:10:96::/112"},
				NodeName:       "linux-node-1",
				NodeIPOverride: []string{"192.168.10.11", "fd00:192:168:10::11"},
				IPFamilyPolicy: IPFamilyPolicyRequireDualStack,
				SyncPeriod:     duration(30 * time.Second),
				MinSyncPeriod:  durationPtr(2 * time.Second),
				ConfigHardFail: ptr(false),
				Network: NetworkConfiguration{
					Mode:              NetworkModeL2Bridge,
					Name:              "nodenet0",
					MTU:               9000,
					SourceVIP:         "auto",
					PodCIDRAllocation: PodCIDRAllocationController,
					ExternalInterface: "eth0",
					AllowRecreate:     true,
				},
				Proxy: ProxyConfiguration{
					DetectLocal: DetectLocalConfiguration{
						Mode:         DetectLocalNodeCIDR,
						ClusterCIDRs: []string{"10.244.0.0/16", "fd00:10:244::/56"},
					},
					NodePortAddresses:  []string{"primary", "192.168.10.0/24"},
					HealthzBindAddress: "[::]:10256",
					MetricsBindAddress: "0.0.0.0:0",
				},
				CNI: CNIConfiguration{
					SocketPath:   "/run/nodenet/cni.sock",
					ConfDir:      "/etc/cni/net.d",
					ConflistName: "05-nodenet.conflist",
					BinDir:       "/usr/libexec/cni",
					DataDir:      "/var/lib/nodenet",
					// CRI-O's socket; addresses no sandbox holds go after 10m.
					RuntimeEndpoint:   "unix:///var/run/crio/crio.sock",
					OrphanGracePeriod: durationPtr(10 * time.Minute),
				},
				Windows: WindowsConfiguration{},
				Linux: LinuxConfiguration{
					MasqueradeAll:       true,
					MasqueradePodEgress: ptr(false),
					Conntrack: ConntrackConfiguration{
						MaxPerCore:            ptr(int32(0)),
						Min:                   ptr(int32(0)),
						TCPEstablishedTimeout: durationPtr(12 * time.Hour),
						TCPCloseWaitTimeout:   durationPtr(30 * time.Minute),
						UDPTimeout:            durationPtr(30 * time.Second),
						UDPStreamTimeout:      durationPtr(2 * time.Minute),
					},
				},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, warnings, err := LoadFile("testdata/"+tt.file, testOptions(tt.os))
			if err != nil {
				t.Fatalf("LoadFile: %v", err)
			}
			if len(warnings) > 0 {
				t.Errorf("unexpected warnings: %q", warnings.Strings())
			}
			if diff := cmp.Diff(tt.want, cfg); diff != "" {
				t.Errorf("config (-want +got):\n%s", diff)
			}
		})
	}
}

func TestLoadReportsEveryInvalidField(t *testing.T) {
	data, err := os.ReadFile("testdata/invalid-fields.yaml")
	if err != nil {
		t.Fatal(err)
	}
	_, errs, _ := loadInvalid(t, data, testOptions(OSLinux))
	diffErrs(t, errs, []fieldErr{
		{field.ErrorTypeInvalid, "clusterCIDRs[1]"},
		{field.ErrorTypeInvalid, "clusterCIDRs[2]"},
		{field.ErrorTypeInvalid, "serviceCIDRs[0]"},
		{field.ErrorTypeInvalid, "nodeName"},
		{field.ErrorTypeInvalid, "nodeIPOverride[1]"},
		{field.ErrorTypeNotSupported, "ipFamilyPolicy"},
		{field.ErrorTypeInvalid, "minSyncPeriod"},
		{field.ErrorTypeNotSupported, "featureGates[WinDRS]"},
		{field.ErrorTypeNotSupported, "network.mode"},
		{field.ErrorTypeInvalid, "network.name"},
		{field.ErrorTypeInvalid, "network.mtu"},
		{field.ErrorTypeInvalid, "network.sourceVIP"},
		{field.ErrorTypeNotSupported, "proxy.detectLocal.mode"},
		{field.ErrorTypeInvalid, "proxy.nodePortAddresses[1]"},
		{field.ErrorTypeInvalid, "proxy.healthzBindAddress"},
		{field.ErrorTypeInvalid, "proxy.metricsBindAddress"},
		{field.ErrorTypeInvalid, "cni.socketPath"},
		{field.ErrorTypeInvalid, "cni.conflistName"},
		{field.ErrorTypeInvalid, "windows.hnsVersion"},
		{field.ErrorTypeInvalid, "windows.maxBackendsPerLoadBalancer"},
		{field.ErrorTypeInvalid, "linux.conntrack.tcpEstablishedTimeout"},
	})
}

func TestLoadNamesUnknownFields(t *testing.T) {
	data, err := os.ReadFile("testdata/invalid-unknown-field.yaml")
	if err != nil {
		t.Fatal(err)
	}
	cfg, errs, _ := loadInvalid(t, data, testOptions(OSLinux))
	diffErrs(t, errs, []fieldErr{
		{field.ErrorTypeForbidden, "network.vxlan.vin"},
		{field.ErrorTypeForbidden, "proxy.enableDsr"},
	})
	// The recognized fields are still there, defaulted, for a caller that
	// runs anyway (configHardFail: false).
	if cfg.Network.VXLAN.VNI != DefaultVNI || cfg.Proxy.EnableDSR {
		t.Errorf("config holds vxlan %+v, enableDSR %v; want the defaults", *cfg.Network.VXLAN, cfg.Proxy.EnableDSR)
	}
}

// cfgYAML is a valid Linux overlay config that tests extend with lines.
const cfgYAML = `apiVersion: nodenet.io/v1alpha1
kind: AgentConfiguration
clusterCIDRs: [10.244.0.0/16]
serviceCIDRs: [10.96.0.0/12]
`

func TestLoadRejectsUndecodableInput(t *testing.T) {
	tests := []struct {
		name    string
		data    string
		wantErr string
	}{
		{"an empty file is an error", "  \n", "empty config"},
		{"a YAML list is not a config", "- a\n- b\n", "not a YAML or JSON object"},
		{"a scalar is not a config", "42", "not a YAML or JSON object"},
		{"null is not a config", "null", "not a YAML or JSON object"},
		{"broken YAML is an error", "a: [\n", "parsing config"},
		{"a duplicate key is an error naming it", cfgYAML + "clusterCIDRs: [10.245.0.0/16]\n", `key "clusterCIDRs" already set`},
		{"a wrong apiVersion lists the supported ones", "apiVersion: nodenet.io/v1beta1\nkind: AgentConfiguration\n",
			`unsupported config apiVersion "nodenet.io/v1beta1" kind "AgentConfiguration"; supported: apiVersion nodenet.io/v1alpha1 kind AgentConfiguration, apiVersion kubeproxy.config.k8s.io/v1alpha1 kind KubeProxyConfiguration, or a flannel net-conf.json`},
		{"a wrong kind is an error", "apiVersion: nodenet.io/v1alpha1\nkind: NodeConfiguration\n", `kind "NodeConfiguration"`},
		{"kube-proxy's unpublished v1alpha2 is not supported", "apiVersion: kubeproxy.config.k8s.io/v1alpha2\nkind: KubeProxyConfiguration\n", "unsupported config apiVersion"},
		{"a ConfigMap gets a hint to pass the file inside it", "apiVersion: v1\nkind: ConfigMap\ndata: {}\n", "pass the file held in its data"},
		{"a config without apiVersion says so", "clusterCIDRs: [10.244.0.0/16]\n", "config has no apiVersion and kind"},
		{"an apiVersion that is not a string is an error", "apiVersion: [a]\n", "apiVersion must be a string"},
		{"a value of the wrong type names the field", cfgYAML + "network: {vxlan: {vni: many}}\n", "network.vxlan.vni"},
		{"a flannel backend that nodenet lacks names Backend.Type", `{"Network": "10.244.0.0/16", "Backend": {"Type": "udp"}}`, `Backend.Type "udp" is not supported`},
		{"a flannel config without Backend means flannel's udp default", `{"Network": "10.244.0.0/16"}`, `Backend.Type "udp" (flannel's default when Backend is absent)`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, _, err := Load([]byte(tt.data), testOptions(OSLinux))
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("Load error = %v, want one containing %q", err, tt.wantErr)
			}
			if cfg != nil {
				t.Errorf("Load returned a config with a decoding error")
			}
			if FieldErrors(err) != nil {
				t.Errorf("a decoding error must not be an *InvalidError: %v", err)
			}
		})
	}
}

func TestLoadRejectsUnsupportedTargetOS(t *testing.T) {
	_, _, err := Load([]byte(cfgYAML), LoadOptions{OS: "darwin"})
	if err == nil || !strings.Contains(err.Error(), `unsupported target OS "darwin"`) {
		t.Fatalf("Load error = %v, want unsupported target OS", err)
	}
}

func TestLoadDefaultsNodeName(t *testing.T) {
	tests := []struct {
		name     string
		env      string
		hostname string
		hostErr  error
		shared   bool
		want     string
		wantErrs []fieldErr
	}{
		{name: "NODE_NAME wins over the hostname", env: "node-a", hostname: "host-b", want: "node-a"},
		{name: "the hostname is lowercased and trimmed like kube-proxy does", hostname: " Host-B.Example.COM\n", want: "host-b.example.com"},
		{name: "no NODE_NAME and no hostname is a required-field error", hostErr: os.ErrNotExist,
			wantErrs: []fieldErr{{field.ErrorTypeRequired, "nodeName"}}},
		{name: "a shared config leaves the node name for each node to fill", env: "node-a", shared: true, want: ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			opts := LoadOptions{
				OS:       OSLinux,
				Shared:   tt.shared,
				Getenv:   func(key string) string { return map[string]string{"NODE_NAME": tt.env}[key] },
				Hostname: func() (string, error) { return tt.hostname, tt.hostErr },
			}
			cfg, _, err := Load([]byte(cfgYAML), opts)
			diffErrs(t, FieldErrors(err), tt.wantErrs)
			if cfg.NodeName != tt.want {
				t.Errorf("nodeName = %q, want %q", cfg.NodeName, tt.want)
			}
		})
	}
}

func TestLoadSharedConfigLeavesNodeLocalDefaultsUnset(t *testing.T) {
	opts := testOptions(OSWindows)
	opts.Shared = true
	cfg, warnings := mustLoad(t, []byte(cfgYAML+"nodeName: node-a\nnetwork: {sourceVIP: 10.244.1.2, externalInterface: eth0}\n"), opts)
	want := CNIConfiguration{ConflistName: DefaultConflistName, OrphanGracePeriod: durationPtr(DefaultOrphanGracePeriod)}
	if diff := cmp.Diff(want, cfg.CNI); diff != "" {
		t.Errorf("cni (-want +got):\n%s", diff)
	}
	diffWarnings(t, warnings, []string{"nodeName", "network.sourceVIP", "network.externalInterface"})
}

func TestMasqueradePodEgressIsOnUnlessTurnedOffAndQuietOnWindows(t *testing.T) {
	for _, tc := range []struct {
		name   string
		extra  string
		os     OS
		shared bool
		want   bool
	}{
		{name: "unset on Linux it is on", os: OSLinux, want: true},
		{name: "unset in a shared config it is on: it is cluster-wide", os: OSLinux, shared: true, want: true},
		{name: "false on Linux turns it off", extra: "linux: {masqueradePodEgress: false}\n", os: OSLinux, want: false},
		{name: "false on Windows loads without a warning: Windows ignores it", extra: "linux: {masqueradePodEgress: false}\n", os: OSWindows, want: false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			opts := testOptions(tc.os)
			opts.Shared = tc.shared
			cfg, warnings := mustLoad(t, []byte(cfgYAML+tc.extra), opts)
			if got := cfg.Linux.MasqueradePodEgress; got == nil || *got != tc.want {
				t.Errorf("linux.masqueradePodEgress = %v, want %v", got, tc.want)
			}
			diffWarnings(t, warnings, nil)
		})
	}
}

func TestDetectFormat(t *testing.T) {
	tests := []struct {
		name string
		file string
		want Format
	}{
		{"an AgentConfiguration is recognized by its apiVersion", "agent-minimal.yaml", FormatAgentConfiguration},
		{"a KubeProxyConfiguration is recognized by its apiVersion", "kube-proxy-windows.yaml", FormatKubeProxy},
		{"a flannel net-conf.json is recognized by its Network string", "flannel-linux.json", FormatFlannel},
		{"a flannel config with lowercase backend keys is recognized too", "flannel-windows.json", FormatFlannel},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			data, err := os.ReadFile("testdata/" + tt.file)
			if err != nil {
				t.Fatal(err)
			}
			got, err := DetectFormat(data)
			if err != nil || got != tt.want {
				t.Errorf("DetectFormat = %q, %v; want %q", got, err, tt.want)
			}
		})
	}
}

func TestInvalidErrorExposesEachFieldError(t *testing.T) {
	_, _, err := LoadFile("testdata/invalid-windows-overlay.yaml", testOptions(OSWindows))
	var fe *field.Error
	if !errors.As(err, &fe) || fe.Field != "network.mode" {
		t.Errorf("errors.As(%v) found %v, want the network.mode error", err, fe)
	}
	if !strings.HasPrefix(err.Error(), "testdata/invalid-windows-overlay.yaml: invalid config: [network.mode: Forbidden: overlay needs WinOverlay") {
		t.Errorf("error text = %q", err)
	}
	if FieldErrors(nil) != nil || FieldErrors(os.ErrNotExist) != nil {
		t.Error("FieldErrors of a non-validation error is not nil")
	}
}

func TestWarningsRenderWithTheirFieldPath(t *testing.T) {
	ws := Warnings{{Field: "network.vxlan", Message: "ignored"}}
	if diff := cmp.Diff([]string{"network.vxlan: ignored"}, ws.Strings()); diff != "" {
		t.Errorf("Strings (-want +got):\n%s", diff)
	}
}

func TestLoadFileRejectsUndecodableFiles(t *testing.T) {
	tests := []struct {
		name    string
		file    string
		wantErr string
	}{
		{"a duplicate key names the key and line", "invalid-duplicate-field.yaml", `line 5: key "clusterCIDRs" already set in map`},
		{"a wrong apiVersion names it", "invalid-apiversion.yaml", `unsupported config apiVersion "nodenet.io/v1beta1"`},
		{"an unsupported flannel backend names Backend.Type", "invalid-flannel-backend.json", `Backend.Type "wireguard" is not supported; supported: vxlan, host-gw`},
		{"a missing file is an error", "no-such-file.yaml", "reading config: open testdata/no-such-file.yaml"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, _, err := LoadFile("testdata/"+tt.file, testOptions(OSLinux))
			if cfg != nil || err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("LoadFile = %v, %v; want no config and an error containing %q", cfg, err, tt.wantErr)
			}
		})
	}
}
