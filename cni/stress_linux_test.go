package cni_test

// Address plan: see harness_linux_test.go (node 10.244.1.0/24; 253 usable
// pod addresses after the gateway .1 and source VIP .2).

import (
	"fmt"
	"net/netip"
	"path/filepath"
	"sync"
	"testing"

	"github.com/containernetworking/cni/pkg/types"
)

func TestParallelAddDel(t *testing.T) {
	const pods = 100
	node := newTestNode(t, nodeOptions{})
	node.startServer(node.linuxWiring(), true)
	sandboxes := make([]*testPod, pods)
	for i := range sandboxes {
		sandboxes[i] = node.newPod(fmt.Sprintf("p%03d", i))
	}

	ips := make([]netip.Addr, pods)
	errs := make([]error, pods)
	var wg sync.WaitGroup
	for i, p := range sandboxes {
		wg.Go(func() {
			res, err := node.add(p)
			if err != nil {
				errs[i] = err
				return
			}
			ips[i], _ = netip.AddrFromSlice(res.IPs[0].Address.IP.To4())
		})
	}
	wg.Wait()
	seen := map[netip.Addr]string{}
	for i, err := range errs {
		if err != nil {
			t.Errorf("ADD %s: %v", sandboxes[i].rt.ContainerID, err)
			continue
		}
		if other, dup := seen[ips[i]]; dup {
			t.Errorf("%s and %s both got %s", other, sandboxes[i].rt.ContainerID, ips[i])
		}
		seen[ips[i]] = sandboxes[i].rt.ContainerID
	}
	if n := len(node.allocations()); n != pods {
		t.Errorf("%d allocations after %d ADDs", n, pods)
	}
	if n := len(node.bridgePorts()); n != pods {
		t.Errorf("%d bridge ports after %d ADDs", n, pods)
	}
	// Spot-check real connectivity in the crowd.
	if err := ping(sandboxes[0].nsName(), ips[pods-1]); err != nil {
		t.Error(err)
	}

	for i, p := range sandboxes {
		wg.Go(func() { errs[i] = node.del(p) })
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("DEL %s: %v", sandboxes[i].rt.ContainerID, err)
		}
	}
	if got := node.allocations(); len(got) != 0 {
		t.Errorf("allocations left after DEL: %v", got)
	}
	if got := node.bridgePorts(); len(got) != 0 {
		t.Errorf("bridge ports left after DEL: %v", got)
	}
}

// TestAgentRestart kills the agent process between ADDs: running pods keep
// their addresses and connectivity, ADDs while it is down say "try again
// later", and after the restart new pods get fresh addresses.
func TestAgentRestart(t *testing.T) {
	node := newTestNode(t, nodeOptions{})
	kill := node.startAgentProcess()
	podA, podB := node.newPod("a"), node.newPod("b")
	ipA, ipB := node.mustAdd(podA), node.mustAdd(podB)

	kill()
	t.Run("ADD while the agent is down says try again later and leaves nothing", func(t *testing.T) {
		_, err := node.add(node.newPod("while-down"))
		if cniCode(err) != types.ErrTryAgainLater {
			t.Errorf("ADD: %v (code %d), want code %d", err, cniCode(err), types.ErrTryAgainLater)
		}
		if got := len(node.allocations()); got != 2 {
			t.Errorf("%d allocations, want the 2 running pods'", got)
		}
	})
	t.Run("running pods stay connected while the agent is down", func(t *testing.T) {
		if err := ping(podA.nsName(), ipB); err != nil {
			t.Error(err)
		}
	})

	node.startAgentProcess()
	t.Run("allocations survive the restart", func(t *testing.T) {
		for _, p := range []*testPod{podA, podB} {
			if err := node.check(p); err != nil {
				t.Errorf("CHECK %s after restart: %v", p.rt.ContainerID, err)
			}
		}
	})
	t.Run("a new pod gets a fresh address and reaches the old ones", func(t *testing.T) {
		podC := node.newPod("c")
		ipC := node.mustAdd(podC)
		if ipC == ipA || ipC == ipB {
			t.Errorf("new pod got %s, held by a running pod (a=%s b=%s)", ipC, ipA, ipB)
		}
		if err := ping(podC.nsName(), ipA); err != nil {
			t.Error(err)
		}
	})
	t.Run("the pool directory keeps host-local's layout", func(t *testing.T) {
		if got := len(node.allocations()); got != 3 {
			t.Errorf("%d allocation files in %s, want 3", got, filepath.Join(node.ipamDir, node.nw.Name))
		}
	})
}
