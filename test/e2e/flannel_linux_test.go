// Address plan (k is the test/netnode slot, 0 when nothing else runs):
//
//	underlay           192.168.(77+k).0/24; host .1 (kube-apiserver);
//	                   node-1 .11 and node-2 .12 run nodenet (overlay),
//	                   flannel-1 .13 runs real flanneld
//	cluster CIDR       10.244.0.0/16 (flannel's Network); VNI 4096, UDP 4789
//	node-1, node-2     pod CIDRs 10.244.1.0/24, 10.244.2.0/24; bridge
//	                   "nodenet", vxlan "nodenet.4096" holding .0/32
//	flannel-1          pod CIDR 10.244.3.0/24; flanneld's "flannel.4096"
//	                   holding 10.244.3.0/32; pods on bridge "cni0"
//	                   (gateway 10.244.3.1) through the reference bridge
//	                   and host-local plugins, configured as flannel's
//	                   CNI plugin delegates to them
//	pods               n1-a on node-1, n2-a on node-2, f-a on flannel-1
//	TCP port           8080
package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/netip"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/nodenet/nodenet/config"
	"github.com/nodenet/nodenet/internal/testroot"
	"github.com/nodenet/nodenet/overlay"
	"github.com/nodenet/nodenet/overlay/linuxnet"
	"github.com/nodenet/nodenet/test/netnode"
)

const flannelVXLANDevice = "flannel.4096"

func TestFlannelInterop(t *testing.T) {
	testroot.Require(t, "node network namespaces")
	bin := requireFlanneld(t)
	t.Parallel()
	c := newCluster(t, "node-1", "node-2", "flannel-1")
	ctx := t.Context()
	n1, a1 := c.startNodenet(t, "node-1", config.NetworkModeOverlay)
	n2, a2 := c.startNodenet(t, "node-2", config.NetworkModeOverlay)
	fnode := c.env.Node("flannel-1")
	f := startFlanneld(t, c, fnode, bin)
	local1, local2 := a1.waitReady(t), a2.waitReady(t)
	subnet := f.subnetEnv(t)
	flannelCIDR := podCIDR(3)
	nodenetVXLAN := linuxnet.VXLANDeviceName(config.DefaultNetworkName, config.DefaultVNI)

	rt := fnode.NewRuntime(t, netnode.RuntimeOptions{Conflist: flannelBridgeConflist(t, subnet)})
	fa := rt.AddPod(t, "f-a")
	n1a, n2a := n1.cni.AddPod(t, "n1-a"), n2.cni.AddPod(t, "n2-a")

	t.Run("flanneld takes the Node's pod CIDR", func(t *testing.T) {
		if got := subnet["FLANNEL_SUBNET"]; got != "10.244.3.1/24" {
			t.Errorf("FLANNEL_SUBNET %q, want 10.244.3.1/24", got)
		}
		if !flannelCIDR.Contains(fa.IP) {
			t.Errorf("flannel pod got %s, outside %s", fa.IP, flannelCIDR)
		}
	})
	t.Run("nodenet nodes program flannel's VTEP from its backend-data", func(t *testing.T) {
		mac := flannelVtepMAC(t, c, fnode.Name)
		for _, n := range []struct {
			node *nodenetNode
			cidr netip.Prefix
		}{{n1, podCIDR(1)}, {n2, podCIDR(2)}} {
			err := netnode.Eventually(ctx, converge, func(context.Context) error {
				return readMesh(t, n.node.Node, n.cidr, nodenetVXLAN).hasPeer(flannelCIDR, fnode.IP, mac)
			})
			if err != nil {
				t.Errorf("%s: %v", n.node.Name, err)
			}
		}
	})
	t.Run("flanneld programs the nodenet nodes' VTEPs", func(t *testing.T) {
		for _, n := range []struct {
			node  *nodenetNode
			cidr  netip.Prefix
			local *overlay.LocalNetwork
		}{{n1, podCIDR(1), local1}, {n2, podCIDR(2), local2}} {
			err := netnode.Eventually(ctx, converge, func(context.Context) error {
				return readMesh(t, fnode, flannelCIDR, flannelVXLANDevice).hasPeer(n.cidr, n.node.IP, n.local.VtepMAC.String())
			})
			if err != nil {
				t.Errorf("flannel-1 -> %s: %v", n.node.Name, err)
			}
		}
	})
	t.Run("pods on nodenet nodes and the flannel node ping each other both ways", func(t *testing.T) {
		reach(t, n1a.NS, fa.IP)
		reach(t, fa.NS, n1a.IP)
		reach(t, n2a.NS, fa.IP)
		reach(t, fa.NS, n2a.IP)
	})
	t.Run("a flannel pod connects over TCP to a nodenet pod", func(t *testing.T) {
		if err := netnode.TCPExchange(ctx, fa.NS, n1a.NS, n1a.IP, 8080); err != nil {
			t.Error(err)
		}
	})
	t.Run("flanneld reports the flannel node's network available", func(t *testing.T) {
		err := netnode.Eventually(ctx, converge, func(ctx context.Context) error {
			n, err := c.node(ctx, fnode.Name)
			if err != nil {
				return err
			}
			for _, cond := range n.Status.Conditions {
				if cond.Type == corev1.NodeNetworkUnavailable && cond.Status == corev1.ConditionFalse {
					return nil
				}
			}
			return fmt.Errorf("flannel-1 conditions %v", n.Status.Conditions)
		})
		if err != nil {
			t.Error(err)
		}
	})
}

