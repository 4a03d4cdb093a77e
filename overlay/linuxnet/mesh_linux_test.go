package linuxnet_test

// Address plan: see nodes_linux_test.go (node i at .(10+i) on the
// underlay with pod CIDR 10.244.i.0/24, pods from .11).

import (
	"fmt"
	"testing"

	"github.com/nodenet/nodenet/config"
	"github.com/nodenet/nodenet/test/netnode"
)

func TestMeshCarriesRealPackets(t *testing.T) {
	for _, mode := range []config.NetworkMode{config.NetworkModeOverlay, config.NetworkModeL2Bridge} {
		t.Run(fmt.Sprintf("in %s mode pods and nodes reach each other", mode), func(t *testing.T) {
			t.Parallel()
			u := newUnderlay(t)
			a, b, c := u.addNode(t, mode), u.addNode(t, mode), u.addNode(t, mode)
			for _, n := range []*node{a, b, c} {
				n.ensure(t)
			}
			meshOf(t, a, b, c)
			pa1, pa2, pb, pc := a.addPod(t), a.addPod(t), b.addPod(t), c.addPod(t)

			t.Run("a pod reaches a pod on the same node", func(t *testing.T) {
				ping(t, pa1, pa2.IP)
			})
			t.Run("a pod reaches pods on the other nodes", func(t *testing.T) {
				ping(t, pa1, pb.IP)
				ping(t, pb, pc.IP)
				ping(t, pc, pa2.IP)
			})
			t.Run("a node reaches a remote pod", func(t *testing.T) {
				ping(t, a, pb.IP)
				ping(t, c, pa1.IP)
			})
			t.Run("a pod reaches a remote node", func(t *testing.T) {
				ping(t, pa1, b.IP)
				ping(t, pc, a.IP)
			})
			t.Run("a TCP connection crosses nodes", func(t *testing.T) {
				if err := netnode.TCPExchange(t.Context(), pa1.NS, pb.NS, pb.IP, 8080); err != nil {
					t.Fatal(err)
				}
			})
			t.Run("a node that left is no longer reachable", func(t *testing.T) {
				meshOf(t, a, b) // c leaves a's and b's view
				noPing(t, pa1, pc.IP)
				ping(t, pa1, pb.IP)
			})
		})
	}
}
