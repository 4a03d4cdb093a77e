package agent

import (
	"context"
	"net/netip"
	"slices"

	"github.com/nodenet/nodenet/config"
	"github.com/nodenet/nodenet/overlay"
	"github.com/nodenet/nodenet/overlay/egress"
)

// podEgress is the Linux dataplane's pod egress step: with
// linux.masqueradePodEgress on (the default) the egress table masquerades
// this node's pods leaving every cluster CIDR; off, the table is removed.
func podEgress(cfg *config.AgentConfiguration, e *egress.Egress) func(context.Context, *overlay.LocalNetwork) error {
	return func(ctx context.Context, local *overlay.LocalNetwork) error {
		if !masqueradePodEgress(cfg) {
			_, err := e.Remove(ctx)
			return err
		}
		_, err := e.Ensure(ctx, podEgressSpec(cfg, local))
		return err
	}
}

// podEgressSpec is what the egress table masquerades on this node: its
// pods' traffic to outside every cluster CIDR the config names (all of
// them, not only the effective families': keeping a pod's source is the
// safe side).
func podEgressSpec(cfg *config.AgentConfiguration, local *overlay.LocalNetwork) egress.Spec {
	spec := egress.Spec{PodCIDRs: slices.Clone(local.PodCIDRs)}
	for _, s := range cfg.ClusterCIDRs {
		// Validation reported a bad one; with configHardFail false the
		// agent goes on without it.
		if p, err := netip.ParsePrefix(s); err == nil {
			spec.ClusterCIDRs = append(spec.ClusterCIDRs, p)
		}
	}
	return spec
}

// masqueradePodEgress is linux.masqueradePodEgress, true when unset.
func masqueradePodEgress(cfg *config.AgentConfiguration) bool {
	return cfg.Linux.MasqueradePodEgress == nil || *cfg.Linux.MasqueradePodEgress
}
