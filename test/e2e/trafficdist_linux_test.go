package e2e

// Address plan: see services_helpers_linux_test.go.

import (
	"maps"
	"net/netip"
	"slices"
	"testing"

	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"

	"github.com/nodenet/nodenet/internal/testroot"
	"github.com/nodenet/nodenet/test/netnode"
)

// TestTrafficDistribution sends real packets through node-1's nftables
// proxy for Services with spec.trafficDistribution, their slices hinted
// as the EndpointSlice controller hints them. node-1 (the client's node,
// with be-1) is in zone-a; node-2 (be-2, be-3) in zone-b.
func TestTrafficDistribution(t *testing.T) {
	testroot.Require(t, "node network namespaces and nftables")
	e := newServiceEnv(t, serviceEnvOptions{})
	p := e.startProxy(t)
	be1, be2, be3 := e.backends["be-1"], e.backends["be-2"], e.backends["be-3"]
	zones := map[string]string{e.node1.Name: "zone-a", e.node2.Name: "zone-b"}
	node1 := e.nodeObject(e.node1)
	node1.Labels[v1.LabelTopologyZone] = zones[e.node1.Name]

	closeSvc := service("close", "10.96.0.30", v1.ProtocolTCP, nodePort(30090, v1.ServiceExternalTrafficPolicyCluster),
		withTrafficDistribution(v1.ServiceTrafficDistributionPreferClose))
	far := service("far", "10.96.0.31", v1.ProtocolTCP, withTrafficDistribution(v1.ServiceTrafficDistributionPreferClose))
	sameNode := service("same-node", "10.96.0.32", v1.ProtocolTCP, withTrafficDistribution(v1.ServiceTrafficDistributionPreferSameNode))
	p.apply(node1,
		closeSvc, hinted(slice(closeSvc, 1, be1, be2, be3), zones, false),
		far, hinted(slice(far, 1, be2, be3), zones, false),
		sameNode, hinted(slice(sameNode, 1, be1, be2, be3), zones, true),
	)
	p.sync(t)

	closeCIP := netip.MustParseAddrPort("10.96.0.30:80")
	for _, c := range []struct {
		name string
		from *netnode.NS
		dst  netip.AddrPort
		want []string
	}{
		{"PreferClose keeps a pod's cluster-IP traffic in its zone", e.client.NS, closeCIP, []string{be1.Name}},
		{"PreferClose keeps outside traffic to an eTP Cluster node port in node-1's zone", e.outside.NS, netip.AddrPortFrom(e.node1.IP, 30090), []string{be1.Name}},
		{"with no endpoint in the zone every endpoint is used", e.client.NS, netip.MustParseAddrPort("10.96.0.31:80"), []string{be2.Name, be3.Name}},
		{"PreferSameNode keeps a pod's traffic on its node", e.client.NS, netip.MustParseAddrPort("10.96.0.32:80"), []string{be1.Name}},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := backendsSeen(t, c.from, c.dst); !slices.Equal(got, c.want) {
				t.Errorf("%s -> %s reached %v, want %v", c.from.Name, c.dst, got, c.want)
			}
		})
	}

	t.Run("when the zone's last endpoint leaves, traffic falls back to every endpoint", func(t *testing.T) {
		p.update(nil, hinted(slice(closeSvc, 2, be2, be3), zones, false))
		p.sync(t)
		want := []string{be2.Name, be3.Name}
		if got := backendsSeen(t, e.client.NS, closeCIP); !slices.Equal(got, want) {
			t.Errorf("reached %v, want %v", got, want)
		}
	})
}

func withTrafficDistribution(dist string) func(*v1.Service) {
	return func(s *v1.Service) { s.Spec.TrafficDistribution = &dist }
}

// hinted gives es's endpoints the zones of their nodes and the hints the
// EndpointSlice controller writes for PreferClose (each endpoint for its
// own zone) or, with sameNode, PreferSameNode (its own node too).
func hinted(es *discoveryv1.EndpointSlice, zones map[string]string, sameNode bool) *discoveryv1.EndpointSlice {
	for i := range es.Endpoints {
		ep := &es.Endpoints[i]
		zone := zones[*ep.NodeName]
		ep.Zone = &zone
		ep.Hints = &discoveryv1.EndpointHints{ForZones: []discoveryv1.ForZone{{Name: zone}}}
		if sameNode {
			ep.Hints.ForNodes = []discoveryv1.ForNode{{Name: *ep.NodeName}}
		}
	}
	return es
}

// backendsSeen is the sorted backends that answered 24 connections from
// from to dst: enough that a backend left out by chance is unlikely
// (2^-23 for two).
func backendsSeen(t *testing.T, from *netnode.NS, dst netip.AddrPort) []string {
	t.Helper()
	seen := map[string]bool{}
	for range 24 {
		seen[eventuallyAsk(t, from, dst).Backend] = true
	}
	return slices.Sorted(maps.Keys(seen))
}
