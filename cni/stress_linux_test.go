package cni_test

// Address plan: see node_linux_test.go (node 10.244.1.0/24; 253 usable
// pod addresses after the gateway .1 and source VIP .2).

import (
	"fmt"
	"net/netip"
	"path/filepath"
	"sync"
	"testing"

	"github.com/containernetworking/cni/pkg/types"

	"github.com/nodenet/nodenet/test/netnode"
)

func TestParallelAddDel(t *testing.T) {
	const pods = 100
	node := newTestNode(t, podCIDR)
	node.startCNI(t, netnode.NodenetCNIOptions{Network: node.nw})
	ctx := t.Context()
	sandboxes := make([]*netnode.Pod, pods)
	for i := range sandboxes {
		sandboxes[i] = node.NewPod(t, fmt.Sprintf("p%03d", i))
	}

	errs := make([]error, pods)
	var wg sync.WaitGroup
	for i, p := range sandboxes {
		wg.Go(func() { errs[i] = node.Add(ctx, p) })
	}
	wg.Wait()
	seen := map[netip.Addr]string{}
	for i, err := range errs {
		p := sandboxes[i]
		if err != nil {
			t.Errorf("ADD %s: %v", p.Conf.ContainerID, err)
			continue
		}
		if other, dup := seen[p.IP]; dup {
			t.Errorf("%s and %s both got %s", other, p.Conf.ContainerID, p.IP)
		}
		seen[p.IP] = p.Conf.ContainerID
	}
	if n := len(node.allocations()); n != pods {
		t.Errorf("%d allocations after %d ADDs", n, pods)
	}
	if n := len(node.bridgePorts(t)); n != pods {
		t.Errorf("%d bridge ports after %d ADDs", n, pods)
	}
	// Spot-check real connectivity in the crowd.
	if err := sandboxes[0].Ping(ctx, sandboxes[pods-1].IP); err != nil {
		t.Error(err)
	}

	for i, p := range sandboxes {
		wg.Go(func() { errs[i] = node.Del(ctx, p) })
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("DEL %s: %v", sandboxes[i].Conf.ContainerID, err)
		}
	}
	if got := node.allocations(); len(got) != 0 {
		t.Errorf("allocations left after DEL: %v", got)
	}
	if got := node.bridgePorts(t); len(got) != 0 {
		t.Errorf("bridge ports left after DEL: %v", got)
	}
}

// TestAgentRestart kills the agent's CNI server process between ADDs:
// running pods keep their addresses and connectivity, ADDs while it is
// down say "try again later", and after the restart new pods get fresh
// addresses.
func TestAgentRestart(t *testing.T) {
	node := newTestNode(t, podCIDR)
	node.startCNI(t, netnode.NodenetCNIOptions{Network: node.nw, Process: true})
	ctx := t.Context()
	podA, podB := node.AddPod(t, "a"), node.AddPod(t, "b")
	ipA, ipB := podA.IP, podB.IP

	node.Stop() // SIGKILL
	t.Run("ADD while the agent is down says try again later and leaves nothing", func(t *testing.T) {
		err := node.Add(ctx, node.NewPod(t, "while-down"))
		if cniCode(err) != types.ErrTryAgainLater {
			t.Errorf("ADD: %v (code %d), want code %d", err, cniCode(err), types.ErrTryAgainLater)
		}
		if got := len(node.allocations()); got != 2 {
			t.Errorf("%d allocations, want the 2 running pods'", got)
		}
	})
	t.Run("running pods stay connected while the agent is down", func(t *testing.T) {
		if err := podA.Ping(ctx, ipB); err != nil {
			t.Error(err)
		}
	})

	node.Start(t)
	t.Run("allocations survive the restart", func(t *testing.T) {
		for _, p := range []*netnode.Pod{podA, podB} {
			if err := node.Check(ctx, p); err != nil {
				t.Errorf("CHECK %s after restart: %v", p.Conf.ContainerID, err)
			}
		}
	})
	t.Run("a new pod gets a fresh address and reaches the old ones", func(t *testing.T) {
		podC := node.AddPod(t, "c")
		if podC.IP == ipA || podC.IP == ipB {
			t.Errorf("new pod got %s, held by a running pod (a=%s b=%s)", podC.IP, ipA, ipB)
		}
		if err := podC.Ping(ctx, ipA); err != nil {
			t.Error(err)
		}
	})
	t.Run("the pool directory keeps host-local's layout", func(t *testing.T) {
		if got := len(node.allocations()); got != 3 {
			t.Errorf("%d allocation files in %s, want 3", got, filepath.Join(node.IPAMDir, node.nw.Name))
		}
	})
}
