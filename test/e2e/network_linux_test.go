// Address plan (k is the test/netnode slot, 0 when nothing else runs;
// the overlay and l2bridge tests run in parallel, each in its own slot):
//
//	underlay           192.168.(77+k).0/24; host (root netns) .1 where the
//	                   kube-apiserver listens; node-1 .11, node-2 .12,
//	                   node-3 .13 (each node's eth0 = its InternalIP)
//	cluster CIDR       10.244.0.0/16; service CIDR 10.96.0.0/12
//	node-i pod CIDR    10.244.i.0/24: gateway .1 on bridge "nodenet";
//	                   overlay: source VIP .2 reserved, vxlan device
//	                   "nodenet.4096" (VNI 4096, UDP 4789) holding .0/32
//	pods               n1-a, n1-b on node-1; n2-a on node-2; n3-a on
//	                   node-3; addresses from IPAM (.3 and up)
//	TCP ports          8080 (one exchange), 9000 (the long-lived stream)
package e2e

import (
	"context"
	"fmt"
	"net/netip"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodenet/nodenet/config"
	"github.com/nodenet/nodenet/internal/testroot"
	"github.com/nodenet/nodenet/overlay"
	"github.com/nodenet/nodenet/overlay/linuxnet"
	"github.com/nodenet/nodenet/test/netnode"
)

func TestNodeNetwork(t *testing.T) {
	testroot.Require(t, "node network namespaces")
	for _, mode := range []config.NetworkMode{config.NetworkModeOverlay, config.NetworkModeL2Bridge} {
		t.Run(fmt.Sprintf("%s mode connects pods on three nodes", mode), func(t *testing.T) {
			t.Parallel()
			testNodeNetwork(t, mode)
		})
	}
}

// peer is a nodenet node as the others should have programmed it.
type peer struct {
	node    *nodenetNode
	cidr    netip.Prefix
	vtepMAC string // empty in l2bridge mode
}

