package linuxnet_test

// Address plan: see harness_linux_test.go (underlay 172.30.0.0/24, node i
// at 172.30.0.(10+i) with pod CIDR 10.244.i.0/24, pods from .11).

import (
	"bufio"
	"fmt"
	"net/netip"
	"testing"

	"github.com/nodenet/nodenet/config"
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
				ping(t, pa1.testNS, pa2.ip)
			})
			t.Run("a pod reaches pods on the other nodes", func(t *testing.T) {
				ping(t, pa1.testNS, pb.ip)
				ping(t, pb.testNS, pc.ip)
				ping(t, pc.testNS, pa2.ip)
			})
			t.Run("a node reaches a remote pod", func(t *testing.T) {
				ping(t, a.testNS, pb.ip)
				ping(t, c.testNS, pa1.ip)
			})
			t.Run("a pod reaches a remote node", func(t *testing.T) {
				ping(t, pa1.testNS, b.ip)
				ping(t, pc.testNS, a.ip)
			})
			t.Run("a TCP connection crosses nodes", func(t *testing.T) {
				addr := netip.AddrPortFrom(pb.ip, 8080)
				l := listen(t, pb.testNS, addr)
				go func() {
					s, err := l.Accept()
					if err != nil {
						return
					}
					defer s.Close()
					line, _ := bufio.NewReader(s).ReadString('\n')
					fmt.Fprint(s, "echo "+line)
				}()
				conn := dial(t, pa1.testNS, addr)
				fmt.Fprint(conn, "hello\n")
				got, err := bufio.NewReader(conn).ReadString('\n')
				if err != nil || got != "echo hello\n" {
					t.Fatalf("read %q, %v; want %q", got, err, "echo hello\n")
				}
			})
			t.Run("a node that left is no longer reachable", func(t *testing.T) {
				meshOf(t, a, b) // c leaves a's and b's view
				noPing(t, pa1.testNS, pc.ip)
				ping(t, pa1.testNS, pb.ip)
			})
		})
	}
}
