package linuxnet_test

// Address plan: see nodes_linux_test.go (node i at .(10+i) on the
// underlay with pod CIDR 10.244.i.0/24, pods from .11); the stream runs
// to port 9090 of node 2's pod.

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/nodenet/nodenet/config"
	"github.com/nodenet/nodenet/overlay"
	"github.com/nodenet/nodenet/test/netnode"
)

func TestRestartWritesNothing(t *testing.T) {
	for _, mode := range []config.NetworkMode{config.NetworkModeOverlay, config.NetworkModeL2Bridge} {
		t.Run(fmt.Sprintf("in %s mode a new agent adopts the network without a write and a TCP connection survives", mode), func(t *testing.T) {
			t.Parallel()
			u := newUnderlay(t)
			a, b := u.addNode(t, mode), u.addNode(t, mode)
			a.ensure(t)
			b.ensure(t)
			meshOf(t, a, b)
			pa, pb := a.addPod(t), b.addPod(t)

			ping(t, pa, pb.IP) // the path is up before the one connection starts
			traffic := netnode.StartStream(t, netnode.StreamOptions{Server: pb.NS, Client: pa.NS, Addr: pb.IP, Port: 9090, Stall: 10 * time.Second})
			if err := traffic.WaitPassing(t.Context(), 3, 20*time.Second); err != nil {
				t.Fatal(err)
			}

			for _, n := range []*node{a, b} {
				// The vxlan device's neighbours are all written: any change
				// to them is a write, also one the kernel reports as FAILED.
				watch := n.WatchNetlink(t, vxlanName)
				before := n.local
				n.nw.Close()
				n.nw = n.newNetwork(t)
				got := n.ensure(t)
				if got.Writes != 0 {
					t.Errorf("node %d: EnsureLocal after a restart made %d writes, want 0", n.idx, got.Writes)
				}
				got.Writes = before.Writes
				if diff := cmp.Diff(before, got, addrCmp); diff != "" {
					t.Errorf("node %d: adopted network differs (-before +after):\n%s", n.idx, diff)
				}
				var remotes []overlay.RemoteNode
				for _, o := range []*node{a, b} {
					if o != n {
						remotes = append(remotes, o.remote())
					}
				}
				res, err := n.nw.SyncRemotes(context.Background(), remotes)
				if err != nil {
					t.Fatal(err)
				}
				if res != (overlay.SyncResult{}) {
					t.Errorf("node %d: SyncRemotes after a restart = %+v, want nothing done", n.idx, res)
				}
				if changes := watch.Stop(); len(changes) != 0 {
					t.Errorf("node %d: netlink changes after a restart:\n%s", n.idx, strings.Join(changes, "\n"))
				}
			}

			if err := traffic.WaitPassing(t.Context(), 3, 20*time.Second); err != nil {
				t.Errorf("the TCP connection broke across the restart: %v", err)
			}
		})
	}
}
