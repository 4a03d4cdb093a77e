package agent

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"path/filepath"
	"sync"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"

	"github.com/nodenet/nodenet/agent/status"
	"github.com/nodenet/nodenet/cni"
	"github.com/nodenet/nodenet/config"
	"github.com/nodenet/nodenet/hns"
	"github.com/nodenet/nodenet/internal/apiwait"
	"github.com/nodenet/nodenet/internal/version"
	"github.com/nodenet/nodenet/overlay"
	"github.com/nodenet/nodenet/proxy/healthcheck"
	"github.com/nodenet/nodenet/proxy/hnslb"
	"github.com/nodenet/nodenet/proxy/metrics"
	"github.com/nodenet/nodenet/proxy/proxier"
	"github.com/nodenet/nodenet/proxy/source"
)

// The overlay Controller is the HNS backend's view of the network.
var _ hnslb.Network = (*overlay.Controller)(nil)

// Agent is one nodenet-agent process: New loads and checks the config,
// Run does everything else.
type Agent struct {
	opts    Options
	loaded  *LoadedConfig
	cfg     *config.AgentConfiguration
	source  source.Spec
	log     klog.Logger
	version string
	hostHNS hns.Interface

	// rt is what Run built; nil fields before Run gets to them.
	mu sync.Mutex
	rt runtimeState

	// egressMu serializes pod egress syncs, so the newest network's facts
	// are the ones that stay programmed; egressLocal holds them.
	egressMu    sync.Mutex
	egressLocal *overlay.LocalNetwork
}

// runtimeState is what Run builds, read by the local API and /readyz.
type runtimeState struct {
	started   time.Time
	dp        *dataplane
	ctrl      *overlay.Controller
	cniReady  bool
	local     *overlay.LocalNetwork
	proxier   *proxier.Proxier
	proxyNode proxier.Node
	health    *healthcheck.ProxyHealth
	// sandboxes releases addresses no pod sandbox holds; nil when off.
	sandboxes *cni.SandboxReconciler
}

// New checks opts and loads the config. Config problems are an error
// naming every field unless the config sets configHardFail: false, in which
// case they are logged (and later recorded on the Node) and the agent goes
// on with what loaded. New reads the host at most (the HNS version and
// features); it writes nothing.
func New(opts Options) (*Agent, error) {
	if opts.ConfigFile == "" {
		return nil, errors.New("--config is required")
	}
	if opts.Dataplane == "" {
		opts.Dataplane = DefaultDataplane()
	}
	if _, err := ParseDataplane(string(opts.Dataplane)); err != nil {
		return nil, err
	}
	src, err := source.Parse(opts.Source)
	if err != nil {
		return nil, fmt.Errorf("--source: %w", err)
	}
	if opts.Logger.GetSink() == nil {
		opts.Logger = klog.Background()
	}
	if opts.Version == "" {
		opts.Version = version.Get()
	}
	a := &Agent{opts: opts, source: src, version: opts.Version}
	loaded, err := LoadConfig(opts.ConfigFile, opts.Dataplane, opts.Getenv, opts.Hostname)
	if err != nil {
		return nil, err
	}
	if opts.Dataplane == DataplaneHNS {
		h, features, version, err := openHostHNS(context.Background())
		if err != nil {
			return nil, err
		}
		loaded.checkCapabilities(features, version)
		a.hostHNS = h
	}
	a.loaded, a.cfg = loaded, loaded.Config
	a.log = opts.Logger.WithValues("node", a.cfg.NodeName)
	for _, w := range loaded.Warnings {
		a.log.Info("Config warning", "warning", w.String())
	}
	if err := loaded.Err(); err != nil {
		if a.cfg.HardFail() {
			return nil, &ConfigError{File: opts.ConfigFile, Config: loaded}
		}
		a.log.Error(err, "Config has errors; going on with what loaded because configHardFail is false", "config", opts.ConfigFile)
	}
	return a, nil
}

