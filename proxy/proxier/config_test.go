package proxier

import (
	"net/netip"
	"os"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/nodenet/nodenet/config"
	"github.com/nodenet/nodenet/proxy"
)

func loadConfig(t *testing.T, path string, osName config.OS) *config.AgentConfiguration {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	cfg, _, err := config.Load(data, config.LoadOptions{OS: osName, Getenv: func(string) string { return "" }, Hostname: func() (string, error) { return "node", nil }})
	if err != nil {
		t.Fatalf("load %s: %v", path, err)
	}
	return cfg
}

func TestConfigTranslation(t *testing.T) {
	dual := Node{
		Name:     "linux-node-1",
		IPs:      []netip.Addr{netip.MustParseAddr("192.168.10.11"), netip.MustParseAddr("fd00:192:168:10::11")},
		PodCIDRs: []netip.Prefix{netip.MustParsePrefix("10.244.3.0/24"), netip.MustParsePrefix("fd00:10:244:3::/64")},
	}
	tests := []struct {
		name          string
		config        string
		os            config.OS
		node          Node
		wantFamilies  []proxy.IPFamily
		wantDSR       bool
		wantLocal     []string
		wantNodePorts []string
		wantErr       bool
	}{{
		name:          "a minimal config proxies IPv4, detects pods by the cluster CIDR and serves node ports on the primary IP",
		config:        "../../config/testdata/agent-minimal.yaml",
		os:            config.OSLinux,
		node:          Node{Name: "n", IPs: []netip.Addr{netip.MustParseAddr("192.168.1.5")}},
		wantFamilies:  []proxy.IPFamily{proxy.IPv4},
		wantLocal:     []string{"10.244.0.0/16"},
		wantNodePorts: []string{"192.168.1.5/32"},
	}, {
		name:          "a dual-stack NodeCIDR config detects pods by this node's pod CIDRs and keeps node-port CIDRs beside the primary IPs",
		config:        "../../config/testdata/agent-linux-l2bridge.yaml",
		os:            config.OSLinux,
		node:          dual,
		wantFamilies:  []proxy.IPFamily{proxy.IPv4, proxy.IPv6},
		wantLocal:     []string{"10.244.3.0/24", "fd00:10:244:3::/64"},
		wantNodePorts: []string{"192.168.10.11/32", "fd00:192:168:10::11/128", "192.168.10.0/24"},
	}, {
		name:          "a Windows overlay config runs IPv4 only with DSR, even on a dual-stack node",
		config:        "../../config/testdata/agent-windows-overlay.yaml",
		os:            config.OSWindows,
		node:          dual,
		wantFamilies:  []proxy.IPFamily{proxy.IPv4},
		wantDSR:       true,
		wantLocal:     []string{"10.244.0.0/16"},
		wantNodePorts: []string{"192.168.10.11/32"},
	}, {
		name:    "primary node-port addresses without a node IP of a proxied family are an error naming the field",
		config:  "../../config/testdata/agent-minimal.yaml",
		os:      config.OSLinux,
		node:    Node{Name: "n", IPs: []netip.Addr{netip.MustParseAddr("fd00::5")}},
		wantErr: true,
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := loadConfig(t, tt.config, tt.os)
			ports, err := NodePortPrefixes(cfg, tt.node)
			if tt.wantErr {
				if err == nil {
					t.Fatalf("NodePortPrefixes = %v, want an error", ports)
				}
				if got := err.Error(); !strings.Contains(got, "proxy.nodePortAddresses[0]") {
					t.Errorf("error %q does not name the field", got)
				}
				return
			}
			if err != nil {
				t.Fatalf("NodePortPrefixes: %v", err)
			}
			b := BrainOptions(cfg, tt.node)
			if diff := cmp.Diff(tt.wantFamilies, b.Families); diff != "" {
				t.Errorf("families (-want +got):\n%s", diff)
			}
			if b.DSR != tt.wantDSR || b.NodeName != tt.node.Name {
				t.Errorf("brain options %+v, want DSR %v and node %q", b, tt.wantDSR, tt.node.Name)
			}
			if diff := cmp.Diff(tt.wantLocal, prefixStrings(LocalTrafficCIDRs(cfg, tt.node))); diff != "" {
				t.Errorf("local traffic CIDRs (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.wantNodePorts, prefixStrings(ports)); diff != "" {
				t.Errorf("node-port prefixes (-want +got):\n%s", diff)
			}
			h := HNSOptions(cfg, nil)
			// An unset limit stays 0: hnslb then takes the host's.
			if h.EnableDSR != tt.wantDSR || h.MaxBackendsPerLoadBalancer != int(cfg.Windows.MaxBackendsPerLoadBalancer) || h.HealthzPort != 10256 {
				t.Errorf("HNS options %+v, want DSR %v, the config's backend limit (%d), healthz port 10256", h, tt.wantDSR, cfg.Windows.MaxBackendsPerLoadBalancer)
			}
			if got, want := prefixStrings(h.ClusterCIDRs), prefixStrings(cfg.EffectiveClusterCIDRs()); !cmp.Equal(got, want) {
				t.Errorf("HNS cluster CIDRs %v, want the effective ones %v", got, want)
			}
		})
	}
}

func prefixStrings(ps []netip.Prefix) []string {
	var out []string
	for _, p := range ps {
		out = append(out, p.String())
	}
	return out
}
