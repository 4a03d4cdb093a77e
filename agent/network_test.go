package agent

// Address plan: node IPs 192.168.1.11 and fd00::11; pod CIDRs
// 10.244.1.0/24 (gateway .1, source VIP .2) and fd00:10:244:1::/64 in
// cluster CIDRs 10.244.0.0/16 and fd00:10:244::/56; service CIDRs
// 10.96.0.0/12 and fd00:10:96::/112; the uplink subnet 192.168.1.0/24.

import (
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/nodenet/nodenet/cni"
	"github.com/nodenet/nodenet/config"
	"github.com/nodenet/nodenet/overlay"
	"github.com/nodenet/nodenet/proxy"
	"github.com/nodenet/nodenet/proxy/brain"
	"github.com/nodenet/nodenet/proxy/proxier"
)

var (
	ip     = netip.MustParseAddr
	prefix = netip.MustParsePrefix
)

// testConfig is a defaulted, valid config for os with mode and extra
// changes applied.
func testConfig(t *testing.T, os config.OS, mode config.NetworkMode, change func(*config.AgentConfiguration)) *config.AgentConfiguration {
	t.Helper()
	cfg := &config.AgentConfiguration{
		ClusterCIDRs: []string{"10.244.0.0/16", "fd00:10:244::/56"},
		ServiceCIDRs: []string{"10.96.0.0/12", "fd00:10:96::/112"},
		NodeName:     "node-a",
	}
	cfg.Network.Mode = mode
	if change != nil {
		change(cfg)
	}
	config.SetDefaults(cfg, config.DefaultingOptions{OS: os, Getenv: func(string) string { return "" }, Hostname: func() (string, error) { return "node-a", nil }})
	if errs, _ := config.Validate(cfg, config.ValidationOptions{OS: os}); len(errs) > 0 {
		t.Fatalf("test config: %v", errs.ToAggregate())
	}
	return cfg
}

func TestNodeNetwork(t *testing.T) {
	overlayLocal := &overlay.LocalNetwork{
		Mode:        config.NetworkModeOverlay,
		Name:        "nodenet",
		ID:          "net-1",
		PodCIDRs:    []netip.Prefix{prefix("10.244.1.0/24")},
		Gateways:    []netip.Addr{ip("10.244.1.1")},
		SourceVIP:   ip("10.244.1.2"),
		Reserved:    []netip.Addr{ip("10.244.1.2")},
		MTU:         1450,
		NodeIP:      ip("192.168.1.11"),
		NodeSubnets: []netip.Prefix{prefix("192.168.1.0/24")},
	}
	bridgeLocal := &overlay.LocalNetwork{
		Mode:     config.NetworkModeL2Bridge,
		Name:     "cbr0",
		PodCIDRs: []netip.Prefix{prefix("10.244.1.0/24"), prefix("fd00:10:244:1::/64")},
		Gateways: []netip.Addr{ip("10.244.1.1"), ip("fd00:10:244:1::1")},
		MTU:      1500,
		NodeIP:   ip("192.168.1.11"),
		NodeIPv6: ip("fd00::11"),
	}
	for _, tc := range []struct {
		name  string
		cfg   *config.AgentConfiguration
		local *overlay.LocalNetwork
		want  *cni.NodeNetwork
	}{
		{
			name:  "a Windows overlay node hands over its source VIP, DSR and only the IPv4 cluster CIDRs",
			cfg:   testConfig(t, config.OSWindows, config.NetworkModeOverlay, func(c *config.AgentConfiguration) { c.Proxy.EnableDSR = true }),
			local: overlayLocal,
			want: &cni.NodeNetwork{
				Mode: config.NetworkModeOverlay, Name: "nodenet", ID: "net-1",
				PodCIDRs:     []netip.Prefix{prefix("10.244.1.0/24")},
				Gateways:     []netip.Addr{ip("10.244.1.1")},
				SourceVIP:    ip("10.244.1.2"),
				Reserved:     []netip.Addr{ip("10.244.1.2")},
				MTU:          1450,
				ClusterCIDRs: []netip.Prefix{prefix("10.244.0.0/16")},
				ServiceCIDRs: []netip.Prefix{prefix("10.96.0.0/12")},
				NodeIPs:      []netip.Addr{ip("192.168.1.11")},
				NodeSubnets:  []netip.Prefix{prefix("192.168.1.0/24")},
				EnableDSR:    true,
			},
		},
		{
			name: "a dual-stack l2bridge node hands over both families and both node IPs",
			cfg: testConfig(t, config.OSLinux, config.NetworkModeL2Bridge, func(c *config.AgentConfiguration) {
				c.IPFamilyPolicy = config.IPFamilyPolicyRequireDualStack
			}),
			local: bridgeLocal,
			want: &cni.NodeNetwork{
				Mode: config.NetworkModeL2Bridge, Name: "cbr0",
				PodCIDRs:     []netip.Prefix{prefix("10.244.1.0/24"), prefix("fd00:10:244:1::/64")},
				Gateways:     []netip.Addr{ip("10.244.1.1"), ip("fd00:10:244:1::1")},
				MTU:          1500,
				ClusterCIDRs: []netip.Prefix{prefix("10.244.0.0/16"), prefix("fd00:10:244::/56")},
				ServiceCIDRs: []netip.Prefix{prefix("10.96.0.0/12"), prefix("fd00:10:96::/112")},
				NodeIPs:      []netip.Addr{ip("192.168.1.11"), ip("fd00::11")},
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := NodeNetwork(tc.cfg, tc.local)
			if diff := cmp.Diff(tc.want, got, cmp.Comparer(func(a, b netip.Addr) bool { return a == b }), cmp.Comparer(func(a, b netip.Prefix) bool { return a == b })); diff != "" {
				t.Errorf("NodeNetwork (-want +got):\n%s", diff)
			}
			// The CNI server gets its own copy of the network's lists.
			got.PodCIDRs[0] = prefix("10.0.0.0/8")
			if tc.local.PodCIDRs[0] == prefix("10.0.0.0/8") {
				t.Error("NodeNetwork shares PodCIDRs with the LocalNetwork")
			}
		})
	}
}