// Config returns the loaded config, defaulted.
func (a *Agent) Config() *config.AgentConfiguration { return a.cfg }

// Run runs the agent until ctx ends (see the package documentation for
// the order) and returns nil then; it returns an error when a part fails
// for good. The dataplane stays programmed either way.
func (a *Agent) Run(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	cfg, log := a.cfg, a.log
	a.mu.Lock()
	a.rt.started = time.Now()
	a.mu.Unlock()
	log.Info("Starting nodenet-agent", "version", a.version, "dataplane", a.opts.Dataplane, "source", a.source.String(),
		"mode", cfg.Network.Mode, "network", cfg.Network.Name, "dsr", cfg.Proxy.EnableDSR)

	client, folder, watched, err := a.connect(ctx)
	if err != nil {
		return err
	}
	events := newEvents(client, cfg.NodeName)
	defer events.shutdown()
	events.configProblems(a.loaded)

	dp, err := buildDataplane(ctx, a.opts.Dataplane, buildInputs{cfg: cfg, client: client, nodes: folderNodes(folder), logger: log, hostHNS: a.hostHNS})
	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return err
	}
	defer dp.close()

	p := &parts{client: client, folder: folder, folderWatched: watched, recorder: events.recorder, dp: dp, networkReady: make(chan struct{})}
	if err := a.openLocalServers(p); err != nil {
		return err
	}
	defer p.cni.Close()

	reg := metrics.NewRegistry()
	p.metrics = metrics.New(reg, proxier.Families(cfg)...)
	p.metricsHandler = metrics.Handler(reg)
	p.sandboxes, p.closeSandboxes, err = a.newSandboxReconciler(p.cni, reg)
	if err != nil {
		p.cniListener.Close()
		p.statusListener.Close()
		return err
	}
	defer p.closeSandboxes()
	p.health = healthcheck.NewProxyHealth(healthcheck.ProxyHealthOptions{
		HealthTimeout: 2 * cfg.SyncPeriod.Duration, Probes: p.metrics, Logger: log,
	})

	g := newGroup(ctx, cancel)
	p.ctrl, err = a.newNetwork(ctx, g, p)
	if err != nil {
		p.cniListener.Close()
		p.statusListener.Close()
		return err
	}
	a.mu.Lock()
	a.rt.dp, a.rt.ctrl, a.rt.health, a.rt.sandboxes = dp, p.ctrl, p.health, p.sandboxes
	a.mu.Unlock()

	a.start(ctx, g, p)
	err = g.wait()
	if err == nil {
		log.Info("nodenet-agent stopped; the dataplane stays programmed")
	}
	return err
}

// parts are what Run builds before it starts anything.
type parts struct {
	client kubernetes.Interface
	// folder, offline, is the manifest folder (no client then);
	// folderWatched yields its watch's error.
	folder        *source.Folder
	folderWatched <-chan error
	recorder      record.EventRecorder
	dp            *dataplane
	cni           *cni.Server
	// The listeners are the servers' once they run.
	cniListener, statusListener net.Listener
	metrics                     *metrics.Metrics
	metricsHandler              http.Handler
	health                      *healthcheck.ProxyHealth
	ctrl                        *overlay.Controller
	// networkReady is closed when the network is first ready.
	networkReady chan struct{}
	// sandboxes, if set, releases the CNI server's addresses that no pod
	// sandbox holds; closeSandboxes drops its runtime connection.
	sandboxes      *cni.SandboxReconciler
	closeSandboxes func()
}

