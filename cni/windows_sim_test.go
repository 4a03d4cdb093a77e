package cni_test

// The Windows pod path end to end on any OS: libcni execs the real
// nodenet-cni binary, which forwards to a server whose wiring is
// cni/hnsendpoint on the HNS simulator. CNI_NETNS carries the HCN
// namespace GUID, as containerd passes it on Windows.
//
// Address plan (simulator only):
//   192.168.1.0/24  node subnet, this node 192.168.1.11 (adapter "Ethernet")
//   10.244.1.0/24   this node's pods: gateway .1, source VIP .2, pods .3+
//   10.244.0.0/16   cluster CIDR; 10.96.0.0/12 service CIDR; 8.8.8.8 outside

import (
	"context"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/containernetworking/cni/libcni"
	current "github.com/containernetworking/cni/pkg/types/100"

	"github.com/nodenet/nodenet/cni"
	"github.com/nodenet/nodenet/cni/hnsendpoint"
	"github.com/nodenet/nodenet/config"
	"github.com/nodenet/nodenet/hns"
	"github.com/nodenet/nodenet/overlay"
	"github.com/nodenet/nodenet/test/netnode"
)

func TestWindowsPodOnSimulatedHNS(t *testing.T) {
	ctx := context.Background()
	node := newSimNode(t, simNodeOptions{overlay: true, dsr: true})
	node.listen(t)
	sim, network, dir, socket := node.sim, node.network, node.dir, node.socket

	cfg := &config.AgentConfiguration{ClusterCIDRs: []string{"10.244.0.0/16"}, ServiceCIDRs: []string{"10.96.0.0/12"}}
	config.SetDefaults(cfg, config.DefaultingOptions{OS: config.OSWindows, Hostname: func() (string, error) { return "win-a", nil }})
	cfg.CNI.SocketPath = socket
	data, err := cni.RenderConflist(cni.ConflistOptions{Network: cfg.Network.Name, SocketPath: cfg.CNI.SocketPath})
	if err != nil {
		t.Fatal(err)
	}
	list, err := libcni.ConfListFromBytes(data)
	if err != nil {
		t.Fatal(err)
	}
	client := netnode.NewCNIClient(binaries(t), filepath.Join(dir, "cache"))

	// The runtime created the pod's HCN namespace before calling CNI.
	podNS := &hns.Namespace{ID: node.podNS}
	rt := &libcni.RuntimeConf{
		ContainerID: "5f0c1d2e3a4b5c6d", NetNS: podNS.ID, IfName: "eth0",
		CapabilityArgs: map[string]any{"portMappings": []map[string]any{{"hostPort": 8080, "containerPort": 80, "protocol": "tcp"}}},
	}
	res, err := client.AddNetworkList(ctx, list, rt)
	if err != nil {
		t.Fatalf("ADD: %v", err)
	}
	result, err := current.NewResultFromResult(res)
	if err != nil {
		t.Fatal(err)
	}
	podIP := result.IPs[0].Address.IP.String()

	t.Run("the endpoint sits in the pod's namespace with the allocated address", func(t *testing.T) {
		ns, err := sim.GetNamespace(ctx, podNS.ID)
		if err != nil {
			t.Fatal(err)
		}
		if len(ns.EndpointIDs) != 1 {
			t.Fatalf("namespace holds %d endpoints, want 1", len(ns.EndpointIDs))
		}
		ep, err := sim.GetEndpointByID(ctx, ns.EndpointIDs[0])
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(ep.IPs(), []string{podIP}) || podIP == "10.244.1.2" {
			t.Errorf("endpoint IPs %v, result IP %s (not the source VIP)", ep.IPs(), podIP)
		}
		var kinds []hns.EndpointPolicyType
		for _, p := range ep.Policies {
			kinds = append(kinds, p.Type)
		}
		for _, want := range []hns.EndpointPolicyType{hns.EndpointPolicyOutBoundNAT, hns.EndpointPolicySDNRoute, hns.EndpointPolicyPortMapping} {
			if !slices.Contains(kinds, want) {
				t.Errorf("endpoint policies %v lack %s", kinds, want)
			}
		}
	})
	t.Run("pod to a service address is not NATed", func(t *testing.T) {
		tr, err := sim.Trace(hns.FromEndpoint, hns.Packet{Protocol: hns.ProtocolTCP, Src: podIP, SrcPort: 40000, Dst: "10.96.0.50", DstPort: 80})
		if err != nil {
			t.Fatal(err)
		}
		if len(tr.Deliveries) != 1 || tr.Deliveries[0].Packet.Src != podIP {
			t.Errorf("trace:\n%s", tr)
		}
	})
	t.Run("pod to the outside is NATed to the node IP", func(t *testing.T) {
		tr, err := sim.Trace(hns.FromEndpoint, hns.Packet{Protocol: hns.ProtocolTCP, Src: podIP, SrcPort: 40000, Dst: "8.8.8.8", DstPort: 53})
		if err != nil {
			t.Fatal(err)
		}
		if len(tr.Deliveries) != 1 || tr.Deliveries[0].Packet.Src != "192.168.1.11" {
			t.Errorf("trace:\n%s", tr)
		}
	})
	t.Run("pod to a pod on another node is encapsulated to that node", func(t *testing.T) {
		mac, _ := net.ParseMAC("0e:4e:c0:a8:01:0c")
		remote := overlay.RemoteNode{Name: "win-b", NodeIP: netip.MustParseAddr("192.168.1.12"), VtepMAC: mac,
			PodCIDRs: []netip.Prefix{netip.MustParsePrefix("10.244.2.0/24")}}
		if _, err := node.dataplane.SyncRemotes(ctx, []overlay.RemoteNode{remote}); err != nil {
			t.Fatal(err)
		}
		tr, err := sim.Trace(hns.FromEndpoint, hns.Packet{Protocol: hns.ProtocolTCP, Src: podIP, SrcPort: 40000, Dst: "10.244.2.7", DstPort: 80})
		if err != nil {
			t.Fatal(err)
		}
		if len(tr.Deliveries) != 1 || tr.Deliveries[0].Encap == nil || tr.Deliveries[0].Encap.ProviderAddress != "192.168.1.12" ||
			tr.Deliveries[0].Packet.Src != podIP {
			t.Errorf("trace:\n%s\nwant the pod's own address encapsulated to 192.168.1.12", tr)
		}
	})
	t.Run("CHECK passes, then fails once the endpoint leaves the namespace", func(t *testing.T) {
		if err := client.CheckNetworkList(ctx, list, rt); err != nil {
			t.Fatalf("CHECK: %v", err)
		}
		ns, _ := sim.GetNamespace(ctx, podNS.ID)
		if err := sim.RemoveNamespaceEndpoint(ctx, podNS.ID, ns.EndpointIDs[0]); err != nil {
			t.Fatal(err)
		}
		if err := client.CheckNetworkList(ctx, list, rt); err == nil {
			t.Error("CHECK passed with the endpoint detached")
		}
	})
	t.Run("DEL removes the endpoint and frees the address", func(t *testing.T) {
		if err := client.DelNetworkList(ctx, list, rt); err != nil {
			t.Fatalf("DEL: %v", err)
		}
		eps, err := sim.ListEndpoints(ctx, network.ID)
		if err != nil {
			t.Fatal(err)
		}
		for _, ep := range eps {
			if _, ours := hnsendpoint.ParseEndpointName(ep.Name); ours {
				t.Errorf("endpoint %s left after DEL", ep.Name)
			}
		}
		files, _ := os.ReadDir(filepath.Join(dir, "ipam", "nodenet"))
		for _, f := range files {
			if _, err := netip.ParseAddr(f.Name()); err == nil {
				t.Errorf("allocation %s left after DEL", f.Name())
			}
		}
	})
}
