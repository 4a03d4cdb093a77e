package hnslb

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"sync"
	"time"

	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"

	"github.com/nodenet/nodenet/hns"
	"github.com/nodenet/nodenet/overlay"
	"github.com/nodenet/nodenet/proxy"
	"github.com/nodenet/nodenet/proxy/diffstore"
)

// Network is what the backend takes from the node network part: the HNS
// network it programs on (with its source VIP) and the other nodes.
// overlay.Controller implements it.
type Network interface {
	// Local returns the ready network, or nil while it is not ready.
	Local() *overlay.LocalNetwork
	// Remotes returns the other nodes: which node owns which pod CIDR,
	// and its provider address.
	Remotes() []overlay.RemoteNode
}

// StaticNetwork is a Network that never changes (tests, the files source,
// nodenetctl).
type StaticNetwork struct {
	Net   *overlay.LocalNetwork
	Nodes []overlay.RemoteNode
}

// Local implements Network.
func (s StaticNetwork) Local() *overlay.LocalNetwork { return s.Net }

// Remotes implements Network.
func (s StaticNetwork) Remotes() []overlay.RemoteNode { return s.Nodes }

// Options configure New.
type Options struct {
	// HNS is the host's HNS (hns.NewClient on Windows, hns.NewSimulator in
	// tests and with --dataplane=sim). Required.
	HNS hns.Interface
	// Network is the node network part. Required.
	Network Network
	// ClusterCIDRs are the cluster's pod CIDRs (config clusterCIDRs). A
	// backend outside all of them gets the node IP as source VIP
	// (KEP-5100 rule a). Empty: the pod CIDRs of the known nodes.
	ClusterCIDRs []netip.Prefix
	// ServiceCIDRs are where cluster IPs come from. A load balancer with
	// a frontend in them is ours (see the package documentation).
	ServiceCIDRs []netip.Prefix
	// EnableDSR (config proxy.enableDSR) puts the DSR flag on cluster-IP
	// load balancers. A host without DSR fails every Sync with a clear
	// error, as kube-proxy refuses to start.
	EnableDSR bool
	// MaxBackendsPerLoadBalancer (config windows.maxBackendsPerLoadBalancer)
	// caps the backends of each load balancer. 0: the host's limit,
	// hns.MaxBackendsPerLoadBalancer of HNS.OSBuild (64 before Windows
	// Server 2019 build 17763.2746, 1024 from it on).
	MaxBackendsPerLoadBalancer int
	// ForwardHealthCheckVIP programs, for each load-balancer ingress IP, a
	// load balancer that forwards the service's health-check node port
	// (HealthzPort when it has none) to the host, as kube-proxy's
	// forwardHealthCheckVip does.
	ForwardHealthCheckVIP bool
	// HealthzPort is the proxy's healthz port for ForwardHealthCheckVIP.
	HealthzPort uint16
	// Recorder receives events on Services whose ports cannot be
	// programmed as asked (SCTP, session affinity, the backend limit).
	Recorder record.EventRecorder
	// Observe, if set, is called after each HNS call with its name
	// (OpCreateLoadBalancer, ...) its error and its latency, and with a
	// zero duration for each condition reported on a Service
	// (OpAffinityUnsupported, ...).
	Observe func(op string, err error, d time.Duration)
	// Logger receives structured logs; the zero value uses klog's.
	Logger klog.Logger
}

// Operation names given to Options.Observe.
const (
	OpGetNetwork          = "get_network"
	OpListEndpoints       = "list_endpoints"
	OpListLoadBalancers   = "list_load_balancers"
	OpCreateEndpoint      = "create_endpoint"
	OpDeleteEndpoint      = "delete_endpoint"
	OpCreateLoadBalancer  = "create_load_balancer"
	OpUpdateLoadBalancer  = "update_load_balancer"
	OpDeleteLoadBalancer  = "delete_load_balancer"
	OpFeatures            = "features"
	OpAffinityUnsupported = "session_affinity_unsupported"
	OpSCTPUnsupported     = "sctp_unsupported"
	OpBackendLimit        = "backend_limit"
	OpDSRUnsupported      = "dsr_unsupported"
	OpMixedTargetPorts    = "mixed_target_ports"
	// OpSourceRangesUnsupported counts service ports whose
	// loadBalancerSourceRanges HNS cannot enforce (see the package doc).
	OpSourceRangesUnsupported = "load_balancer_source_ranges_unsupported"
)