// flannelVtepMAC reads the VtepMAC flanneld published on its Node.
func flannelVtepMAC(t *testing.T, c *cluster, node string) string {
	t.Helper()
	raw := c.annotation(t, node, overlay.AnnotationBackendData)
	var data struct {
		VNI     int
		VtepMAC string
	}
	if err := json.Unmarshal([]byte(raw), &data); err != nil || data.VtepMAC == "" {
		t.Fatalf("%s backend-data %q: %v", node, raw, err)
	}
	if data.VNI != config.DefaultVNI {
		t.Errorf("%s backend-data VNI %d, want %d", node, data.VNI, config.DefaultVNI)
	}
	return data.VtepMAC
}

// flannelBridgeConflist is what flannel's CNI plugin hands its delegate
// (kube-flannel's cni-conf.json with hairpinMode and isDefaultGateway):
// the reference bridge plugin on cni0 with host-local IPAM over
// FLANNEL_SUBNET and a route to FLANNEL_NETWORK, at FLANNEL_MTU.
func flannelBridgeConflist(t *testing.T, subnet map[string]string) []byte {
	t.Helper()
	var mtu int
	if _, err := fmt.Sscan(subnet["FLANNEL_MTU"], &mtu); err != nil {
		t.Fatalf("FLANNEL_MTU %q: %v", subnet["FLANNEL_MTU"], err)
	}
	podSubnet, err := netip.ParsePrefix(subnet["FLANNEL_SUBNET"])
	if err != nil {
		t.Fatalf("FLANNEL_SUBNET: %v", err)
	}
	conf := map[string]any{
		"cniVersion": "1.0.0",
		"name":       "cbr0",
		"plugins": []any{map[string]any{
			"type":             "bridge",
			"bridge":           "cni0",
			"isGateway":        true,
			"isDefaultGateway": true,
			"ipMasq":           false,
			"hairpinMode":      true,
			"mtu":              mtu,
			"ipam": map[string]any{
				"type":    "host-local",
				"dataDir": t.TempDir(),
				"ranges":  [][]map[string]string{{{"subnet": podSubnet.Masked().String()}}},
				"routes":  []map[string]string{{"dst": subnet["FLANNEL_NETWORK"]}},
			},
		}},
	}
	out, err := json.Marshal(conf)
	if err != nil {
		t.Fatal(err)
	}
	return out
}
