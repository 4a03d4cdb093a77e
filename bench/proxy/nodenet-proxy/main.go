//go:build linux

// Command nodenet-proxy runs nodenet's Linux service proxy on its own, the
// way nodenet-agent wires it: an AgentConfiguration (here from flags named
// after kube-proxy's), informers on the apiserver → brain → runner →
// nftables backend, with kube-proxy's metrics and /healthz. bench/proxy
// runs it side by side with kube-proxy.
//
//	nodenet-proxy --kubeconfig=K --hostname-override=NODE --cluster-cidr=10.244.0.0/16 \
//	    --service-cidr=10.96.0.0/12 --metrics-bind-address=IP:10249
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"net/netip"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"

	"github.com/nodenet/nodenet/config"
	"github.com/nodenet/nodenet/proxy/conntrack"
	"github.com/nodenet/nodenet/proxy/healthcheck"
	"github.com/nodenet/nodenet/proxy/metrics"
	"github.com/nodenet/nodenet/proxy/nftables"
	"github.com/nodenet/nodenet/proxy/proxier"
	"github.com/nodenet/nodenet/proxy/source"
)

type flags struct {
	kubeconfig   string
	node         string
	clusterCIDRs string
	serviceCIDRs string
	metrics      string
	healthz      string
	minSync      time.Duration
	sync         time.Duration
	configSync   time.Duration
	nodeWait     time.Duration
}

func main() {
	var f flags
	flag.StringVar(&f.kubeconfig, "kubeconfig", "", "kubeconfig of the apiserver (required)")
	flag.StringVar(&f.node, "hostname-override", "", "this node's Node name (default: NODE_NAME, then the hostname)")
	flag.StringVar(&f.clusterCIDRs, "cluster-cidr", "", "the cluster's pod CIDRs, comma-separated (required)")
	flag.StringVar(&f.serviceCIDRs, "service-cidr", "10.96.0.0/12", "the cluster's service CIDRs, comma-separated")
	flag.StringVar(&f.metrics, "metrics-bind-address", "127.0.0.1:10249", "IP:port of /metrics; port 0 disables it")
	flag.StringVar(&f.healthz, "healthz-bind-address", "0.0.0.0:10256", "IP:port of /healthz and /livez; port 0 disables it")
	flag.DurationVar(&f.minSync, "min-sync-period", time.Second, "least time between syncs")
	flag.DurationVar(&f.sync, "sync-period", 30*time.Second, "most time between syncs")
	flag.DurationVar(&f.configSync, "config-sync-period", 15*time.Minute, "informer resync period (kube-proxy's configSyncPeriod)")
	flag.DurationVar(&f.nodeWait, "node-wait", 30*time.Second, "how long to wait for this node's Node")
	klog.InitFlags(nil)
	flag.Parse()

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	logger := klog.Background()
	if err := run(ctx, f, logger); err != nil {
		logger.Error(err, "nodenet-proxy failed")
		klog.Flush()
		os.Exit(1)
	}
	klog.Flush()
}

func run(ctx context.Context, f flags, logger klog.Logger) error {
	if f.kubeconfig == "" || f.clusterCIDRs == "" {
		return errors.New("--kubeconfig and --cluster-cidr are required")
	}
	cfg, err := agentConfig(f)
	if err != nil {
		return err
	}
	client, err := newClient(f.kubeconfig)
	if err != nil {
		return err
	}
	node, err := waitForNode(ctx, client, cfg.NodeName, f.nodeWait)
	if err != nil {
		return err
	}
	logger.Info("Node found", "node", node.Name, "ips", node.IPs, "podCIDRs", node.PodCIDRs)

	reg := metrics.NewRegistry()
	m := metrics.New(reg, proxier.Families(cfg)...)
	backend, err := newBackend(cfg, node, m, logger)
	if err != nil {
		return err
	}
	health := healthcheck.NewProxyHealth(healthcheck.ProxyHealthOptions{
		HealthTimeout: 2 * f.sync, Probes: m, Logger: logger,
	})
	serviceHealth, err := newServiceHealth(cfg, node, health, logger)
	if err != nil {
		return err
	}
	brainOpts := proxier.BrainOptions(cfg, node)
	brainOpts.Logger = logger
	p, err := proxier.New(proxier.Options{
		Source: source.NewInformers(source.InformerOptions{
			Client: client, NodeName: cfg.NodeName, ResyncPeriod: f.configSync, Logger: logger,
		}),
		Backend:       backend,
		Brain:         brainOpts,
		MinSyncPeriod: cfg.MinSyncPeriod.Duration,
		SyncPeriod:    cfg.SyncPeriod.Duration,
		Metrics:       m,
		Health:        health,
		ServiceHealth: serviceHealth,
		Logger:        logger,
	})
	if err != nil {
		return err
	}

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	errs := make(chan error, 3)
	go func() { errs <- serve(ctx, "metrics", cfg.Proxy.MetricsBindAddress, metrics.Handler(reg), logger) }()
	go func() { errs <- serve(ctx, "healthz", cfg.Proxy.HealthzBindAddress, health.Handler(), logger) }()
	go func() { errs <- p.Run(ctx) }()
	err = <-errs
	cancel()
	return err
}