// openLocalServers builds the CNI server on the dataplane's wiring (it
// gets the network once the network is ready) and opens its socket and
// the local API's: all or nothing.
func (a *Agent) openLocalServers(p *parts) error {
	cfg := a.cfg
	cniLog := a.log
	srv, err := cni.NewServer(cni.ServerOptions{
		SocketPath: cfg.CNI.SocketPath,
		IPAMDir:    filepath.Join(cfg.CNI.DataDir, "ipam"),
		Wiring:     p.dp.wiring,
		Logger:     &cniLog,
	})
	if err != nil {
		return fmt.Errorf("CNI server: %w", err)
	}
	if p.cniListener, err = srv.Listen(); err != nil {
		srv.Close()
		return fmt.Errorf("CNI server: %w", err)
	}
	if p.statusListener, err = status.Listen(status.SocketPath(cfg.CNI.SocketPath)); err != nil {
		p.cniListener.Close()
		srv.Close()
		return err
	}
	p.cni = srv
	return nil
}

// newNetwork builds the network controller. Each time the network is
// ready it is handed on, pod egress first, then the CNI server; the first
// time also closes p.networkReady. A hand-off that fails fails g.
func (a *Agent) newNetwork(ctx context.Context, g *group, p *parts) (*overlay.Controller, error) {
	cfg, log := a.cfg, a.log
	var readyOnce sync.Once
	var nodes overlay.NodeSource
	if p.folder != nil {
		nodes = p.folder.Nodes()
	}
	return overlay.NewController(overlay.ControllerOptions{
		Config:    cfg,
		NodeName:  cfg.NodeName,
		Client:    p.client,
		Nodes:     nodes,
		Dataplane: p.dp.network,
		OnReady: func(local *overlay.LocalNetwork) {
			// Before the CNI server has the network, so no pod starts
			// without a way out of the cluster.
			if err := a.syncPodEgress(ctx, p.dp, local); err != nil {
				if ctx.Err() == nil {
					g.fail(fmt.Errorf("pod egress masquerading: %w", err))
				}
				return
			}
			if err := p.cni.SetNetwork(NodeNetwork(cfg, local)); err != nil {
				g.fail(fmt.Errorf("hand the network to the CNI server: %w", err))
				return
			}
			a.networkReady(local)
			readyOnce.Do(func() { close(p.networkReady) })
		},
		OnNotReady: func(err error) {
			log.Info("Node network no longer ready; pods already wired keep working", "err", err.Error())
		},
		OnRemotes: func([]overlay.RemoteNode) { a.remotesChanged() },
		Recorder:  p.recorder,
		Logger:    log.WithName("network"),
	})
}

// start runs every part in g: the servers and the network at once, the
// parts that need the network's facts once it is ready.
func (a *Agent) start(ctx context.Context, g *group, p *parts) {
	cfg, log := a.cfg, a.log
	g.run("CNI server", func() error { return p.cni.Serve(ctx, p.cniListener) })
	g.run("local API", func() error { return status.Serve(ctx, p.statusListener, status.NewHandler(a)) })
	g.run("health server", func() error {
		return serveHTTP(ctx, cfg.Proxy.HealthzBindAddress, a.healthHandler(p.health), log)
	})
	g.run("metrics server", func() error {
		return serveHTTP(ctx, cfg.Proxy.MetricsBindAddress, p.metricsHandler, log)
	})
	if p.folderWatched != nil {
		g.run("manifest folder", func() error { return <-p.folderWatched })
	}
	g.run("network", func() error { return p.ctrl.Run(ctx) })
	// Not after the network: the network waits for the pod CIDRs it sets.
	if cfg.Network.PodCIDRAllocation == config.PodCIDRAllocationAgent {
		g.run("pod CIDR allocator", func() error { return a.runPodCIDRAllocator(ctx, p) })
	}
	afterNetwork := func(name string, fn func() error) {
		g.run(name, func() error {
			select {
			case <-ctx.Done():
				return nil
			case <-p.networkReady:
				return fn()
			}
		})
	}
	afterNetwork("conflist", func() error { return a.keepConflist(ctx) })
	if p.sandboxes != nil {
		afterNetwork("sandbox reconciler", func() error { return p.sandboxes.Run(ctx) })
	}
	if p.dp.podEgress != nil {
		afterNetwork("pod egress", func() error { a.keepPodEgress(ctx, p.dp); return nil })
	}
	afterNetwork("proxy", func() error {
		return a.runProxy(ctx, proxyInputs{
			client: p.client, folder: p.folder, ctrl: p.ctrl, dp: p.dp, metrics: p.metrics, health: p.health, recorder: p.recorder,
		})
	})
}

