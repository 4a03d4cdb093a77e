// Address plan (test/cluster's; k is the test/netnode slot):
//
//	underlay           192.168.(77+k).0/24; the host (root netns) .1 runs
//	                   the kube-apiserver and is "outside" the cluster;
//	                   node-1 .11, node-2 .12, node-3 .13
//	pod CIDRs          node-i 10.244.i.0/24 (overlay mode); pods from .3
//	pods               client on node-1; be-1 on node-1, be-2 on node-2,
//	                   be-3 on node-3, each serving HTTP on TCP 8080 and
//	                   answering "<pod name> <client address>"
//	services           port 80 → 8080; cluster IPs from 10.96.0.0/12 and
//	                   node ports from 30000-32767, picked by the apiserver
//
// Every node runs a real nodenet-agent process (--dataplane=linux) in its
// namespace; pods are wired through nodenet-cni and the agent's socket.
package e2e

import (
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/nodenet/nodenet/config"
	"github.com/nodenet/nodenet/internal/testroot"
	harness "github.com/nodenet/nodenet/test/cluster"
	"github.com/nodenet/nodenet/test/netnode"
)

const (
	// apiOutage is how long the apiserver stays down in the outage test
	// (the 60 s).
	apiOutage = 60 * time.Second
	// loadRequests is the client loop of the restart-under-load test.
	loadRequests = 1000
)

