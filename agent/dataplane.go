package agent

import (
	"context"
	"fmt"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"

	"github.com/nodenet/nodenet/agent/status"
	"github.com/nodenet/nodenet/cni"
	"github.com/nodenet/nodenet/config"
	"github.com/nodenet/nodenet/hns"
	"github.com/nodenet/nodenet/overlay"
	"github.com/nodenet/nodenet/proxy"
	"github.com/nodenet/nodenet/proxy/hnslb"
	"github.com/nodenet/nodenet/proxy/metrics"
	"github.com/nodenet/nodenet/proxy/proxier"
)

// dataplane is what one --dataplane value builds: the node network, the
// pod wiring and (once the network is ready) the proxy backend, all over
// the same host state.
type dataplane struct {
	network overlay.Interface
	wiring  cni.Wiring
	// newBackend builds the proxy backend from the network's facts.
	newBackend func(backendInputs) (proxy.Backend, error)
	// beforeProxy, if set, prepares the host for the proxy (the conntrack
	// sysctls on Linux); its error is logged, not fatal.
	beforeProxy func(cfg *config.AgentConfiguration, log klog.Logger) error
	// podEgress, if set, makes this node's pods reach destinations outside
	// the cluster with the node's address, or undoes that when the config
	// turns it off (Linux; Windows pods get outbound NAT from HNS). It is
	// idempotent and writes only what differs.
	podEgress func(ctx context.Context, local *overlay.LocalNetwork) error
	// dump reads what the dataplane holds, for the local API.
	dump func(ctx context.Context) ([]status.Section, error)
	// hnsStatus, on HNS dataplanes, reads the host's HNS version and
	// build for the local API.
	hnsStatus func(ctx context.Context) *status.HNSStatus
	// healthCheckPorts is false where the proxy's health-check node ports
	// must not open real listeners (the simulator).
	healthCheckPorts bool
	// close releases handles; the dataplane itself stays programmed.
	close func()
}

// backendInputs are what a proxy backend is built from: the one config and
// the facts the network part established.
type backendInputs struct {
	cfg      *config.AgentConfiguration
	node     proxier.Node
	network  hnslb.Network
	metrics  *metrics.Metrics
	recorder record.EventRecorder
	logger   klog.Logger
}

// buildInputs are what building a dataplane may need.
type buildInputs struct {
	cfg    *config.AgentConfiguration
	client kubernetes.Interface
	// nodes, offline, is where this node's Node is read (no client then).
	nodes  nodeGetter
	logger klog.Logger
	// hostHNS is the host's HNS client (Windows, --dataplane=hns).
	hostHNS hns.Interface
}

// buildDataplane builds dp's pieces. It writes nothing to the host.
func buildDataplane(ctx context.Context, dp Dataplane, in buildInputs) (*dataplane, error) {
	switch dp {
	case DataplaneLinux:
		return buildLinux(in)
	case DataplaneHNS:
		return buildHostHNS(in)
	case DataplaneSim:
		return buildSim(ctx, in)
	}
	return nil, fmt.Errorf("unknown dataplane %q", dp)
}
