package agent

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"strings"

	"k8s.io/apimachinery/pkg/util/uuid"

	"github.com/nodenet/nodenet/config"
	"github.com/nodenet/nodenet/ipam/nodecidr"
)

// Where the pod CIDR allocator's Lease lives: the agent's own namespace.
const (
	// PodNamespaceEnv is set from the downward API (metadata.namespace).
	PodNamespaceEnv = "POD_NAMESPACE"
	// serviceAccountNamespaceFile is the in-cluster client's namespace.
	serviceAccountNamespaceFile = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"
	// DefaultAgentNamespace is deploy/'s namespace, used when neither says.
	DefaultAgentNamespace = "nodenet-system"
)

// runPodCIDRAllocator takes part in the election for the pod CIDR
// allocator (network.podCIDRAllocation: agent) until ctx ends; every agent
// runs one and the leader assigns. Offline (no API client) there is
// nothing to assign.
func (a *Agent) runPodCIDRAllocator(ctx context.Context, p *parts) error {
	if p.client == nil {
		return nil
	}
	cfg := a.cfg
	var cidrs []netip.Prefix
	for _, s := range cfg.ClusterCIDRs {
		if c, err := netip.ParsePrefix(s); err == nil {
			cidrs = append(cidrs, c)
		}
	}
	alloc, err := nodecidr.New(nodecidr.Options{
		Client:       p.client,
		ClusterCIDRs: cidrs,
		MaskSizeIPv4: int(deref(cfg.Network.NodeCIDRMaskSizeIPv4, config.DefaultNodeCIDRMaskSizeIPv4)),
		MaskSizeIPv6: int(deref(cfg.Network.NodeCIDRMaskSizeIPv6, config.DefaultNodeCIDRMaskSizeIPv6)),
		Namespace:    agentNamespace(a.opts.Getenv, os.ReadFile),
		// Unique per process, as kube-controller-manager's: an old and a
		// new agent pod on one node (a surge rollout) must not both lead.
		Identity: cfg.NodeName + "_" + string(uuid.NewUUID()),
		Recorder: p.recorder,
		Logger:   a.log.WithName("pod-cidr-allocator"),
	})
	if err != nil {
		// Config validation catches these first; with configHardFail: false
		// they end up here.
		return fmt.Errorf("network.podCIDRAllocation agent (clusterCIDRs, network.nodeCIDRMaskSizeIPv4/IPv6): %w", err)
	}
	return alloc.Run(ctx)
}

func deref(p *int32, def int32) int32 {
	if p == nil {
		return def
	}
	return *p
}

// agentNamespace is POD_NAMESPACE, else the service account's namespace
// file, else DefaultAgentNamespace.
func agentNamespace(getenv func(string) string, readFile func(string) ([]byte, error)) string {
	if getenv == nil {
		getenv = os.Getenv
	}
	if ns := strings.TrimSpace(getenv(PodNamespaceEnv)); ns != "" {
		return ns
	}
	if b, err := readFile(serviceAccountNamespaceFile); err == nil {
		if ns := strings.TrimSpace(string(b)); ns != "" {
			return ns
		}
	}
	return DefaultAgentNamespace
}