func TestAgentProcesses(t *testing.T) {
	testroot.Require(t, "node network namespaces")
	t.Parallel()
	e := newProcEnv(t)
	ctx := t.Context()
	web := e.expose(t, harness.HTTPService("web", 80, procBackendPort), e.backends...)
	webNP := e.expose(t, harness.HTTPService("web-np", 80, procBackendPort, harness.NodePort(corev1.ServiceExternalTrafficPolicyCluster)), e.backends...)

	t.Run("pods on different nodes reach each other without NAT", func(t *testing.T) {
		for _, pair := range []struct{ from, to *netnode.Pod }{
			{e.client, e.backend("be-2")}, {e.client, e.backend("be-3")}, {e.backend("be-3"), e.backend("be-1")},
		} {
			a, err := harness.GetEventually(ctx, pair.from.NS, harness.AddrPort(pair.to.IP.String(), procBackendPort))
			switch {
			case err != nil:
				t.Error(err)
			case a.Backend != pair.to.Name || a.Client != pair.from.IP:
				t.Errorf("%s → %s: answered by %s", pair.from.Name, pair.to.Name, a)
			}
		}
	})

	t.Run("a pod reaches every backend through the cluster IP", func(t *testing.T) {
		if _, err := harness.Spread(ctx, e.client.NS, harness.ClusterIP(web), e.backendNames()...); err != nil {
			t.Error(err)
		}
	})

	t.Run("outside reaches every backend through the node port of every node", func(t *testing.T) {
		for _, n := range e.c.Nodes {
			if _, err := harness.Spread(ctx, nil, harness.NodePortOn(n, webNP), e.backendNames()...); err != nil {
				t.Errorf("through %s: %v", n.Name, err)
			}
		}
	})

	t.Run("an agent killed under load restarts without a failed request or a dataplane write", func(t *testing.T) {
		e.restartUnderLoad(t, e.c.Node("node-1"), harness.ClusterIP(web))
	})

	t.Run("an agent with a bad config exits naming the field and leaves the dataplane alone", func(t *testing.T) {
		n := e.c.Node("node-3")
		bad := *n.Config
		bad.Network.Mode = "vxlan"
		data, err := config.Marshal(&bad)
		if err != nil {
			t.Fatal(err)
		}
		before := e.dataplane(t, n)
		n.Agent.Stop()
		watch := n.WatchNetlink(t)
		a := n.StartAgent(e.t, harness.AgentOptions{Config: data})
		if !a.Wait(harness.Converge) {
			t.Fatalf("the agent with network.mode vxlan still runs\n%s", a.LogTail(20))
		}
		if a.ExitCode() <= 0 {
			t.Errorf("the agent exited with %v, want a non-zero status", a.Err())
		}
		if log := a.Log(); !strings.Contains(log, "network.mode") {
			t.Errorf("the agent's output does not name network.mode:\n%s", log)
		}
		if changes := watch.Stop(); len(changes) > 0 {
			t.Errorf("netlink changes on %s while the bad config ran:\n%s", n.Name, strings.Join(changes, "\n"))
		}
		e.sameDataplane(t, n, before)
		e.startAgent(t, n)
	})

	t.Run("eTP Local answers from the node's own backend and keeps the client address", func(t *testing.T) {
		local := e.expose(t, harness.HTTPService("local", 80, procBackendPort, harness.NodePort(corev1.ServiceExternalTrafficPolicyLocal)),
			e.backend("be-2"), e.backend("be-3"))
		for _, n := range []*harness.Node{e.c.Node("node-2"), e.c.Node("node-3")} {
			want := "be-" + strings.TrimPrefix(n.Name, "node-")
			if _, err := harness.GetEventually(ctx, nil, harness.NodePortOn(n, local)); err != nil {
				t.Fatal(err)
			}
			for range 10 {
				a, err := harness.Get(ctx, nil, harness.NodePortOn(n, local))
				if err != nil {
					t.Fatal(err)
				}
				if a.Backend != want || a.Client != e.c.Env.HostIP {
					t.Fatalf("through %s: answered by %s, want %s seeing the host %s", n.Name, a, want, e.c.Env.HostIP)
				}
			}
		}
	})

	t.Run("ClientIP session affinity keeps a client on one backend", func(t *testing.T) {
		sticky := e.expose(t, harness.HTTPService("sticky", 80, procBackendPort, harness.ClientIPAffinity(600)), e.backends...)
		first, err := harness.GetEventually(ctx, e.client.NS, harness.ClusterIP(sticky))
		if err != nil {
			t.Fatal(err)
		}
		for range 20 {
			a, err := harness.Get(ctx, e.client.NS, harness.ClusterIP(sticky))
			if err != nil {
				t.Fatal(err)
			}
			if a.Backend != first.Backend {
				t.Fatalf("the client moved from %s to %s", first.Backend, a.Backend)
			}
		}
	})

	t.Run("traffic flows through an API server outage and later changes are programmed", func(t *testing.T) {
		e.apiOutage(t, harness.ClusterIP(web), harness.NodePortOn(e.c.Node("node-2"), webNP))
	})
}

