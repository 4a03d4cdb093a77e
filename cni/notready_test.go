package cni_test

// Address plan: as server_test.go.

import (
	"context"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/containernetworking/cni/pkg/types"

	"github.com/nodenet/nodenet/cni"
	"github.com/nodenet/nodenet/cni/hnsendpoint"
	"github.com/nodenet/nodenet/config"
	"github.com/nodenet/nodenet/hns"
)

type settableClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *settableClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *settableClock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// HNS returns from CreateNetwork before an Overlay network is usable (its
// provider address comes later): until it is, ADD answers "try again
// later" (code 11) and leaves no address or endpoint behind; then the
// runtime's retry succeeds.
func TestAddSaysTryAgainLaterUntilTheNetworkIsReady(t *testing.T) {
	ctx := context.Background()
	clock := &settableClock{now: time.Unix(1000, 0)}
	sim := hns.NewSimulator(hns.SimulatorOptions{NetworkReadyDelay: 3 * time.Second, Now: clock.Now,
		HostAdapters: []hns.HostAdapter{{Name: "Ethernet", IPs: []string{"192.168.1.11"}}}})
	network, err := sim.CreateNetwork(ctx, &hns.Network{
		Name: "nodenet", Type: hns.NetworkTypeOverlay, Flags: hns.NetworkFlagsEnableNonPersistent,
		Policies: []hns.NetworkPolicy{{Type: hns.NetworkPolicyNetAdapterName, NetAdapterName: &hns.NetAdapterNamePolicy{NetworkAdapterName: "Ethernet"}}},
		Ipams: []hns.IPAM{{Type: "Static", Subnets: []hns.Subnet{{
			IpAddressPrefix: "10.244.1.0/24",
			Routes:          []hns.Route{{NextHop: "10.244.1.1", DestinationPrefix: "0.0.0.0/0"}},
			Policies:        []hns.SubnetPolicy{{Type: hns.SubnetPolicyVSID, Isolation: &hns.IsolationPolicy{IsolationID: 4096}}},
		}}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	w, err := hnsendpoint.New(hnsendpoint.Options{HNS: sim})
	if err != nil {
		t.Fatal(err)
	}
	dir, err := os.MkdirTemp("", "nn-nr-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	n := &simNode{sim: sim, network: network, dir: dir, ipamDir: filepath.Join(dir, "ipam"), socket: filepath.Join(dir, "cni.sock")}
	if n.server, err = cni.NewServer(cni.ServerOptions{SocketPath: n.socket, IPAMDir: n.ipamDir, Wiring: w}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.server.Close() })
	err = n.server.SetNetwork(&cni.NodeNetwork{
		Mode: config.NetworkModeOverlay, Name: "nodenet", ID: network.ID,
		PodCIDRs: []netip.Prefix{netip.MustParsePrefix("10.244.1.0/24")}, Gateways: []netip.Addr{netip.MustParseAddr("10.244.1.1")},
		SourceVIP: netip.MustParseAddr("10.244.1.2"), MTU: 1450,
		ClusterCIDRs: []netip.Prefix{netip.MustParsePrefix("10.244.0.0/16")}, ServiceCIDRs: []netip.Prefix{netip.MustParsePrefix("10.96.0.0/12")},
		NodeIPs: []netip.Addr{netip.MustParseAddr("192.168.1.11")}, NodeSubnets: []netip.Prefix{netip.MustParsePrefix("192.168.1.0/24")},
	})
	if err != nil {
		t.Fatal(err)
	}
	ns, err := sim.CreateNamespace(ctx, &hns.Namespace{Type: hns.NamespaceTypeHost})
	if err != nil {
		t.Fatal(err)
	}
	n.podNS = ns.ID

	for _, wait := range []time.Duration{0, 2 * time.Second} {
		clock.advance(wait)
		resp := n.server.Handle(ctx, n.addRequest("c1"))
		if resp.Error == nil || resp.Error.Code != types.ErrTryAgainLater || !strings.Contains(resp.Error.Msg+resp.Error.Details, "not ready") {
			t.Fatalf("ADD before the network is ready answered %+v, want code %d saying it is not ready", resp.Error, types.ErrTryAgainLater)
		}
		if a, e := n.allocations(t), n.podEndpoints(t); a != 0 || e != 0 {
			t.Fatalf("a refused ADD left %d allocations and %d pod endpoints", a, e)
		}
	}
	clock.advance(time.Second)
	if resp := n.server.Handle(ctx, n.addRequest("c1")); resp.Error != nil {
		t.Fatalf("ADD once the network is ready: %+v", resp.Error)
	}
	if n.podEndpoints(t) != 1 {
		t.Errorf("%d pod endpoints after the retried ADD, want 1", n.podEndpoints(t))
	}
}
