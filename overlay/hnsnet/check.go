package hnsnet

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/nodenet/nodenet/hns"
)

// Check implements overlay.Interface with reads only: the network (by ID)
// and our endpoint must exist as EnsureLocal left them. HNS errors other
// than not-found (a restarting HNS) are returned as they are, never read
// as "absent".
func (n *Network) Check(ctx context.Context) error {
	c := n.cur
	if c == nil {
		return errors.New("hnsnet: no local network yet")
	}
	nw, err := n.hns.GetNetworkByID(ctx, c.networkID)
	if err != nil {
		return fmt.Errorf("HNS network %q (%s): %w", c.plan.spec.Name, c.networkID, err)
	}
	if !strings.EqualFold(nw.Name, c.plan.spec.Name) || nw.Type != c.plan.netType {
		return fmt.Errorf("HNS network %s is now %q of type %s, want %q of type %s", c.networkID, nw.Name, nw.Type, c.plan.spec.Name, c.plan.netType)
	}
	ep, err := n.hns.GetEndpointByID(ctx, c.endpointID)
	if err != nil {
		return fmt.Errorf("endpoint %q (%s): %w", c.plan.epName, c.endpointID, err)
	}
	if !strings.EqualFold(ep.HostComputeNetwork, c.networkID) || !hasIP(ep, c.plan.epIP) {
		return fmt.Errorf("endpoint %s no longer holds %s on network %s", c.endpointID, c.plan.epIP, c.networkID)
	}
	if c.plan.netType == hns.NetworkTypeL2Bridge && ep.HostComputeNamespace == "" {
		return fmt.Errorf("host endpoint %q is no longer attached to the host", c.plan.epName)
	}
	return nil
}
