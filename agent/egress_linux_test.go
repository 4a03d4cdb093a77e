package agent

import (
	"context"
	"net/netip"
	"os/exec"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/klog/v2/ktesting"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/knftables"

	"github.com/nodenet/nodenet/config"
	"github.com/nodenet/nodenet/internal/nsexec"
	"github.com/nodenet/nodenet/internal/testroot"
	"github.com/nodenet/nodenet/overlay"
	"github.com/nodenet/nodenet/overlay/egress"
)

// egressRules are the rules of the fake's egress table, or nil without one.
func egressRules(t *testing.T, fake *knftables.Fake) []string {
	t.Helper()
	if fake.Table == nil {
		return nil
	}
	rules, err := fake.ListRules(context.Background(), "")
	if err != nil {
		t.Fatal(err)
	}
	out := []string{}
	for _, r := range rules {
		out = append(out, r.Rule)
	}
	return out
}

// linuxEgress is a Linux agent's pod egress step over a fake nftables.
func linuxEgress(t *testing.T, cfg *config.AgentConfiguration) (*Agent, *dataplane, *knftables.Fake) {
	t.Helper()
	fake := knftables.NewFake(knftables.InetFamily, egress.TableName)
	log := ktesting.NewLogger(t, ktesting.NewConfig())
	e, err := egress.New(egress.Options{NFT: fake, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	return &Agent{cfg: cfg, log: log}, &dataplane{podEgress: podEgress(cfg, e)}, fake
}

func TestTheLinuxAgentMasqueradesPodEgressWhenTheConfigSaysSo(t *testing.T) {
	overlayLocal := &overlay.LocalNetwork{PodCIDRs: []netip.Prefix{prefix("10.244.1.0/24")}, NodeIP: ip("192.168.1.11")}
	bridgeLocal := &overlay.LocalNetwork{
		PodCIDRs: []netip.Prefix{prefix("10.244.1.0/24"), prefix("fd00:10:244:1::/64")},
		NodeIP:   ip("192.168.1.11"), NodeIPv6: ip("fd00::11"),
	}
	v4Rule := "ip saddr 10.244.1.0/24 ip daddr != { 10.244.0.0/16, 224.0.0.0/4 } masquerade fully-random"
	v6Rule := "ip6 saddr fd00:10:244:1::/64 ip6 daddr != { fd00:10:244::/56, ff00::/8 } masquerade fully-random"
	for _, tc := range []struct {
		name        string
		cfg         *config.AgentConfiguration
		local       *overlay.LocalNetwork
		tableBefore bool
		want        []string
	}{
		{
			name:  "by default an overlay node masquerades its IPv4 pods leaving the cluster",
			cfg:   testConfig(t, config.OSLinux, config.NetworkModeOverlay, nil),
			local: overlayLocal,
			want:  []string{v4Rule},
		},
		{
			name: "a dual-stack l2bridge node masquerades both families",
			cfg: testConfig(t, config.OSLinux, config.NetworkModeL2Bridge, func(c *config.AgentConfiguration) {
				c.IPFamilyPolicy = config.IPFamilyPolicyPreferDualStack
			}),
			local: bridgeLocal,
			want:  []string{v4Rule, v6Rule},
		},
		{
			name: "turned off, no table is created",
			cfg: testConfig(t, config.OSLinux, config.NetworkModeOverlay, func(c *config.AgentConfiguration) {
				c.Linux.MasqueradePodEgress = ptr.To(false)
			}),
			local: overlayLocal,
			want:  nil,
		},
		{
			name: "turned off, the table an earlier run left is removed",
			cfg: testConfig(t, config.OSLinux, config.NetworkModeOverlay, func(c *config.AgentConfiguration) {
				c.Linux.MasqueradePodEgress = ptr.To(false)
			}),
			local:       overlayLocal,
			tableBefore: true,
			want:        nil,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, dp, fake := linuxEgress(t, tc.cfg)
			ctx := context.Background()
			if tc.tableBefore {
				earlier, err := egress.New(egress.Options{NFT: fake})
				if err != nil {
					t.Fatal(err)
				}
				if _, err := earlier.Ensure(ctx, podEgressSpec(tc.cfg, tc.local)); err != nil {
					t.Fatal(err)
				}
			}
			if err := a.syncPodEgress(ctx, dp, tc.local); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, egressRules(t, fake)); diff != "" {
				t.Errorf("egress rules (-want +got):\n%s", diff)
			}
			// What the agent's keeper does every sync period: nothing
			// changed, nothing written.
			fake.LastTransaction = nil
			if err := a.syncPodEgress(ctx, dp, nil); err != nil {
				t.Fatal(err)
			}
			if fake.LastTransaction != nil {
				t.Errorf("a sync with nothing changed wrote:\n%s", fake.LastTransaction)
			}
		})
	}
}