func testNodeNetwork(t *testing.T, mode config.NetworkMode) {
	c := newCluster(t, "node-1", "node-2", "node-3")
	ctx := t.Context()
	vxlanDev := linuxnet.VXLANDeviceName(config.DefaultNetworkName, config.DefaultVNI)
	peers := map[string]*peer{}
	agents := map[string]*agent{}
	for i, n := range c.env.Nodes {
		nn, a := c.startNodenet(t, n.Name, mode)
		peers[n.Name] = &peer{node: nn, cidr: podCIDR(i + 1)}
		agents[n.Name] = a
	}
	for name, a := range agents {
		local := a.waitReady(t)
		if mode == config.NetworkModeOverlay {
			peers[name].vtepMAC = local.VtepMAC.String()
		}
	}
	n1, n2, n3 := peers["node-1"].node, peers["node-2"].node, peers["node-3"].node
	n1a, n1b := n1.cni.AddPod(t, "n1-a"), n1.cni.AddPod(t, "n1-b")
	n2a, n3a := n2.cni.AddPod(t, "n2-a"), n3.cni.AddPod(t, "n3-a")

	t.Run("every node publishes flannel's annotations for its mode", func(t *testing.T) {
		wantType := map[config.NetworkMode]string{config.NetworkModeOverlay: overlay.BackendVXLAN, config.NetworkModeL2Bridge: overlay.BackendHostGW}[mode]
		for name, p := range peers {
			if got := c.annotation(t, name, overlay.AnnotationBackendType); got != wantType {
				t.Errorf("%s backend-type %q, want %q", name, got, wantType)
			}
			if got := c.annotation(t, name, overlay.AnnotationPublicIP); got != p.node.IP.String() {
				t.Errorf("%s public-ip %q, want %s", name, got, p.node.IP)
			}
		}
	})
	t.Run("every node has programmed the other two", func(t *testing.T) {
		for _, self := range peers {
			for _, other := range peers {
				if other == self {
					continue
				}
				err := netnode.Eventually(ctx, converge, func(context.Context) error {
					return readMesh(t, self.node.Node, self.cidr, vxlanDev).hasPeer(other.cidr, other.node.IP, other.vtepMAC)
				})
				if err != nil {
					t.Errorf("%s -> %s: %v", self.node.Name, other.node.Name, err)
				}
			}
		}
	})
	t.Run("pods on one node reach each other", func(t *testing.T) {
		reach(t, n1a.NS, n1b.IP)
		reach(t, n1b.NS, n1a.IP)
	})
	t.Run("pods on different nodes reach each other", func(t *testing.T) {
		for _, from := range []*netnode.Pod{n1a, n2a, n3a} {
			for _, to := range []*netnode.Pod{n1b, n2a, n3a} {
				if from.Node != to.Node {
					reach(t, from.NS, to.IP)
				}
			}
		}
	})
	t.Run("a node reaches pods on the other nodes", func(t *testing.T) {
		reach(t, n1.NS, n2a.IP)
		reach(t, n2.NS, n3a.IP)
		reach(t, n3.NS, n1a.IP)
	})
	t.Run("a pod reaches the other nodes", func(t *testing.T) {
		reach(t, n1a.NS, n2.IP)
		reach(t, n2a.NS, n3.IP)
		reach(t, n3a.NS, n1.IP)
	})
	t.Run("TCP connects between pods on different nodes", func(t *testing.T) {
		if err := netnode.TCPExchange(ctx, n1a.NS, n3a.NS, n3a.IP, 8080); err != nil {
			t.Error(err)
		}
	})
	t.Run("a restarted agent adopts its network without a netlink write and keeps a connection up", func(t *testing.T) {
		stream := netnode.StartStream(t, netnode.StreamOptions{Server: n2a.NS, Client: n1a.NS, Addr: n2a.IP, Port: 9000})
		if err := stream.WaitPassing(ctx, 5, converge); err != nil {
			t.Fatal(err)
		}
		watch := n2.WatchNetlink(t)
		agents["node-2"].stop(t)
		if err := stream.WaitPassing(ctx, 5, converge); err != nil {
			t.Errorf("with node-2's agent stopped: %v", err)
		}
		restarted := n2.startAgent(t)
		local := restarted.waitReady(t)
		// The first reconcile ends with SyncRemotes; wait for it.
		err := netnode.Eventually(ctx, converge, func(context.Context) error {
			if _, syncs := restarted.dp.counts(); syncs == 0 {
				return fmt.Errorf("restarted agent has not synced the remote nodes")
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if changes := watch.Stop(); len(changes) > 0 {
			t.Errorf("netlink changes in node-2 during the restart:\n%v", changes)
		}
		if writes, _ := restarted.dp.counts(); writes != 0 || local.Writes != 0 {
			t.Errorf("restarted dataplane reported %d writes (EnsureLocal %d), want 0", writes, local.Writes)
		}
		if mode == config.NetworkModeOverlay && local.VtepMAC.String() != peers["node-2"].vtepMAC {
			t.Errorf("VTEP MAC after restart %s, want %s", local.VtepMAC, peers["node-2"].vtepMAC)
		}
		if err := stream.WaitPassing(ctx, 5, converge); err != nil {
			t.Errorf("after the restart: %v", err)
		}
	})
	t.Run("deleting a Node removes its routes from the other nodes", func(t *testing.T) {
		gone := peers["node-3"]
		if err := c.api.Client().CoreV1().Nodes().Delete(ctx, "node-3", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		for _, self := range []*peer{peers["node-1"], peers["node-2"]} {
			err := netnode.Eventually(ctx, converge, func(context.Context) error {
				return readMesh(t, self.node.Node, self.cidr, vxlanDev).lacksPeer(gone.cidr, gone.node.IP, gone.vtepMAC)
			})
			if err != nil {
				t.Errorf("%s: %v", self.node.Name, err)
			}
		}
		// The remaining pair is untouched.
		m := readMesh(t, n1.Node, peers["node-1"].cidr, vxlanDev)
		if err := m.hasPeer(peers["node-2"].cidr, n2.IP, peers["node-2"].vtepMAC); err != nil {
			t.Errorf("node-1 lost node-2: %v", err)
		}
		reach(t, n1a.NS, n2a.IP)
	})
}
