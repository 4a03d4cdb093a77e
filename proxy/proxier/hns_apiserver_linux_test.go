package proxier_test

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"sort"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2/ktesting"
	"k8s.io/utils/ptr"

	"github.com/nodenet/nodenet/config"
	"github.com/nodenet/nodenet/hns"
	"github.com/nodenet/nodenet/overlay"
	"github.com/nodenet/nodenet/overlay/hnsnet"
	"github.com/nodenet/nodenet/overlay/hostroute"
	"github.com/nodenet/nodenet/proxy"
	"github.com/nodenet/nodenet/proxy/brain"
	"github.com/nodenet/nodenet/proxy/hnslb"
	"github.com/nodenet/nodenet/proxy/proxier"
	"github.com/nodenet/nodenet/proxy/source"
	"github.com/nodenet/nodenet/test/apiserver"
)

// A simulated Windows overlay node: node-a at 192.168.1.11 with pods in
// 10.244.1.0/24 and source VIP 10.244.1.2; node-b (192.168.2.2, pods
// 10.244.2.0/24) is the one remote node.
const (
	winNodeIP    = "192.168.1.11"
	winSourceVIP = "10.244.1.2"
	localPod     = "10.244.1.10"
	remotePod    = "10.244.2.10"
	remoteNodeIP = "192.168.2.2"
)

// newWindowsNode builds the node network on an HNS simulator the way the
// network part does (hnsnet) and creates one local pod endpoint the way
// CNI does.
func newWindowsNode(t *testing.T) (*hns.Simulator, hnslb.StaticNetwork) {
	t.Helper()
	ctx := t.Context()
	const hostMAC = "00-15-5D-01-01-0B"
	sim := hns.NewSimulator(hns.SimulatorOptions{
		HostAdapters: []hns.HostAdapter{{Name: "Ethernet", IPs: []string{winNodeIP}, MAC: hostMAC}},
	})
	routes := hostroute.NewFake()
	routes.SetInterfaces(hostroute.FakeInterface{Index: 4, Name: "Ethernet", Prefixes: []netip.Prefix{netip.MustParsePrefix("192.168.0.0/16")}})
	mac, _ := net.ParseMAC(hostMAC)
	network, err := hnsnet.New(hnsnet.Options{
		HNS: sim, HostRoutes: routes,
		Adapters: func(context.Context) ([]hnsnet.Adapter, error) {
			return []hnsnet.Adapter{{Name: "Ethernet", Index: 4, MTU: 1500, MAC: mac, IPs: []netip.Prefix{netip.MustParsePrefix(winNodeIP + "/16")}}}, nil
		},
		Logger: ktesting.NewLogger(t, ktesting.NewConfig()),
	})
	if err != nil {
		t.Fatal(err)
	}
	local, err := network.EnsureLocal(ctx, overlay.LocalSpec{
		Mode:      config.NetworkModeOverlay,
		Name:      "nodenet",
		PodCIDRs:  []netip.Prefix{netip.MustParsePrefix("10.244.1.0/24")},
		Gateways:  []netip.Addr{netip.MustParseAddr("10.244.1.1")},
		NodeIP:    netip.MustParseAddr(winNodeIP),
		SourceVIP: netip.MustParseAddr(winSourceVIP),
		VNI:       4096,
		Port:      4789,
	})
	if err != nil {
		t.Fatalf("EnsureLocal: %v", err)
	}
	remotes := []overlay.RemoteNode{{
		Name:     "node-b",
		PodCIDRs: []netip.Prefix{netip.MustParsePrefix("10.244.2.0/24")},
		NodeIP:   netip.MustParseAddr(remoteNodeIP),
		VtepMAC:  net.HardwareAddr{0x0e, 0x2a, 0, 0, 0, 2},
	}}
	if _, err := network.SyncRemotes(ctx, remotes); err != nil {
		t.Fatalf("SyncRemotes: %v", err)
	}
	if _, err := sim.CreateEndpoint(ctx, &hns.Endpoint{
		Name:               "nodenet-pod:c1:eth0",
		HostComputeNetwork: local.ID,
		IpConfigurations:   []hns.IPConfig{{IpAddress: localPod, PrefixLength: 24}},
	}); err != nil {
		t.Fatalf("create the local pod's endpoint: %v", err)
	}
	return sim, hnslb.StaticNetwork{Net: local, Nodes: remotes}
}

// delivered traces a TCP packet from the local pod to dst:port and
// returns the backend addresses it may reach, sorted, each with "via PA"
// when it leaves encapsulated.
func delivered(t *testing.T, sim *hns.Simulator, dst string, port uint16) []string {
	t.Helper()
	tr, err := sim.Trace(hns.FromEndpoint, hns.Packet{Protocol: hns.ProtocolTCP, Src: localPod, SrcPort: 40000, Dst: dst, DstPort: port})
	if err != nil {
		t.Fatalf("trace: %v", err)
	}
	var out []string
	for _, d := range tr.Deliveries {
		s := fmt.Sprintf("%s:%d", d.Packet.Dst, d.Packet.DstPort)
		if d.Encap != nil {
			s += " via " + d.Encap.ProviderAddress
		}
		out = append(out, s)
	}
	sort.Strings(out)
	return out
}

