package agent

import (
	"context"
	"fmt"
	"net/netip"
	"slices"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/record"

	"github.com/nodenet/nodenet/config"
	"github.com/nodenet/nodenet/internal/netaddr"
	"github.com/nodenet/nodenet/overlay"
	"github.com/nodenet/nodenet/proxy/healthcheck"
	"github.com/nodenet/nodenet/proxy/metrics"
	"github.com/nodenet/nodenet/proxy/proxier"
	"github.com/nodenet/nodenet/proxy/source"
)

// proxyInputs are what Run hands the proxy once the network is ready.
type proxyInputs struct {
	client   kubernetes.Interface
	folder   *source.Folder // offline: the proxy's source
	ctrl     *overlay.Controller
	dp       *dataplane
	metrics  *metrics.Metrics
	health   *healthcheck.ProxyHealth
	recorder record.EventRecorder
}

// runProxy builds the proxy from the ready network's facts and runs it
// until ctx ends. It is called once: the network's name, source VIP and
// remote nodes reach the HNS backend live through the controller; the
// node IPs and pod CIDRs are read here.
func (a *Agent) runProxy(ctx context.Context, in proxyInputs) error {
	local := in.ctrl.Local()
	if local == nil {
		a.mu.Lock()
		local = a.rt.local
		a.mu.Unlock()
	}
	if local == nil {
		return fmt.Errorf("network not ready")
	}
	cfg, log := a.cfg, a.log.WithName("proxy")
	node := ProxyNode(cfg.NodeName, local)
	if in.dp.beforeProxy != nil {
		if err := in.dp.beforeProxy(cfg, log); err != nil {
			log.Error(err, "Preparing the host for the proxy; going on")
		}
	}
	backend, err := in.dp.newBackend(backendInputs{
		cfg: cfg, node: node, network: in.ctrl, metrics: in.metrics, recorder: in.recorder, logger: log,
	})
	if err != nil {
		return fmt.Errorf("%s backend: %w", a.opts.Dataplane.ProxyBackend(), err)
	}
	var src source.Interface
	if in.folder != nil {
		src = in.folder.Proxy()
	} else if src, err = a.source.New(source.Options{Client: in.client, NodeName: cfg.NodeName, Logger: log}); err != nil {
		return err
	}
	opts, err := ProxierOptions(cfg, node)
	if err != nil {
		return err
	}
	opts.Source, opts.Backend = src, backend
	opts.Brain.Recorder = in.recorder
	opts.Brain.Logger = log.WithName("brain")
	opts.Metrics, opts.Health = in.metrics, in.health
	opts.Logger = log
	if in.dp.healthCheckPorts {
		sh := healthcheck.NewServiceHealth(healthcheck.ServiceHealthOptions{
			Addresses: nodePortAddresses(cfg, node), ProxyHealth: in.health, Logger: log,
		})
		defer sh.Close()
		opts.ServiceHealth = sh
	}
	p, err := proxier.New(opts)
	if err != nil {
		return err
	}
	a.mu.Lock()
	a.rt.proxier, a.rt.proxyNode = p, node
	a.mu.Unlock()
	log.Info("Starting the service proxy", "backend", backend.Name(), "nodeIPs", node.IPs, "podCIDRs", node.PodCIDRs,
		"network", local.Name, "sourceVIP", netaddr.OrNone(local.SourceVIP), "dsr", cfg.Proxy.EnableDSR)
	return p.Run(ctx)
}

// ProxierOptions are the proxier's options from the one config and the
// network's facts about this node: the brain's and the sync periods
// (Source, Backend and the observers are the caller's).
func ProxierOptions(cfg *config.AgentConfiguration, node proxier.Node) (proxier.Options, error) {
	if _, err := proxier.NodePortPrefixes(cfg, node); err != nil {
		return proxier.Options{}, err
	}
	opts := proxier.Options{
		Brain:      proxier.BrainOptions(cfg, node),
		SyncPeriod: cfg.SyncPeriod.Duration,
	}
	if cfg.MinSyncPeriod != nil {
		opts.MinSyncPeriod = cfg.MinSyncPeriod.Duration
	}
	return opts, nil
}

// nodePortAddresses are the single addresses nodePortAddresses resolves
// to for node, where health-check node ports listen; empty (every
// address) when it names CIDRs or nothing.
func nodePortAddresses(cfg *config.AgentConfiguration, node proxier.Node) []netip.Addr {
	prefixes, _ := proxier.NodePortPrefixes(cfg, node)
	var out []netip.Addr
	for _, p := range prefixes {
		if !p.IsSingleIP() {
			return nil
		}
		out = append(out, p.Addr())
	}
	return out
}

// sameNode reports whether a and b hold the same facts.
func sameNode(a, b proxier.Node) bool {
	return a.Name == b.Name && slices.Equal(a.IPs, b.IPs) && slices.Equal(a.PodCIDRs, b.PodCIDRs)
}