// restartUnderLoad runs the client loop through dst while n's agent is
// killed and started again. The loop holds at fixed points so each phase
// carries requests whatever the machine's speed: 300 with the agent dead,
// then requests while the new one starts (500), and 100 once it has
// synced.
func (e *procEnv) restartUnderLoad(t *testing.T, n *harness.Node, dst netip.AddrPort) {
	ctx := t.Context()
	if _, err := harness.GetEventually(ctx, e.client.NS, dst); err != nil {
		t.Fatal(err)
	}
	const killAt, startAt, syncedAt = 100, 400, loadRequests - 100
	// The loop waits at a gate for the test; the test waits for the loop
	// to reach it. Deferred opens free the loop when the test fails.
	killed, started, synced := newGate(), newGate(), newGate()
	atKill, atStart := newGate(), newGate()
	defer func() { killed.open(); started.open(); synced.open() }()

	var (
		mu       sync.Mutex
		failures []error
		answered = map[string]int{}
	)
	loopDone := make(chan struct{})
	go func() {
		defer close(loopDone)
		for i := range loadRequests {
			switch i {
			case killAt:
				atKill.open()
				killed.wait()
			case startAt:
				atStart.open()
				started.wait()
			case syncedAt:
				synced.wait()
			}
			a, err := harness.Get(ctx, e.client.NS, dst)
			mu.Lock()
			if err != nil {
				failures = append(failures, fmt.Errorf("request %d: %w", i, err))
			} else {
				answered[a.Backend]++
			}
			mu.Unlock()
		}
	}()
	defer func() { <-loopDone }()

	atKill.wait()
	before := e.dataplane(t, n)
	watch := n.WatchNetlink(t)
	monitor := e.monitorNFT(t, n)
	n.Agent.Kill()
	killed.open()
	atStart.wait()
	n.StartAgent(e.t, harness.AgentOptions{})
	started.open()
	if _, err := n.WaitReady(ctx); err != nil {
		t.Fatal(err)
	}
	synced.open()
	changes := watch.Stop()
	nftWrites := monitor()
	after := e.dataplane(t, n)
	<-loopDone

	if len(failures) > 0 {
		t.Errorf("%d of %d requests failed; the first: %v", len(failures), loadRequests, errors.Join(failures[:min(5, len(failures))]...))
	}
	t.Logf("%d requests, answered by %v", loadRequests, answered)
	if len(changes) > 0 {
		t.Errorf("netlink changes on %s over the restart:\n%s", n.Name, strings.Join(changes, "\n"))
	}
	if nftWrites != "" {
		t.Errorf("nftables writes on %s over the restart (nft monitor):\n%s", n.Name, nftWrites)
	}
	if before != after {
		t.Errorf("the nftables table on %s changed over the restart:\n--- before\n%s\n--- after\n%s", n.Name, before, after)
	}
}

// apiOutage stops the apiserver for apiOutage while a client loop from a
// pod (through dst) and from outside (through nodePort) runs, then
// brings it back and wants a Service created after it programmed.
func (e *procEnv) apiOutage(t *testing.T, dst, nodePort netip.AddrPort) {
	ctx := t.Context()
	// The outage starts on working services, also when this subtest runs
	// alone (the others wait for them to be programmed).
	if _, err := harness.GetEventually(ctx, e.client.NS, dst); err != nil {
		t.Fatalf("before the outage, through %s: %v", dst, err)
	}
	if _, err := harness.GetEventually(ctx, nil, nodePort); err != nil {
		t.Fatalf("before the outage, through %s: %v", nodePort, err)
	}
	e.c.API.StopAPIServer()
	begin := time.Now()
	var requests, failed int
	var firstErr error
	for time.Since(begin) < apiOutage {
		for _, r := range []struct {
			from *netnode.NS
			dst  netip.AddrPort
		}{{e.client.NS, dst}, {nil, nodePort}} {
			requests++
			if _, err := harness.Get(ctx, r.from, r.dst); err != nil {
				failed++
				if firstErr == nil {
					firstErr = err
				}
			}
		}
		select {
		case <-ctx.Done():
			t.Fatal(ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
	for _, n := range e.c.Nodes {
		select {
		case <-n.Agent.Done():
			t.Errorf("the agent on %s exited during the outage: %v\n%s", n.Name, n.Agent.Err(), n.Agent.LogTail(20))
		default:
		}
	}
	if failed > 0 {
		t.Errorf("%d of %d requests failed during the outage; the first: %v", failed, requests, firstErr)
	}
	t.Logf("%d requests during a %s outage", requests, apiOutage)
	if err := e.c.API.StartAPIServer(ctx); err != nil {
		t.Fatal(err)
	}
	back := time.Now()
	after := e.expose(t, harness.HTTPService("after-outage", 80, procBackendPort), e.backend("be-3"))
	a, err := waitAnswer(ctx, e.client.NS, harness.ClusterIP(after), afterOutageWait)
	if err != nil {
		t.Fatalf("a Service created after the outage: %v", err)
	}
	if a.Backend != "be-3" {
		t.Errorf("a Service created after the outage answered from %s, want be-3", a)
	}
	t.Logf("a Service created after the outage answered %s after the apiserver returned", time.Since(back).Round(100*time.Millisecond))
}