// remotesChanged asks the proxy for a full sync when the remote node
// table changed: its remote endpoints' provider addresses come from it,
// and its first sync may have run before the table was read.
func (a *Agent) remotesChanged() {
	a.mu.Lock()
	p := a.rt.proxier
	a.mu.Unlock()
	if p != nil {
		p.RequestFullSync()
	}
}

// networkReady records a ready network (the CNI server has it now).
func (a *Agent) networkReady(local *overlay.LocalNetwork) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.rt.cniReady, a.rt.local = true, local
	if a.rt.proxier != nil {
		if now := ProxyNode(a.cfg.NodeName, local); !sameNode(now, a.rt.proxyNode) {
			a.log.Info("The node's IPs or pod CIDRs changed after the proxy started; restart the agent for the proxy to use them",
				"was", a.rt.proxyNode, "now", now)
		}
	}
}

// syncPodEgress programs dp's pod egress masquerading for local, or, with
// local nil, for the network it last did (nothing before the first). It
// does nothing on dataplanes without it.
func (a *Agent) syncPodEgress(ctx context.Context, dp *dataplane, local *overlay.LocalNetwork) error {
	if dp.podEgress == nil {
		return nil
	}
	a.egressMu.Lock()
	defer a.egressMu.Unlock()
	if local != nil {
		a.egressLocal = local
	}
	if a.egressLocal == nil {
		return nil
	}
	return dp.podEgress(ctx, a.egressLocal)
}

// keepPodEgress syncs pod egress masquerading every sync period, which
// repairs what changed out of band (a flushed ruleset, say) and otherwise
// only reads. A failure is logged; the next period tries again.
func (a *Agent) keepPodEgress(ctx context.Context, dp *dataplane) {
	t := time.NewTicker(a.cfg.SyncPeriod.Duration)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if err := a.syncPodEgress(ctx, dp, nil); err != nil && ctx.Err() == nil {
			a.log.Error(err, "Keeping pod egress masquerading; trying again next sync period")
		}
	}
}

// keepConflist writes the conflist (once the network exists, so the
// runtime only sees a CNI config that works) and keeps it in place. An
// equal file is left alone.
func (a *Agent) keepConflist(ctx context.Context) error {
	content, err := cni.RenderConflist(cni.ConflistOptions{Network: a.cfg.Network.Name, SocketPath: a.cfg.CNI.SocketPath})
	if err != nil {
		return err
	}
	log := a.log.WithName("conflist")
	w := &cni.ConflistWriter{Path: conflistPath(a.cfg.CNI.ConfDir, a.cfg.CNI.ConflistName), Content: content, Logger: &log}
	wrote, err := w.Ensure()
	if err != nil {
		return fmt.Errorf("write the CNI conflist: %w", err)
	}
	if wrote {
		log.Info("Wrote the CNI conflist", "path", w.Path)
	}
	return w.Run(ctx, a.cfg.SyncPeriod.Duration)
}

// newAgentClient is the running agent's API client. Its reads wait out an
// API server that is down (apiwait), so the informers are not left in a
// grown backoff when it returns.
func newAgentClient(ctx context.Context, o Options, serviceCIDRs []string, log klog.Logger) (kubernetes.Interface, error) {
	rc, err := restConfig(ctx, o, serviceCIDRs, log)
	if err != nil {
		return nil, err
	}
	apiwait.WrapConfig(rc, apiwait.Options{Logger: log.WithName("apiserver")})
	client, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return nil, fmt.Errorf("API client: %w", err)
	}
	return client, nil
}
