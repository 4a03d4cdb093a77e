package e2e

// Address plan: see network_linux_test.go.

import (
	"context"
	"net/netip"
	"sync"
	"testing"
	"time"

	"k8s.io/klog/v2/ktesting"

	"github.com/nodenet/nodenet/cni"
	"github.com/nodenet/nodenet/config"
	"github.com/nodenet/nodenet/overlay"
	"github.com/nodenet/nodenet/overlay/linuxnet"
	"github.com/nodenet/nodenet/test/netnode"
)

// nodenetNode is a node run by nodenet: its CNI server (for the node's
// lifetime) and the agent's network part, which tests may restart.
type nodenetNode struct {
	*netnode.Node
	// t is the test that owns the node: agents log to it and stop at its
	// end, also those a subtest restarts.
	t   *testing.T
	c   *cluster
	cfg *config.AgentConfiguration
	cni *netnode.NodenetCNI
	// resync is the controller's ResyncPeriod; 0 keeps the config's.
	resync time.Duration
}

// startNodenet starts the CNI server and an agent on node name.
func (c *cluster) startNodenet(t *testing.T, name string, mode config.NetworkMode) (*nodenetNode, *agent) {
	t.Helper()
	n := &nodenetNode{Node: c.env.Node(name), t: t, c: c, cfg: agentConfig(t, mode, name)}
	n.cni = n.StartNodenetCNI(t, netnode.NodenetCNIOptions{NetworkName: n.cfg.Network.Name})
	return n, n.startAgent(t)
}

// agentConfig is the one config as a node's agent loads it.
func agentConfig(t *testing.T, mode config.NetworkMode, nodeName string) *config.AgentConfiguration {
	t.Helper()
	cfg := &config.AgentConfiguration{ClusterCIDRs: []string{clusterCIDR}, ServiceCIDRs: []string{serviceCIDR}, NodeName: nodeName}
	cfg.Network.Mode = mode
	config.SetDefaults(cfg, config.DefaultingOptions{
		OS:       config.OSLinux,
		Getenv:   func(string) string { return "" },
		Hostname: func() (string, error) { return nodeName, nil },
	})
	if errs, _ := config.Validate(cfg, config.ValidationOptions{OS: config.OSLinux}); len(errs) > 0 {
		t.Fatalf("agent config: %v", errs.ToAggregate())
	}
	return cfg
}

// agent is one run of the network controller over a fresh linuxnet
// dataplane, as one agent process would hold them.
type agent struct {
	dp     *countingDataplane
	ctrl   *overlay.Controller
	ready  chan struct{} // closed at the first OnReady
	once   sync.Once
	mu     sync.Mutex
	local  *overlay.LocalNetwork
	cancel context.CancelFunc
	done   chan error
}

// startAgent starts a controller for n; it stops when n's test ends
// (before the namespaces and the apiserver go, which were set up earlier).
// t is the (sub)test that wants it, for failures.
func (n *nodenetNode) startAgent(t *testing.T) *agent {
	t.Helper()
	log := ktesting.NewLogger(n.t, ktesting.NewConfig(ktesting.Verbosity(2))).WithValues("node", n.Name)
	dp, err := linuxnet.New(linuxnet.Options{NetNS: n.Handle, Logger: log})
	if err != nil {
		t.Fatalf("linuxnet on %s: %v", n.Name, err)
	}
	a := &agent{dp: &countingDataplane{Interface: dp}, ready: make(chan struct{}), done: make(chan error, 1)}
	ctrl, err := overlay.NewController(overlay.ControllerOptions{
		Config:       n.cfg,
		NodeName:     n.Name,
		Client:       n.c.api.Client(),
		Dataplane:    a.dp,
		ResyncPeriod: n.resync,
		OnReady: func(local *overlay.LocalNetwork) {
			if err := n.cni.Server.SetNetwork(nodeNetwork(n.cfg, local)); err != nil {
				n.t.Errorf("hand %s's network to its CNI server: %v", n.Name, err)
			}
			a.mu.Lock()
			a.local = local
			a.mu.Unlock()
			a.once.Do(func() { close(a.ready) })
		},
		Logger: log,
	})
	if err != nil {
		t.Fatalf("controller for %s: %v", n.Name, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	a.cancel = cancel
	a.ctrl = ctrl
	go func() {
		a.done <- ctrl.Run(ctx)
		dp.Close()
	}()
	n.t.Cleanup(func() { a.stop(n.t) })
	return a
}

// waitReady waits for the first OnReady and returns that network.
func (a *agent) waitReady(t *testing.T) *overlay.LocalNetwork {
	t.Helper()
	select {
	case <-a.ready:
	case err := <-a.done:
		t.Fatalf("controller ended before its network was ready: %v", err)
	case <-t.Context().Done():
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.local == nil {
		t.Fatal("controller not ready")
	}
	return a.local
}

// stop cancels the controller and waits for Run to return; the dataplane
// stays as it is. Calling it again does nothing.
func (a *agent) stop(t *testing.T) {
	if a.cancel == nil {
		return
	}
	a.cancel()
	a.cancel = nil
	if err := <-a.done; err != nil {
		t.Errorf("controller Run: %v", err)
	}
}

// nodeNetwork is what the agent hands its CNI server: the dataplane's
// facts plus the cluster-wide ones from the config.
func nodeNetwork(cfg *config.AgentConfiguration, local *overlay.LocalNetwork) *cni.NodeNetwork {
	return &cni.NodeNetwork{
		Mode:         local.Mode,
		Name:         local.Name,
		ID:           local.ID,
		PodCIDRs:     local.PodCIDRs,
		Gateways:     local.Gateways,
		SourceVIP:    local.SourceVIP,
		Reserved:     local.Reserved,
		MTU:          local.MTU,
		ClusterCIDRs: cfg.EffectiveClusterCIDRs(),
		ServiceCIDRs: cfg.EffectiveServiceCIDRs(),
		NodeIPs:      []netip.Addr{local.NodeIP},
		NodeSubnets:  local.NodeSubnets,
	}
}

// countingDataplane adds up the writes the dataplane reports
// (LocalNetwork.Writes, SyncResult.Writes) and counts completed syncs.
// The controller calls it from one goroutine; tests read it from another.
type countingDataplane struct {
	overlay.Interface
	mu     sync.Mutex
	writes int
	syncs  int
}

func (d *countingDataplane) EnsureLocal(ctx context.Context, spec overlay.LocalSpec) (*overlay.LocalNetwork, error) {
	local, err := d.Interface.EnsureLocal(ctx, spec)
	if local != nil {
		d.mu.Lock()
		d.writes += local.Writes
		d.mu.Unlock()
	}
	return local, err
}

func (d *countingDataplane) SyncRemotes(ctx context.Context, remotes []overlay.RemoteNode) (overlay.SyncResult, error) {
	res, err := d.Interface.SyncRemotes(ctx, remotes)
	d.mu.Lock()
	defer d.mu.Unlock()
	d.writes += res.Writes
	if err == nil {
		d.syncs++
	}
	return res, err
}

// counts returns the writes reported so far and the completed syncs.
func (d *countingDataplane) counts() (writes, syncs int) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.writes, d.syncs
}
