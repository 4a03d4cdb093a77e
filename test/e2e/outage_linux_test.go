package e2e

// Address plan: see network_linux_test.go (two nodes, overlay mode; pods
// o1 on node-1 and o2 on node-2; TCP port 9100).

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/nodenet/nodenet/config"
	"github.com/nodenet/nodenet/internal/testroot"
	"github.com/nodenet/nodenet/overlay"
	"github.com/nodenet/nodenet/test/netnode"
)

// TestAPIServerOutageKeepsTheMesh stops the API server under a running
// mesh: the controllers keep resyncing from their last view and must
// neither tear anything down nor write anything, and pods keep talking.
func TestAPIServerOutageKeepsTheMesh(t *testing.T) {
	testroot.Require(t, "node network namespaces")
	t.Parallel()
	c := newCluster(t, "node-1", "node-2")
	ctx := t.Context()
	var nodes []*nodenetNode
	var agents []*agent
	for _, name := range []string{"node-1", "node-2"} {
		n := &nodenetNode{Node: c.env.Node(name), t: t, c: c, cfg: agentConfig(t, config.NetworkModeOverlay, name), resync: 100 * time.Millisecond}
		n.cni = n.StartNodenetCNI(t, netnode.NodenetCNIOptions{NetworkName: n.cfg.Network.Name})
		nodes, agents = append(nodes, n), append(agents, n.startAgent(t))
	}
	for _, a := range agents {
		a.waitReady(t)
	}
	o1, o2 := nodes[0].cni.AddPod(t, "o1"), nodes[1].cni.AddPod(t, "o2")
	reach(t, o1.NS, o2.IP)
	err := netnode.Eventually(ctx, converge, func(ctx context.Context) error {
		n, err := c.node(ctx, "node-1")
		if err != nil {
			return err
		}
		for _, cond := range n.Status.Conditions {
			if cond.Type == corev1.NodeNetworkUnavailable && cond.Status == corev1.ConditionFalse && cond.Reason == overlay.ReasonReady {
				return nil
			}
		}
		return fmt.Errorf("node-1 conditions %+v: want NetworkUnavailable=False (%s)", n.Status.Conditions, overlay.ReasonReady)
	})
	if err != nil {
		t.Fatal(err)
	}
	stream := netnode.StartStream(t, netnode.StreamOptions{Server: o2.NS, Client: o1.NS, Addr: o2.IP, Port: 9100})
	if err := stream.WaitPassing(ctx, 5, converge); err != nil {
		t.Fatal(err)
	}

	watches := []*netnode.Watch{nodes[0].WatchNetlink(t), nodes[1].WatchNetlink(t)}
	_, syncsBefore := agents[0].dp.counts()
	writesBefore, _ := agents[1].dp.counts()
	c.api.Stop()

	// Several resyncs run against the last view while the API is gone.
	err = netnode.Eventually(ctx, converge, func(context.Context) error {
		if _, syncs := agents[0].dp.counts(); syncs < syncsBefore+5 {
			return fmt.Errorf("node-1 resynced %d times since the outage began, want 5", syncs-syncsBefore)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for i, w := range watches {
		if changes := w.Stop(); len(changes) > 0 {
			t.Errorf("netlink changes on %s during the outage:\n%v", nodes[i].Name, changes)
		}
	}
	if writes, _ := agents[1].dp.counts(); writes != writesBefore {
		t.Errorf("node-2's dataplane wrote %d times during the outage", writes-writesBefore)
	}
	for _, a := range agents {
		if err := a.ctrl.Ready(); err != nil {
			t.Errorf("a controller lost readiness over an API outage: %v", err)
		}
	}
	if err := stream.WaitPassing(ctx, 5, converge); err != nil {
		t.Errorf("the connection stopped during the outage: %v", err)
	}
	reach(t, o2.NS, o1.IP)
}