// Backend is the Windows proxy.Backend: it programs HNS load balancers
// and remote endpoints (see the package documentation).
type Backend struct {
	hns     hns.Interface
	network Network
	opts    Options
	log     klog.Logger
	report  *reporter

	mu sync.Mutex
	// features are read from HNS once; modifyLB is cleared when HNS turns
	// an in-place update down after all.
	features *hns.Features
	modifyLB bool
	// networkID and netKey identify the network facts the committed state
	// was built with; a change forces a full sync (and a new network
	// starts from nothing).
	networkID string
	netKey    string
	needFull  bool
	// store holds the desired load balancers of the last successful sync.
	store *diffstore.Store[owner, frontend, *lbSpec]
	// refs counts, per remote endpoint address, the committed load
	// balancers that need it.
	refs map[netip.Addr]int
	// applied is what HNS holds for each frontend, as far as we know.
	applied map[frontend]*appliedLB
	// eps is our view of the network's HNS endpoints.
	eps *endpointView
}

var _ proxy.Backend = (*Backend)(nil)

// New checks opts and returns a Backend. It makes no HNS call (the
// Windows build, for the backend limit, comes from Windows): the first
// Sync lists what is there and adopts it.
func New(opts Options) (*Backend, error) {
	if opts.HNS == nil {
		return nil, errors.New("hnslb: Options.HNS is required")
	}
	if opts.Network == nil {
		return nil, errors.New("hnslb: Options.Network is required")
	}
	if opts.MaxBackendsPerLoadBalancer < 0 {
		return nil, errors.New("hnslb: Options.MaxBackendsPerLoadBalancer must not be negative")
	}
	log := opts.Logger
	if log.GetSink() == nil {
		log = klog.Background()
	}
	log = log.WithName("hnslb")
	if opts.MaxBackendsPerLoadBalancer == 0 {
		// The build is read from Windows, not HNS: it does not fail
		// while HNS restarts, so reading it once here is safe.
		build, err := opts.HNS.OSBuild(context.Background())
		if err != nil {
			return nil, fmt.Errorf("hnslb: read the Windows build for the backend limit: %w", err)
		}
		opts.MaxBackendsPerLoadBalancer = hns.MaxBackendsPerLoadBalancer(build)
		log.V(1).Info("Backends per load balancer follow the host", "max", opts.MaxBackendsPerLoadBalancer, "windowsBuild", build.String())
	}
	b := &Backend{
		hns:     opts.HNS,
		network: opts.Network,
		opts:    opts,
		log:     log,
		report:  newReporter(opts.Recorder, opts.Observe, log),
	}
	b.reset("")
	return b, nil
}

// Name implements proxy.Backend.
func (b *Backend) Name() string { return "hns" }

// reset forgets everything known about HNS: for a new network (its
// endpoints and load balancers went with the old one) and at start.
func (b *Backend) reset(networkID string) {
	b.networkID = networkID
	b.netKey = ""
	b.needFull = true
	b.store = diffstore.New[owner, frontend, *lbSpec](equalSpec)
	b.refs = map[netip.Addr]int{}
	b.applied = map[frontend]*appliedLB{}
	b.eps = newEndpointView()
}

// observe reports one HNS call to Options.Observe.
func (b *Backend) observe(op string, start time.Time, err error) {
	if b.opts.Observe != nil {
		b.opts.Observe(op, err, time.Since(start))
	}
}
