package hnsnet

import (
	"context"

	"github.com/nodenet/nodenet/hns"
)

// counted counts the HNS write calls this package makes (tried, like the
// simulator counts them), for LocalNetwork.Writes and SyncResult.Writes.
type counted struct {
	hns.Interface
	writes int
}

func (c *counted) CreateNetwork(ctx context.Context, n *hns.Network) (*hns.Network, error) {
	c.writes++
	return c.Interface.CreateNetwork(ctx, n)
}

func (c *counted) DeleteNetwork(ctx context.Context, id string) error {
	c.writes++
	return c.Interface.DeleteNetwork(ctx, id)
}

func (c *counted) AddNetworkPolicies(ctx context.Context, id string, ps []hns.NetworkPolicy) error {
	c.writes++
	return c.Interface.AddNetworkPolicies(ctx, id, ps)
}

func (c *counted) RemoveNetworkPolicies(ctx context.Context, id string, ps []hns.NetworkPolicy) error {
	c.writes++
	return c.Interface.RemoveNetworkPolicies(ctx, id, ps)
}

func (c *counted) CreateEndpoint(ctx context.Context, ep *hns.Endpoint) (*hns.Endpoint, error) {
	c.writes++
	return c.Interface.CreateEndpoint(ctx, ep)
}

func (c *counted) DeleteEndpoint(ctx context.Context, id string) error {
	c.writes++
	return c.Interface.DeleteEndpoint(ctx, id)
}

func (c *counted) CreateNamespace(ctx context.Context, ns *hns.Namespace) (*hns.Namespace, error) {
	c.writes++
	return c.Interface.CreateNamespace(ctx, ns)
}

func (c *counted) AddNamespaceEndpoint(ctx context.Context, nsID, epID string) error {
	c.writes++
	return c.Interface.AddNamespaceEndpoint(ctx, nsID, epID)
}