func TestProxierOptions(t *testing.T) {
	local := &overlay.LocalNetwork{
		Mode:     config.NetworkModeOverlay,
		PodCIDRs: []netip.Prefix{prefix("10.244.1.0/24")},
		NodeIP:   ip("192.168.1.11"),
	}
	for _, tc := range []struct {
		name    string
		cfg     *config.AgentConfiguration
		node    proxier.Node
		want    proxier.Options
		wantErr string
	}{
		{
			name: "an overlay node proxies IPv4 only, with the config's periods and DSR",
			cfg: testConfig(t, config.OSWindows, config.NetworkModeOverlay, func(c *config.AgentConfiguration) {
				c.Proxy.EnableDSR = true
			}),
			node: ProxyNode("node-a", local),
			want: proxier.Options{
				Brain:         brainOpts("node-a", true, proxy.IPv4),
				SyncPeriod:    config.DefaultSyncPeriod,
				MinSyncPeriod: config.DefaultMinSyncPeriod,
			},
		},
		{
			name: "a dual-stack l2bridge node proxies both families",
			cfg: testConfig(t, config.OSLinux, config.NetworkModeL2Bridge, func(c *config.AgentConfiguration) {
				c.IPFamilyPolicy = config.IPFamilyPolicyPreferDualStack
				c.Proxy.NodePortAddresses = []string{"192.168.1.0/24"}
			}),
			node: proxier.Node{Name: "node-a", IPs: []netip.Addr{ip("192.168.1.11"), ip("fd00::11")}},
			want: proxier.Options{
				Brain:         brainOpts("node-a", false, proxy.IPv4, proxy.IPv6),
				SyncPeriod:    config.DefaultSyncPeriod,
				MinSyncPeriod: config.DefaultMinSyncPeriod,
			},
		},
		{
			name:    "nodePortAddresses primary without a node IP of the family is an error naming the field",
			cfg:     testConfig(t, config.OSLinux, config.NetworkModeOverlay, nil),
			node:    proxier.Node{Name: "node-a"},
			wantErr: "proxy.nodePortAddresses[0]",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ProxierOptions(tc.cfg, tc.node)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want one naming %s", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			w, g := tc.want.Brain, got.Brain
			if g.NodeName != w.NodeName || g.DSR != w.DSR || !slices.Equal(g.Families, w.Families) {
				t.Errorf("brain options node %q DSR %v families %v, want %q %v %v", g.NodeName, g.DSR, g.Families, w.NodeName, w.DSR, w.Families)
			}
			if got.SyncPeriod != tc.want.SyncPeriod || got.MinSyncPeriod != tc.want.MinSyncPeriod {
				t.Errorf("periods %v/%v, want %v/%v", got.SyncPeriod, got.MinSyncPeriod, tc.want.SyncPeriod, tc.want.MinSyncPeriod)
			}
		})
	}
}

func TestProxyNodeTakesTheNetworksFacts(t *testing.T) {
	local := &overlay.LocalNetwork{
		PodCIDRs: []netip.Prefix{prefix("10.244.1.0/24"), prefix("fd00:10:244:1::/64")},
		NodeIP:   ip("192.168.1.11"),
		NodeIPv6: ip("fd00::11"),
	}
	want := proxier.Node{
		Name:     "node-a",
		IPs:      []netip.Addr{ip("192.168.1.11"), ip("fd00::11")},
		PodCIDRs: []netip.Prefix{prefix("10.244.1.0/24"), prefix("fd00:10:244:1::/64")},
	}
	if got := ProxyNode("node-a", local); !sameNode(got, want) {
		t.Errorf("ProxyNode = %+v, want %+v", got, want)
	}
}

func brainOpts(node string, dsr bool, families ...proxy.IPFamily) brain.Options {
	return brain.Options{NodeName: node, DSR: dsr, Families: families}
}
