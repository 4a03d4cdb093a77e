package e2e

// The environment of agent_process_linux_test.go; its address plan is
// there.

import (
	"bytes"
	"context"
	"fmt"
	"net/netip"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/nodenet/nodenet/proxy/nftables"
	harness "github.com/nodenet/nodenet/test/cluster"
	"github.com/nodenet/nodenet/test/netnode"
)

const (
	// procBackendPort is where every backend pod serves HTTP.
	procBackendPort = 8080
	// afterOutageWait bounds the wait for a change made after an API
	// outage. The agents' reads wait out the outage (internal/apiwait) and
	// see it within seconds; the bound is generous for a loaded CI host.
	afterOutageWait = 2 * time.Minute
)

// procEnv is a three-node cluster of agent processes with a client pod
// and a backend pod per node.
type procEnv struct {
	// t is the test that owns the cluster: agents that subtests start
	// again live until its end.
	t        *testing.T
	c        *harness.Cluster
	client   *netnode.Pod
	backends []*netnode.Pod
}

func newProcEnv(t *testing.T) *procEnv {
	t.Helper()
	c := harness.New(t, harness.Options{
		Nodes:     []harness.NodeOptions{{Name: "node-1"}, {Name: "node-2"}, {Name: "node-3"}},
		AgentArgs: []string{"--v=2"},
	})
	e := &procEnv{t: t, c: c}
	e.client = c.Node("node-1").AddPod(t, "client")
	for i, n := range c.Nodes {
		p := n.AddPod(t, fmt.Sprintf("be-%d", i+1))
		harness.ServeHTTP(t, p, procBackendPort)
		e.backends = append(e.backends, p)
	}
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		ctx := context.WithoutCancel(t.Context())
		for _, n := range c.Nodes {
			out, _ := n.Run(ctx, "nft", "list", "table", "inet", nftables.TableName)
			t.Logf("nft list table inet %s in %s:\n%s", nftables.TableName, n.Name, out)
		}
	})
	return e
}

func (e *procEnv) backend(name string) *netnode.Pod {
	for _, p := range e.backends {
		if p.Name == name {
			return p
		}
	}
	e.t.Fatalf("no backend %s", name)
	return nil
}

func (e *procEnv) backendNames() []string {
	var names []string
	for _, p := range e.backends {
		names = append(names, p.Name)
	}
	return names
}

// expose creates svc with pods as its endpoints; the Service goes with
// the test.
func (e *procEnv) expose(t *testing.T, svc *corev1.Service, pods ...*netnode.Pod) *corev1.Service {
	t.Helper()
	created, err := e.c.Expose(t.Context(), svc, pods...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := e.c.Delete(context.WithoutCancel(t.Context()), created); err != nil {
			t.Errorf("delete Service %s: %v", created.Name, err)
		}
	})
	return created
}

// startAgent starts n's agent again with its own config, for the rest of
// the test, and waits until it is ready.
func (e *procEnv) startAgent(t *testing.T, n *harness.Node) {
	t.Helper()
	n.StartAgent(e.t, harness.AgentOptions{})
	if _, err := n.WaitReady(t.Context()); err != nil {
		t.Fatal(err)
	}
}

// expires matches what changes in a listing without anyone writing: the
// countdown of set elements with a timeout (affinity sets).
var expires = regexp.MustCompile(` expires [0-9a-z.]+`)

// dataplane is n's nftables table as `nft -s` lists it (no counters),
// without countdowns: what a dataplane write would change.
func (e *procEnv) dataplane(t *testing.T, n *harness.Node) string {
	t.Helper()
	out, err := n.Run(t.Context(), "nft", "-s", "list", "table", "inet", nftables.TableName)
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	return expires.ReplaceAllString(out, "")
}

// sameDataplane wants n's table as it was.
func (e *procEnv) sameDataplane(t *testing.T, n *harness.Node, before string) {
	t.Helper()
	if after := e.dataplane(t, n); after != before {
		t.Errorf("the nftables table on %s changed:\n--- before\n%s\n--- after\n%s", n.Name, before, after)
	}
}

// waitAnswer retries Get until it answers or timeout passes.
func waitAnswer(ctx context.Context, from *netnode.NS, dst netip.AddrPort, timeout time.Duration) (harness.Answer, error) {
	var a harness.Answer
	err := netnode.Eventually(ctx, timeout, func(ctx context.Context) (err error) {
		a, err = harness.Get(ctx, from, dst)
		return err
	})
	return a, err
}

// gate is a one-time signal between two goroutines; opening it again
// does nothing.
type gate struct {
	once sync.Once
	ch   chan struct{}
}

func newGate() *gate  { return &gate{ch: make(chan struct{})} }
func (g *gate) open() { g.once.Do(func() { close(g.ch) }) }
func (g *gate) wait() { <-g.ch }

// monitorNFT runs `nft monitor` in n until the returned function is
// called, which returns what it printed: every table, chain, rule, set
// and element written meanwhile. Like netnode.Watch it brackets the
// recording with a sentinel write (a table added and deleted) and waits
// for its events, so the monitor listened from the start and delivered
// everything up to the end.
func (e *procEnv) monitorNFT(t *testing.T, n *harness.Node) func() string {
	t.Helper()
	out := &syncBuffer{}
	cmd := n.Command(t.Context(), "nft", "monitor")
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	stop := func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	}
	sentinel := func(want int) error {
		return netnode.Eventually(t.Context(), harness.Converge, func(ctx context.Context) error {
			if got := strings.Count(out.String(), "delete table inet "+nftSentinel); got >= want {
				return nil
			}
			// Until the monitor listens, the first write goes unseen:
			// write again.
			_, err := n.Run(ctx, "nft", "add table inet "+nftSentinel+"; delete table inet "+nftSentinel)
			if err == nil {
				err = fmt.Errorf("nft monitor in %s has not shown sentinel %d", n.Name, want)
			}
			return err
		})
	}
	if err := sentinel(1); err != nil {
		stop()
		t.Fatal(err)
	}
	start := out.Len()
	return func() string {
		err := sentinel(2)
		stop()
		if err != nil {
			return err.Error()
		}
		recorded := out.String()[start:]
		var writes []string
		for _, line := range strings.Split(recorded, "\n") {
			if line != "" && !strings.Contains(line, nftSentinel) && !strings.HasPrefix(line, "# new generation") {
				writes = append(writes, line)
			}
		}
		return strings.Join(writes, "\n")
	}
}

// nftSentinel is the table monitorNFT writes.
const nftSentinel = "nnmonitor"

// syncBuffer is a bytes.Buffer a process writes while the test reads.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func (b *syncBuffer) Len() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Len()
}
