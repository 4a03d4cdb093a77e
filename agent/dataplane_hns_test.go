package agent

// Address plan: the simulated host holds 192.168.1.11/24 on "Ethernet";
// pod CIDR 10.244.1.0/24 (gateway .1, source VIP .2), VNI 4096.

import (
	"context"
	"net/netip"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2/ktesting"

	"github.com/nodenet/nodenet/config"
	"github.com/nodenet/nodenet/hns"
	"github.com/nodenet/nodenet/overlay"
	"github.com/nodenet/nodenet/overlay/hnsnet"
	"github.com/nodenet/nodenet/overlay/hostroute"
)

func TestHNSDumpShowsWhatTheNetworkPartMade(t *testing.T) {
	ctx := t.Context()
	adapter := simulatedAdapter([]netip.Addr{ip("192.168.1.11")}, hostPrefixOf)
	adapter.IPs = []netip.Prefix{prefix("192.168.1.11/24")}
	sim := hns.NewSimulator(hns.SimulatorOptions{HostAdapters: []hns.HostAdapter{{Name: adapter.Name, IPs: []string{"192.168.1.11"}, MAC: dashMAC(adapter.MAC)}}})
	cfg := testConfig(t, config.OSWindows, config.NetworkModeOverlay, nil)
	dp, err := buildHNS(hnsParts{
		hns:      sim,
		routes:   hostroute.NewFake(),
		adapters: func(context.Context) ([]hnsnet.Adapter, error) { return []hnsnet.Adapter{adapter}, nil },
	}, buildInputs{cfg: cfg, logger: ktesting.NewLogger(t, ktesting.NewConfig())})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := dp.network.EnsureLocal(ctx, overlay.LocalSpec{
		Mode: config.NetworkModeOverlay, Name: "nodenet",
		PodCIDRs:  []netip.Prefix{prefix("10.244.1.0/24")},
		Gateways:  []netip.Addr{ip("10.244.1.1")},
		NodeIP:    ip("192.168.1.11"),
		SourceVIP: ip("10.244.1.2"),
		VNI:       4096, Port: 4789,
	}); err != nil {
		t.Fatalf("EnsureLocal: %v", err)
	}
	sections, err := dp.dump(ctx)
	if err != nil {
		t.Fatal(err)
	}
	titles := map[string]string{}
	for _, s := range sections {
		titles[s.Title] = s.Text
	}
	for title, wants := range map[string][]string{
		"HNS networks (1)":       {`"Name": "nodenet"`, `"Type": "Overlay"`, "10.244.1.0/24"},
		"HNS endpoints (1)":      {`"Name": "nodenet_sourcevip"`, `"IpAddress": "10.244.1.2"`},
		"HNS load balancers (0)": nil,
	} {
		text, ok := titles[title]
		if !ok {
			t.Errorf("no section %q in %v", title, sections)
			continue
		}
		for _, want := range wants {
			if !strings.Contains(text, want) {
				t.Errorf("section %q does not hold %s:\n%s", title, want, text)
			}
		}
	}
}

func TestNodeIPs(t *testing.T) {
	node := &v1.Node{Status: v1.NodeStatus{Addresses: []v1.NodeAddress{
		{Type: v1.NodeExternalIP, Address: "203.0.113.11"},
		{Type: v1.NodeInternalIP, Address: "192.168.1.11"},
		{Type: v1.NodeInternalIP, Address: "fd00::11"},
	}}}
	for _, tc := range []struct {
		name     string
		override []string
		node     *v1.Node
		want     []netip.Addr
	}{
		{name: "the Node's InternalIPs, IPv4 first", node: node, want: []netip.Addr{ip("192.168.1.11"), ip("fd00::11")}},
		{name: "nodeIPOverride wins for its family", override: []string{"192.168.1.99"}, node: node, want: []netip.Addr{ip("192.168.1.99"), ip("fd00::11")}},
		{name: "no Node yet: only the override", override: []string{"192.168.1.99"}, want: []netip.Addr{ip("192.168.1.99")}},
		{name: "no Node and no override: nothing", want: nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := &config.AgentConfiguration{NodeIPOverride: tc.override}
			got := NodeIPs(cfg, tc.node)
			if len(got) != len(tc.want) {
				t.Fatalf("nodeIPs = %v, want %v", got, tc.want)
			}
			for i := range got {
				if got[i] != tc.want[i] {
					t.Errorf("nodeIPs = %v, want %v", got, tc.want)
				}
			}
		})
	}
}
