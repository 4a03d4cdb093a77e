//go:build windows

package hns

import (
	"context"
	"encoding/json"
	"strings"

	"github.com/Microsoft/hnslib/hcn"
)

// ListNamespaces implements Interface with hcn.ListNamespaces; each
// namespace's attached endpoints come from its Resources, so the listing
// is one HNS call.
func (client) ListNamespaces(ctx context.Context) ([]Namespace, error) {
	op := OpListNamespaces
	if err := ctxErr(ctx, op, ""); err != nil {
		return nil, err
	}
	nss, err := hcn.ListNamespaces()
	if err != nil {
		return nil, classify(op, "", err)
	}
	return listFromHCN(op, nss, namespaceFromHCN)
}

// namespaceFromHCN converts an hcn namespace: its NamespaceId is the
// compartment, and its endpoint resources carry {"ID": ...}.
func namespaceFromHCN(op Op, ns *hcn.HostComputeNamespace) (*Namespace, error) {
	out := &Namespace{ID: strings.ToUpper(ns.Id), Type: NamespaceType(ns.Type), Compartment: ns.NamespaceId}
	for _, r := range ns.Resources {
		if r.Type != hcn.NamespaceResourceTypeEndpoint {
			continue
		}
		var ep hcn.NamespaceResourceEndpoint
		if err := json.Unmarshal(r.Data, &ep); err != nil {
			return nil, translateErr(op, ns.Id, err)
		}
		out.EndpointIDs = append(out.EndpointIDs, strings.ToUpper(ep.Id))
	}
	return out, nil
}
