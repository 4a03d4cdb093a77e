//go:build windows

package hns

import (
	"context"
	"strings"
	"sync"

	"github.com/Microsoft/hnslib/hcn"
)

// client is Interface over github.com/Microsoft/hnslib/hcn. It is the only
// code that imports hcn: each method converts our types to hcn's through
// their shared JSON schema, calls hcn, and classifies the error.
type client struct {
	// version keeps what HNS reported (nil: nothing kept).
	version *versionCache
}

// versionCache keeps the HNS version once HNS has answered, so the
// in-place update check costs no HNS call: it changes only with a Windows
// update (kube-proxy reads it once at start). A failed probe (HNS
// restarting, kubernetes issue 139519) is never kept, unlike hcn's
// GetCachedSupportedFeatures, which keeps its first answer whatever it was.
type versionCache struct {
	mu sync.Mutex
	v  Version
	ok bool
}

func (c *versionCache) get() (Version, bool) {
	if c == nil {
		return Version{}, false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.v, c.ok
}

func (c *versionCache) set(v Version) {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.v, c.ok = v, true
}

// minV2API is the first HNS version with the v2 API (hnslib
// hcn/hcnglobals.go, V2ApiSupport: 9.2 and later).
var minV2API = Version{Major: 9, Minor: 2}

// NewClient returns the real HNS client. It fails when the host's HNS does
// not speak the v2 API, or cannot be asked (a transient error while HNS
// restarts). It asks HNS itself rather than hcn.V2ApiSupported, which keeps
// its first answer, a failure included, for the life of the process.
func NewClient() (Interface, error) {
	c := client{version: &versionCache{}}
	v, err := c.Version(context.Background())
	if err != nil {
		return nil, err
	}
	if v.Less(minV2API) {
		return nil, &Error{Op: OpVersion, Kind: KindNotSupported,
			Msg: "HNS " + v.String() + " lacks the v2 API (needs " + minV2API.String() + " or newer)"}
	}
	return c, nil
}

// classify turns an hcn error into an *Error with the right kind.
func classify(op Op, object string, err error) error {
	if err == nil {
		return nil
	}
	for _, c := range errorCodeKinds {
		if hcn.CheckErrorWithCode(err, hcn.ErrorCode(c.code)) {
			return &Error{Op: op, Kind: c.kind, Object: object, Msg: c.name, Code: c.code, Err: err}
		}
	}
	if hcn.IsNotFoundError(err) {
		return &Error{Op: op, Kind: KindNotFound, Object: object, Err: err}
	}
	if hcn.IsPortAlreadyExistsError(err) {
		return &Error{Op: op, Kind: KindPortAlreadyExists, Object: object, Err: err}
	}
	if hcn.IsNotImplemented(err) {
		return &Error{Op: op, Kind: KindNotSupported, Object: object, Err: err}
	}
	return &Error{Op: op, Kind: KindUnknown, Object: object, Err: err}
}

// listFromHCN converts a list hcn returned, failing on the first object
// that does not translate.
func listFromHCN[H, T any](op Op, in []H, conv func(Op, *H) (*T, error)) ([]T, error) {
	out := make([]T, 0, len(in))
	for i := range in {
		v, err := conv(op, &in[i])
		if err != nil {
			return nil, err
		}
		out = append(out, *v)
	}
	return out, nil
}

func ctxErr(ctx context.Context, op Op, object string) error {
	if err := ctx.Err(); err != nil {
		return &Error{Op: op, Kind: KindTransient, Object: object, Msg: "caller gave up", Err: err}
	}
	return nil
}

func translateErr(op Op, object string, err error) error {
	return &Error{Op: op, Kind: KindInvalid, Object: object, Msg: "schema translation", Err: err}
}

func (client) CreateNetwork(ctx context.Context, n *Network) (*Network, error) {
	op := OpCreateNetwork
	if err := ctxErr(ctx, op, n.Name); err != nil {
		return nil, err
	}
	var in hcn.HostComputeNetwork
	if err := convertJSON(n, &in); err != nil {
		return nil, translateErr(op, n.Name, err)
	}
	if in.SchemaVersion == (hcn.SchemaVersion{}) {
		in.SchemaVersion = hcn.V2SchemaVersion()
	}
	created, err := in.Create()
	if err != nil {
		return nil, classify(op, n.Name, err)
	}
	return networkFromHCN(op, created)
}

func networkFromHCN(op Op, n *hcn.HostComputeNetwork) (*Network, error) {
	var out Network
	if err := convertJSON(n, &out); err != nil {
		return nil, translateErr(op, n.Id, err)
	}
	out.ID = strings.ToUpper(out.ID)
	return &out, nil
}

func (client) GetNetworkByID(ctx context.Context, id string) (*Network, error) {
	if err := ctxErr(ctx, OpGetNetworkByID, id); err != nil {
		return nil, err
	}
	n, err := hcn.GetNetworkByID(id)
	if err != nil {
		return nil, classify(OpGetNetworkByID, id, err)
	}
	return networkFromHCN(OpGetNetworkByID, n)
}

func (client) GetNetworkByName(ctx context.Context, name string) (*Network, error) {
	if err := ctxErr(ctx, OpGetNetworkByName, name); err != nil {
		return nil, err
	}
	n, err := hcn.GetNetworkByName(name)
	if err != nil {
		return nil, classify(OpGetNetworkByName, name, err)
	}
	return networkFromHCN(OpGetNetworkByName, n)
}

func (client) ListNetworks(ctx context.Context) ([]Network, error) {
	if err := ctxErr(ctx, OpListNetworks, ""); err != nil {
		return nil, err
	}
	ns, err := hcn.ListNetworks()
	if err != nil {
		return nil, classify(OpListNetworks, "", err)
	}
	return listFromHCN(OpListNetworks, ns, networkFromHCN)
}

func (client) DeleteNetwork(ctx context.Context, id string) error {
	if err := ctxErr(ctx, OpDeleteNetwork, id); err != nil {
		return err
	}
	return classify(OpDeleteNetwork, id, (&hcn.HostComputeNetwork{Id: id}).Delete())
}

func (client) modifyNetworkPolicies(ctx context.Context, op Op, networkID string, policies []NetworkPolicy) error {
	if err := ctxErr(ctx, op, networkID); err != nil {
		return err
	}
	var req hcn.PolicyNetworkRequest
	if err := convertJSON(struct{ Policies []NetworkPolicy }{policies}, &req); err != nil {
		return translateErr(op, networkID, err)
	}
	n := &hcn.HostComputeNetwork{Id: networkID}
	if op == OpAddNetworkPolicies {
		return classify(op, networkID, n.AddPolicy(req))
	}
	return classify(op, networkID, n.RemovePolicy(req))
}

func (c client) AddNetworkPolicies(ctx context.Context, networkID string, policies []NetworkPolicy) error {
	return c.modifyNetworkPolicies(ctx, OpAddNetworkPolicies, networkID, policies)
}

func (c client) RemoveNetworkPolicies(ctx context.Context, networkID string, policies []NetworkPolicy) error {
	return c.modifyNetworkPolicies(ctx, OpRemoveNetworkPolicies, networkID, policies)
}

func (client) CreateEndpoint(ctx context.Context, ep *Endpoint) (*Endpoint, error) {
	op, label := OpCreateEndpoint, endpointLabel(ep)
	if err := ctxErr(ctx, op, label); err != nil {
		return nil, err
	}
	var in hcn.HostComputeEndpoint
	if err := convertJSON(ep, &in); err != nil {
		return nil, translateErr(op, label, err)
	}
	if in.SchemaVersion == (hcn.SchemaVersion{}) {
		in.SchemaVersion = hcn.V2SchemaVersion()
	}
	network := &hcn.HostComputeNetwork{Id: ep.HostComputeNetwork}
	var created *hcn.HostComputeEndpoint
	var err error
	if ep.IsRemote() {
		created, err = network.CreateRemoteEndpoint(&in)
	} else {
		created, err = network.CreateEndpoint(&in)
	}
	if err != nil {
		return nil, classify(op, label, err)
	}
	return endpointFromHCN(op, created)
}

func endpointFromHCN(op Op, e *hcn.HostComputeEndpoint) (*Endpoint, error) {
	var out Endpoint
	if err := convertJSON(e, &out); err != nil {
		return nil, translateErr(op, e.Id, err)
	}
	out.ID = strings.ToUpper(out.ID)
	out.HostComputeNetwork = strings.ToUpper(out.HostComputeNetwork)
	out.HostComputeNamespace = strings.ToUpper(out.HostComputeNamespace)
	return &out, nil
}

func (client) GetEndpointByID(ctx context.Context, id string) (*Endpoint, error) {
	if err := ctxErr(ctx, OpGetEndpointByID, id); err != nil {
		return nil, err
	}
	e, err := hcn.GetEndpointByID(id)
	if err != nil {
		return nil, classify(OpGetEndpointByID, id, err)
	}
	return endpointFromHCN(OpGetEndpointByID, e)
}

func (client) GetEndpointByName(ctx context.Context, name string) (*Endpoint, error) {
	if err := ctxErr(ctx, OpGetEndpointByName, name); err != nil {
		return nil, err
	}
	e, err := hcn.GetEndpointByName(name)
	if err != nil {
		return nil, classify(OpGetEndpointByName, name, err)
	}
	return endpointFromHCN(OpGetEndpointByName, e)
}

func (client) ListEndpoints(ctx context.Context, networkID string) ([]Endpoint, error) {
	op := OpListEndpoints
	if err := ctxErr(ctx, op, networkID); err != nil {
		return nil, err
	}
	var es []hcn.HostComputeEndpoint
	var err error
	if networkID == "" {
		es, err = hcn.ListEndpoints()
	} else {
		es, err = hcn.ListEndpointsOfNetwork(networkID)
	}
	if err != nil {
		return nil, classify(op, networkID, err)
	}
	return listFromHCN(op, es, endpointFromHCN)
}

func (client) DeleteEndpoint(ctx context.Context, id string) error {
	if err := ctxErr(ctx, OpDeleteEndpoint, id); err != nil {
		return err
	}
	return classify(OpDeleteEndpoint, id, (&hcn.HostComputeEndpoint{Id: id}).Delete())
}

func (client) CreateNamespace(ctx context.Context, ns *Namespace) (*Namespace, error) {
	if err := ctxErr(ctx, OpCreateNamespace, ""); err != nil {
		return nil, err
	}
	typ := ns.Type
	if typ == "" {
		typ = NamespaceTypeHost
	}
	created, err := hcn.NewNamespace(hcn.NamespaceType(typ)).Create()
	if err != nil {
		return nil, classify(OpCreateNamespace, "", err)
	}
	return &Namespace{ID: strings.ToUpper(created.Id), Type: NamespaceType(created.Type)}, nil
}

func (client) GetNamespace(ctx context.Context, id string) (*Namespace, error) {
	op := OpGetNamespace
	if err := ctxErr(ctx, op, id); err != nil {
		return nil, err
	}
	ns, err := hcn.GetNamespaceByID(id)
	if err != nil {
		return nil, classify(op, id, err)
	}
	eps, err := hcn.GetNamespaceEndpointIds(id)
	if err != nil {
		return nil, classify(op, id, err)
	}
	out := &Namespace{ID: strings.ToUpper(ns.Id), Type: NamespaceType(ns.Type)}
	for _, e := range eps {
		out.EndpointIDs = append(out.EndpointIDs, strings.ToUpper(e))
	}
	return out, nil
}

func (client) DeleteNamespace(ctx context.Context, id string) error {
	if err := ctxErr(ctx, OpDeleteNamespace, id); err != nil {
		return err
	}
	return classify(OpDeleteNamespace, id, (&hcn.HostComputeNamespace{Id: id}).Delete())
}

func (client) AddNamespaceEndpoint(ctx context.Context, namespaceID, endpointID string) error {
	if err := ctxErr(ctx, OpAddNamespaceEndpoint, endpointID); err != nil {
		return err
	}
	return classify(OpAddNamespaceEndpoint, endpointID, hcn.AddNamespaceEndpoint(namespaceID, endpointID))
}

func (client) RemoveNamespaceEndpoint(ctx context.Context, namespaceID, endpointID string) error {
	if err := ctxErr(ctx, OpRemoveNamespaceEndpoint, endpointID); err != nil {
		return err
	}
	return classify(OpRemoveNamespaceEndpoint, endpointID, hcn.RemoveNamespaceEndpoint(namespaceID, endpointID))
}

func loadBalancerToHCN(op Op, lb *LoadBalancer) (*hcn.HostComputeLoadBalancer, error) {
	var in hcn.HostComputeLoadBalancer
	if err := convertJSON(lb, &in); err != nil {
		return nil, translateErr(op, frontendLabel(lb), err)
	}
	if in.SchemaVersion == (hcn.SchemaVersion{}) {
		in.SchemaVersion = hcn.V2SchemaVersion()
	}
	return &in, nil
}

func loadBalancerFromHCN(op Op, lb *hcn.HostComputeLoadBalancer) (*LoadBalancer, error) {
	var out LoadBalancer
	if err := convertJSON(lb, &out); err != nil {
		return nil, translateErr(op, lb.Id, err)
	}
	out.ID = strings.ToUpper(out.ID)
	for i, id := range out.HostComputeEndpoints {
		out.HostComputeEndpoints[i] = strings.ToUpper(id)
	}
	return &out, nil
}

func (client) CreateLoadBalancer(ctx context.Context, lb *LoadBalancer) (*LoadBalancer, error) {
	op := OpCreateLoadBalancer
	if err := ctxErr(ctx, op, frontendLabel(lb)); err != nil {
		return nil, err
	}
	in, err := loadBalancerToHCN(op, lb)
	if err != nil {
		return nil, err
	}
	created, err := in.Create()
	if err != nil {
		return nil, classify(op, frontendLabel(lb), err)
	}
	return loadBalancerFromHCN(op, created)
}

func (c client) UpdateLoadBalancer(ctx context.Context, id string, lb *LoadBalancer) (*LoadBalancer, error) {
	op := OpUpdateLoadBalancer
	if err := ctxErr(ctx, op, id); err != nil {
		return nil, err
	}
	// Our own check, not hcn.ModifyLoadbalancerSupported: that one caches
	// its first answer, a failed version probe included, for the life of
	// the process (hnslib hcn/hcnsupport.go GetCachedSupportedFeatures).
	// Version asks HNS only until it has answered once.
	v, err := c.Version(ctx)
	if err != nil {
		return nil, err
	}
	if !FeaturesFor(v).ModifyLoadbalancer {
		return nil, newError(op, KindNotSupported, id, "in-place load balancer update needs HNS %s (host has %s)", SupportedVersions(FeatureModifyLoadbalancer), v)
	}
	in, err := loadBalancerToHCN(op, lb)
	if err != nil {
		return nil, err
	}
	updated, err := in.Update(id)
	if err != nil {
		return nil, classify(op, id, err)
	}
	return loadBalancerFromHCN(op, updated)
}

func (client) GetLoadBalancer(ctx context.Context, id string) (*LoadBalancer, error) {
	if err := ctxErr(ctx, OpGetLoadBalancer, id); err != nil {
		return nil, err
	}
	lb, err := hcn.GetLoadBalancerByID(id)
	if err != nil {
		return nil, classify(OpGetLoadBalancer, id, err)
	}
	return loadBalancerFromHCN(OpGetLoadBalancer, lb)
}

func (client) ListLoadBalancers(ctx context.Context) ([]LoadBalancer, error) {
	op := OpListLoadBalancers
	if err := ctxErr(ctx, op, ""); err != nil {
		return nil, err
	}
	lbs, err := hcn.ListLoadBalancers()
	if err != nil {
		return nil, classify(op, "", err)
	}
	return listFromHCN(op, lbs, loadBalancerFromHCN)
}

func (client) DeleteLoadBalancer(ctx context.Context, id string) error {
	if err := ctxErr(ctx, OpDeleteLoadBalancer, id); err != nil {
		return err
	}
	return classify(OpDeleteLoadBalancer, id, (&hcn.HostComputeLoadBalancer{Id: id}).Delete())
}

func (c client) Version(ctx context.Context) (Version, error) {
	if err := ctxErr(ctx, OpVersion, ""); err != nil {
		return Version{}, err
	}
	if v, ok := c.version.get(); ok {
		return v, nil
	}
	g, err := hcn.GetGlobals()
	if err != nil {
		return Version{}, classify(OpVersion, "", err)
	}
	v := Version{Major: g.Version.Major, Minor: g.Version.Minor}
	c.version.set(v)
	return v, nil
}

func (c client) Features(ctx context.Context) (Features, error) {
	v, err := c.Version(ctx)
	if err != nil {
		return Features{}, err
	}
	return FeaturesFor(v), nil
}