// TestHNSBackendFollowsTheAPIServer drives the HNS backend on the
// simulator from a real kube-apiserver through informers and the brain:
// a Service with a local and a remote endpoint becomes a load balancer a
// pod's packet reaches both through (the remote one tunnelled to its
// node); an endpoint change is one in-place update; deleting the
// Service removes its load balancer and the remote endpoint it used.
func TestHNSBackendFollowsTheAPIServer(t *testing.T) {
	srv := apiserver.StartForTest(t, apiserver.Options{})
	client := srv.Client()
	ctx := t.Context()
	if _, err := client.CoreV1().Nodes().Create(ctx, &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: nodeName}}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create node: %v", err)
	}
	sim, network := newWindowsNode(t)
	logger := ktesting.NewLogger(t, ktesting.NewConfig(ktesting.Verbosity(2)))
	backend, err := hnslb.New(hnslb.Options{
		HNS:          sim,
		Network:      network,
		ClusterCIDRs: []netip.Prefix{netip.MustParsePrefix("10.244.0.0/16")},
		ServiceCIDRs: []netip.Prefix{netip.MustParsePrefix("10.96.0.0/12")},
		Logger:       logger,
	})
	if err != nil {
		t.Fatalf("hnslb: %v", err)
	}
	p, err := proxier.New(proxier.Options{
		Source:        source.NewInformers(source.InformerOptions{Client: client, NodeName: nodeName, Logger: logger}),
		Backend:       backend,
		Brain:         brain.Options{NodeName: nodeName, Families: []proxy.IPFamily{proxy.IPv4}, Logger: logger},
		MinSyncPeriod: 100 * time.Millisecond,
		SyncPeriod:    time.Hour,
		Logger:        logger,
	})
	if err != nil {
		t.Fatalf("proxier: %v", err)
	}
	runCtx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Run(runCtx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("proxier run: %v", err)
		}
	}()
	waitUntil := func(what string, ok func() bool) {
		t.Helper()
		deadline := time.Now().Add(follow)
		for !ok() {
			if time.Now().After(deadline) {
				t.Fatalf("timed out after %v waiting for %s; HNS:\n%s", follow, what, sim.Dump())
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	waitUntil("the first sync", func() bool { return p.Syncs() > 0 })

	svc, err := client.CoreV1().Services(ns).Create(ctx, service("web", 80), metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create service: %v", err)
	}
	vip := svc.Spec.ClusterIP
	endpoints := func(ips ...string) *discoveryv1.EndpointSlice {
		s := slice("web", 8080)
		for _, ip := range ips {
			node := "node-b"
			if ip == localPod {
				node = nodeName
			}
			s.Endpoints = append(s.Endpoints, discoveryv1.Endpoint{
				Addresses: []string{ip}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}, NodeName: ptr.To(node),
			})
		}
		return s
	}
	if _, err := client.DiscoveryV1().EndpointSlices(ns).Create(ctx, endpoints(localPod, remotePod), metav1.CreateOptions{}); err != nil {
		t.Fatalf("create slice: %v", err)
	}
	want := []string{localPod + ":8080", remotePod + ":8080 via " + remoteNodeIP}
	waitUntil("a pod reaching both endpoints through the cluster IP", func() bool {
		return slices.Equal(delivered(t, sim, vip, 80), want)
	})

	// One more remote endpoint: one in-place update of the one LB (and the
	// remote endpoint it needs), no listing of HNS.
	sim.ResetCalls()
	before := p.Syncs()
	if _, err := client.DiscoveryV1().EndpointSlices(ns).Update(ctx, endpoints(localPod, remotePod, "10.244.2.11"), metav1.UpdateOptions{}); err != nil {
		t.Fatalf("update slice: %v", err)
	}
	waitUntil("the new endpoint", func() bool { return len(delivered(t, sim, vip, 80)) == 3 })
	waitUntil("the sync to be counted", func() bool { return p.Syncs() > before })
	calls := sim.CallCounts()
	if calls[hns.OpUpdateLoadBalancer] != 1 || calls[hns.OpCreateEndpoint] != 1 || calls[hns.OpListLoadBalancers] != 0 || sim.Writes() != 2 {
		t.Errorf("an endpoint added cost %v (%d writes), want 1 endpoint create + 1 load balancer update and no listing", calls, sim.Writes())
	}

	// Delete: no load balancer for the VIP and no remote endpoint left.
	if err := client.CoreV1().Services(ns).Delete(ctx, "web", metav1.DeleteOptions{}); err != nil {
		t.Fatalf("delete service: %v", err)
	}
	waitUntil("the service's load balancer and remote endpoints to go", func() bool {
		lbs, err := sim.ListLoadBalancers(ctx)
		if err != nil {
			return false
		}
		for _, lb := range lbs {
			if slices.Contains(lb.FrontendVIPs, vip) {
				return false
			}
		}
		eps, err := sim.ListEndpoints(ctx, network.Net.ID)
		if err != nil {
			return false
		}
		for _, ep := range eps {
			for _, ipc := range ep.IpConfigurations {
				if ipc.IpAddress == remotePod || ipc.IpAddress == "10.244.2.11" {
					return false
				}
			}
		}
		return true
	})
}