// agentConfig is the AgentConfiguration the flags describe, defaulted and
// validated as the agent's is.
func agentConfig(f flags) (*config.AgentConfiguration, error) {
	cfg := &config.AgentConfiguration{
		ClusterCIDRs:  strings.Split(f.clusterCIDRs, ","),
		ServiceCIDRs:  strings.Split(f.serviceCIDRs, ","),
		NodeName:      f.node,
		SyncPeriod:    metav1.Duration{Duration: f.sync},
		MinSyncPeriod: &metav1.Duration{Duration: f.minSync},
		Proxy:         config.ProxyConfiguration{MetricsBindAddress: f.metrics, HealthzBindAddress: f.healthz},
	}
	config.SetDefaults(cfg, config.DefaultingOptions{OS: config.OSLinux})
	if errs, _ := config.Validate(cfg, config.ValidationOptions{OS: config.OSLinux}); len(errs) > 0 {
		return nil, fmt.Errorf("config: %w", errs.ToAggregate())
	}
	return cfg, nil
}

// newClient is an API client with kube-proxy's defaults.
func newClient(kubeconfig string) (kubernetes.Interface, error) {
	restConfig, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("kubeconfig: %w", err)
	}
	restConfig.ContentType = "application/vnd.kubernetes.protobuf"
	restConfig.QPS, restConfig.Burst = 5, 10
	client, err := kubernetes.NewForConfig(restConfig)
	if err != nil {
		return nil, fmt.Errorf("client: %w", err)
	}
	return client, nil
}

// newBackend is the nftables backend as the agent builds it, with
// conntrack flushing and its operations counted in m.
func newBackend(cfg *config.AgentConfiguration, node proxier.Node, m *metrics.Metrics, logger klog.Logger) (*nftables.Backend, error) {
	nftOpts, err := proxier.NFTablesOptions(cfg, node)
	if err != nil {
		return nil, err
	}
	nftOpts.Conntrack = conntrack.New(conntrack.Options{Logger: logger})
	nftOpts.Observe = func(op string, err error, d time.Duration) { m.ObserveOperation("nftables", op, err, d) }
	nftOpts.Logger = logger
	backend, err := nftables.New(nftOpts)
	if err != nil {
		return nil, fmt.Errorf("nftables backend: %w", err)
	}
	return backend, nil
}

// newServiceHealth serves the health check node ports on the node-port
// addresses that are single IPs.
func newServiceHealth(cfg *config.AgentConfiguration, node proxier.Node, health *healthcheck.ProxyHealth, logger klog.Logger) (*healthcheck.ServiceHealth, error) {
	nodePorts, err := proxier.NodePortPrefixes(cfg, node)
	if err != nil {
		return nil, err
	}
	var nodePortAddrs []netip.Addr
	for _, p := range nodePorts {
		if p.IsSingleIP() {
			nodePortAddrs = append(nodePortAddrs, p.Addr())
		}
	}
	return healthcheck.NewServiceHealth(healthcheck.ServiceHealthOptions{
		Addresses: nodePortAddrs, ProxyHealth: health, Logger: logger,
	}), nil
}

// serve runs one HTTP server until ctx is done; a disabled one (port 0)
// just waits.
func serve(ctx context.Context, what, addr string, h http.Handler, logger klog.Logger) error {
	if err := healthcheck.Serve(ctx, addr, h, logger); err != nil {
		return fmt.Errorf("%s server: %w", what, err)
	}
	<-ctx.Done()
	return nil
}

// waitForNode reads this node's IPs and pod CIDRs from its Node, waiting
// for it to be registered, as kube-proxy does.
func waitForNode(ctx context.Context, client kubernetes.Interface, name string, wait time.Duration) (proxier.Node, error) {
	deadline := time.Now().Add(wait)
	for {
		n, err := client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err == nil {
			return nodeFacts(n), nil
		}
		if !apierrors.IsNotFound(err) || time.Now().After(deadline) {
			return proxier.Node{}, fmt.Errorf("get node %s: %w", name, err)
		}
		select {
		case <-ctx.Done():
			return proxier.Node{}, ctx.Err()
		case <-time.After(time.Second):
		}
	}
}

func nodeFacts(n *v1.Node) proxier.Node {
	node := proxier.Node{Name: n.Name}
	for _, a := range n.Status.Addresses {
		if a.Type != v1.NodeInternalIP {
			continue
		}
		if ip, err := netip.ParseAddr(a.Address); err == nil {
			node.IPs = append(node.IPs, ip)
		}
	}
	for _, c := range n.Spec.PodCIDRs {
		if p, err := netip.ParsePrefix(c); err == nil {
			node.PodCIDRs = append(node.PodCIDRs, p)
		}
	}
	return node
}