func TestThePodEgressKeeperRepairsTheTableWithTheNewestNetwork(t *testing.T) {
	cfg := testConfig(t, config.OSLinux, config.NetworkModeOverlay, nil)
	a, dp, fake := linuxEgress(t, cfg)
	ctx := context.Background()
	if err := a.syncPodEgress(ctx, dp, nil); err != nil {
		t.Fatal(err)
	}
	if fake.Table != nil || fake.LastTransaction != nil {
		t.Fatalf("a sync before the network was ready wrote:\n%s", fake.Dump())
	}
	for _, cidr := range []string{"10.244.1.0/24", "10.244.7.0/24"} {
		if err := a.syncPodEgress(ctx, dp, &overlay.LocalNetwork{PodCIDRs: []netip.Prefix{prefix(cidr)}}); err != nil {
			t.Fatal(err)
		}
	}
	tx := fake.NewTransaction()
	tx.Delete(&knftables.Table{})
	if err := fake.Run(ctx, tx); err != nil {
		t.Fatal(err)
	}
	if err := a.syncPodEgress(ctx, dp, nil); err != nil {
		t.Fatal(err)
	}
	want := []string{"ip saddr 10.244.7.0/24 ip daddr != { 10.244.0.0/16, 224.0.0.0/4 } masquerade fully-random"}
	if diff := cmp.Diff(want, egressRules(t, fake)); diff != "" {
		t.Errorf("egress rules after the repair (-want +got):\n%s", diff)
	}
}

func TestTheLinuxDataplaneCreatesTheEgressTableOnlyWhenEnabled(t *testing.T) {
	testroot.Require(t, "a network namespace and nftables")
	local := &overlay.LocalNetwork{PodCIDRs: []netip.Prefix{prefix("10.244.1.0/24")}, NodeIP: ip("192.168.1.11")}
	for _, tc := range []struct {
		name      string
		enabled   bool
		wantTable bool
	}{
		{name: "enabled, the node gets table inet nodenet-egress", enabled: true, wantTable: true},
		{name: "disabled, the node gets no egress table", enabled: false, wantTable: false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := testConfig(t, config.OSLinux, config.NetworkModeOverlay, func(c *config.AgentConfiguration) {
				c.Linux.MasqueradePodEgress = ptr.To(tc.enabled)
			})
			a := &Agent{cfg: cfg, log: ktesting.NewLogger(t, ktesting.NewConfig())}
			node, err := nsexec.New()
			if err != nil {
				t.Fatal(err)
			}
			defer node.Close()
			var tables string
			err = nsexec.Do(node, func() error {
				dp, err := buildLinux(buildInputs{cfg: cfg, logger: a.log})
				if err != nil {
					return err
				}
				defer dp.close()
				if err := a.syncPodEgress(context.Background(), dp, local); err != nil {
					return err
				}
				out, err := exec.Command("nft", "list", "tables").CombinedOutput()
				tables = string(out)
				return err
			})
			if err != nil {
				t.Fatal(err)
			}
			if got := strings.Contains(tables, "table inet "+egress.TableName+"\n"); got != tc.wantTable {
				t.Errorf("nft list tables:\n%s\nwant the egress table: %v", tables, tc.wantTable)
			}
		})
	}
}
