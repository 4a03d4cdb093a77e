package config

import (
	"errors"
	"os"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// testOptions loads for target as a node named by the hostname "Node-1"
// (NODE_NAME unset), so tests don't depend on the machine.
func testOptions(target OS) LoadOptions {
	return LoadOptions{
		OS:       target,
		Getenv:   func(string) string { return "" },
		Hostname: func() (string, error) { return "Node-1", nil },
	}
}

func duration(d time.Duration) metav1.Duration     { return metav1.Duration{Duration: d} }
func durationPtr(d time.Duration) *metav1.Duration { return &metav1.Duration{Duration: d} }

// fieldErr is the part of a field.Error tests assert on: its type and
// path, not its wording.
type fieldErr struct {
	Type  field.ErrorType
	Field string
}

func fieldErrs(errs field.ErrorList) []fieldErr {
	var out []fieldErr
	for _, e := range errs {
		out = append(out, fieldErr{e.Type, e.Field})
	}
	return out
}

// mustLoad loads a config that must be valid.
func mustLoad(t *testing.T, data []byte, opts LoadOptions) (*AgentConfiguration, Warnings) {
	t.Helper()
	cfg, warnings, err := Load(data, opts)
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	return cfg, warnings
}

// loadInvalid loads a config that must decode but be invalid, and returns
// its field errors.
func loadInvalid(t *testing.T, data []byte, opts LoadOptions) (*AgentConfiguration, field.ErrorList, Warnings) {
	t.Helper()
	cfg, warnings, err := Load(data, opts)
	var invalid *InvalidError
	if !errors.As(err, &invalid) {
		t.Fatalf("Load error = %v, want an *InvalidError", err)
	}
	if cfg == nil {
		t.Fatal("Load returned no config with its *InvalidError")
	}
	return cfg, invalid.Errors, warnings
}

func diffErrs(t *testing.T, got field.ErrorList, want []fieldErr) {
	t.Helper()
	if diff := cmp.Diff(want, fieldErrs(got)); diff != "" {
		t.Errorf("field errors (-want +got):\n%s\nall errors: %v", diff, got)
	}
}

func diffWarnings(t *testing.T, got Warnings, want []string) {
	t.Helper()
	var fields []string
	for _, w := range got {
		fields = append(fields, w.Field)
	}
	if diff := cmp.Diff(want, fields); diff != "" {
		t.Errorf("warning fields (-want +got):\n%s\nall warnings: %q", diff, got.Strings())
	}
}

func prefixStrings[P interface{ String() string }](ps []P) []string {
	var out []string
	for _, p := range ps {
		out = append(out, p.String())
	}
	return out
}

// The defaults every loaded config gets, as the tests expect them.

func wantLinuxCNI() CNIConfiguration {
	return CNIConfiguration{
		SocketPath:   "/var/run/nodenet/cni.sock",
		ConfDir:      "/etc/cni/net.d",
		ConflistName: "10-nodenet.conflist",
		BinDir:       "/opt/cni/bin",
		DataDir:      "/var/lib/nodenet",
		// containerd's socket; addresses no sandbox holds go after 5m.
		RuntimeEndpoint:   "unix:///run/containerd/containerd.sock",
		OrphanGracePeriod: durationPtr(5 * time.Minute),
	}
}

func wantWindowsCNI() CNIConfiguration {
	return CNIConfiguration{
		SocketPath:   `C:\ProgramData\nodenet\cni.sock`,
		ConfDir:      `C:\etc\cni\net.d`,
		ConflistName: "10-nodenet.conflist",
		BinDir:       `C:\opt\cni\bin`,
		DataDir:      `C:\ProgramData\nodenet`,
		// containerd's pipe; addresses no sandbox holds go after 5m.
		RuntimeEndpoint:   "npipe:////./pipe/containerd-containerd",
		OrphanGracePeriod: durationPtr(5 * time.Minute),
	}
}

func wantDefaultConntrack() ConntrackConfiguration {
	return ConntrackConfiguration{
		MaxPerCore:            ptr(int32(32768)),
		Min:                   ptr(int32(131072)),
		TCPEstablishedTimeout: durationPtr(24 * time.Hour),
		TCPCloseWaitTimeout:   durationPtr(time.Hour),
	}
}

// checkImport loads an imported file (kube-proxy or flannel), which always
// lacks serviceCIDRs, and compares the result and warnings.
func checkImport(t *testing.T, file string, target OS, want *AgentConfiguration, wantWarnings []string) {
	t.Helper()
	data, err := os.ReadFile("testdata/" + file)
	if err != nil {
		t.Fatal(err)
	}
	cfg, errs, warnings := loadInvalid(t, data, testOptions(target))
	diffErrs(t, errs, []fieldErr{serviceCIDRsRequired})
	diffWarnings(t, warnings, wantWarnings)
	if diff := cmp.Diff(want, cfg); diff != "" {
		t.Errorf("config (-want +got):\n%s", diff)
	}
}

// wantDefaultConfig is what the minimal config (cluster and service CIDRs
// only) loads as on a node named "node-1".
func wantDefaultConfig(cni CNIConfiguration) *AgentConfiguration {
	return &AgentConfiguration{
		TypeMeta:       metav1.TypeMeta{APIVersion: "nodenet.io/v1alpha1", Kind: "AgentConfiguration"},
		ClusterCIDRs:   []string{"10.244.0.0/16"},
		ServiceCIDRs:   []string{"10.96.0.0/12"},
		NodeName:       "node-1",
		IPFamilyPolicy: IPFamilyPolicySingleStack,
		SyncPeriod:     duration(30 * time.Second),
		MinSyncPeriod:  durationPtr(time.Second),
		ConfigHardFail: ptr(true),
		Network: NetworkConfiguration{
			Mode:              NetworkModeOverlay,
			Name:              "nodenet",
			VXLAN:             &VXLANConfiguration{VNI: 4096, Port: 4789},
			SourceVIP:         "auto",
			PodCIDRAllocation: PodCIDRAllocationController,
		},
		Proxy: ProxyConfiguration{
			DetectLocal:        DetectLocalConfiguration{Mode: DetectLocalClusterCIDR, ClusterCIDRs: []string{"10.244.0.0/16"}},
			NodePortAddresses:  []string{"primary"},
			HealthzBindAddress: "0.0.0.0:10256",
			MetricsBindAddress: "127.0.0.1:10249",
		},
		CNI:     cni,
		Windows: WindowsConfiguration{},
		Linux:   LinuxConfiguration{MasqueradePodEgress: ptr(true), Conntrack: wantDefaultConntrack()},
	}
}
