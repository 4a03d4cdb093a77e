package brain

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"

	"github.com/nodenet/nodenet/proxy"
)

// placed is an endpoint with the node and zone the EndpointSlice
// controller would record for its pod ("" for none).
type placed struct {
	ip, node, zone string
	c              cond
}

// hintedAs returns the endpoints as the EndpointSlice controller writes
// them for a Service with trafficDistribution dist: for PreferClose,
// PreferSameZone and PreferSameNode every ready endpoint gets a hint for
// its own zone (when it has one), and for PreferSameNode one for its own
// node too; not-ready endpoints and other values get none.
func hintedAs(dist string, ps ...placed) []discoveryv1.Endpoint {
	var out []discoveryv1.Endpoint
	for _, p := range ps {
		e := ep(p.ip, p.node, p.c)
		if p.zone != "" {
			e.Zone = ptr(p.zone)
		}
		close := dist == v1.ServiceTrafficDistributionPreferClose ||
			dist == v1.ServiceTrafficDistributionPreferSameZone ||
			dist == v1.ServiceTrafficDistributionPreferSameNode
		if close && *p.c.ready {
			if p.zone != "" {
				e = withZoneHints(e, p.zone)
			}
			if dist == v1.ServiceTrafficDistributionPreferSameNode && p.node != "" {
				e = withNodeHints(e, p.node)
			}
		}
		out = append(out, e)
	}
	return out
}

func withTrafficDistribution(dist string) func(*v1.Service) {
	return func(s *v1.Service) { s.Spec.TrafficDistribution = ptr(dist) }
}

// Endpoints of the table below, on this node (node-a, zone-a), node-b
// (zone-a) and node-c (zone-b).
var (
	localA   = placed{"10.244.1.1", "node-a", "zone-a", readyCond}
	localOut = placed{"10.244.1.1", "node-a", "zone-a", notReadyCond}
	nearA    = placed{"10.244.2.1", "node-b", "zone-a", readyCond}
	farB     = placed{"10.244.3.1", "node-c", "zone-b", readyCond}
	farB2    = placed{"10.244.3.2", "node-c", "zone-b", readyCond}
	noZone   = placed{"10.244.2.2", "node-b", "", readyCond}
)

// TestTrafficDistribution feeds Services with spec.trafficDistribution and
// slices hinted as the controller hints them, and checks the endpoints
// this node uses, the topology mode it reports and the fallbacks
// kube-proxy applies.
func TestTrafficDistribution(t *testing.T) {
	const (
		close    = v1.ServiceTrafficDistributionPreferClose
		sameZone = v1.ServiceTrafficDistributionPreferSameZone
		sameNode = v1.ServiceTrafficDistributionPreferSameNode
	)
	z1b := "10.244.3.2:80"
	tests := []struct {
		name     string
		dist     string
		mutate   []func(*v1.Service)
		eps      []discoveryv1.Endpoint
		want     endpointSets
		topology string
	}{
		{
			name: "PreferClose keeps this node's traffic in its zone",
			dist: close, eps: hintedAs(close, nearA, farB),
			want:     endpointSets{Cluster: []string{r1}, Internal: []string{r1}, HasEndpoints: true},
			topology: sameZone,
		},
		{
			name: "PreferSameZone is PreferClose's new name",
			dist: sameZone, eps: hintedAs(sameZone, nearA, farB, farB2),
			want:     endpointSets{Cluster: []string{r1}, Internal: []string{r1}, HasEndpoints: true},
			topology: sameZone,
		},
		{
			name: "with no endpoint in this node's zone every endpoint is used",
			dist: close, eps: hintedAs(close, farB, farB2),
			want: endpointSets{Cluster: []string{z1, z1b}, Internal: []string{z1, z1b}, HasEndpoints: true},
		},
		{
			name: "an endpoint without a zone has no hint, so every endpoint is used",
			dist: close, eps: hintedAs(close, nearA, noZone, farB),
			want: endpointSets{Cluster: []string{r1, r2, z1}, Internal: []string{r1, r2, z1}, HasEndpoints: true},
		},
		{
			name: "slices without hints (hand-made, mirrored, or not yet reconciled) give every endpoint",
			dist: close, eps: hintedAs("", nearA, farB),
			want: endpointSets{Cluster: []string{r1, z1}, Internal: []string{r1, z1}, HasEndpoints: true},
		},
		{
			name: "hints count without the field (the topology-mode annotation writes them too)",
			dist: "", eps: hintedAs(close, nearA, farB),
			want:     endpointSets{Cluster: []string{r1}, Internal: []string{r1}, HasEndpoints: true},
			topology: sameZone,
		},
		{
			name: "PreferSameNode with a ready endpoint here uses only this node's",
			dist: sameNode, eps: hintedAs(sameNode, localA, nearA, farB),
			want:     endpointSets{Cluster: []string{l1}, Internal: []string{l1}, HasEndpoints: true, LocalReady: 1},
			topology: sameNode,
		},
		{
			name: "PreferSameNode without an endpoint here falls back to this node's zone",
			dist: sameNode, eps: hintedAs(sameNode, nearA, farB),
			want:     endpointSets{Cluster: []string{r1}, Internal: []string{r1}, HasEndpoints: true},
			topology: sameZone,
		},
		{
			name: "PreferSameNode whose endpoint here is not ready falls back to this node's zone",
			dist: sameNode, eps: hintedAs(sameNode, localOut, nearA, farB),
			want:     endpointSets{Cluster: []string{r1}, Internal: []string{r1}, HasEndpoints: true},
			topology: sameZone,
		},
		{
			name: "PreferSameNode with no endpoint here nor in this zone uses every endpoint",
			dist: sameNode, eps: hintedAs(sameNode, farB, farB2),
			want: endpointSets{Cluster: []string{z1, z1b}, Internal: []string{z1, z1b}, HasEndpoints: true},
		},
		{
			name: "iTP Local wins over PreferClose: cluster-IP traffic stays on this node",
			dist: close, mutate: []func(*v1.Service){itpLocal}, eps: hintedAs(close, localA, nearA, farB),
			want: endpointSets{Local: []string{l1}, Internal: []string{l1}, HasEndpoints: true, LocalReady: 1},
		},
		{
			name: "iTP Local without an endpoint here gets none, even with one in this zone",
			dist: close, mutate: []func(*v1.Service){itpLocal}, eps: hintedAs(close, nearA, farB),
			want: endpointSets{HasEndpoints: true},
		},
		{
			name: "iTP Local with a node port: external traffic follows the zone, cluster-IP traffic stays local",
			dist: close, mutate: []func(*v1.Service){itpLocal, nodePort}, eps: hintedAs(close, localA, nearA, farB),
			want:     endpointSets{Cluster: []string{l1, r1}, Local: []string{l1}, Internal: []string{l1}, External: []string{l1, r1}, HasEndpoints: true, LocalReady: 1},
			topology: sameZone,
		},
		{
			name: "eTP Local: external traffic uses this node's endpoints, cluster-IP traffic the zone's",
			dist: close, mutate: []func(*v1.Service){loadBalancer, etpLocal}, eps: hintedAs(close, localA, nearA, farB),
			want:     endpointSets{Cluster: []string{l1, r1}, Local: []string{l1}, Internal: []string{l1, r1}, External: []string{l1}, HasEndpoints: true, LocalReady: 1},
			topology: sameZone,
		},
		{
			name: "eTP Local with only endpoints elsewhere: external traffic has none, cluster-IP traffic the zone's",
			dist: close, mutate: []func(*v1.Service){loadBalancer, etpLocal}, eps: hintedAs(close, nearA, farB),
			want:     endpointSets{Cluster: []string{r1}, Internal: []string{r1}, HasEndpoints: true},
			topology: sameZone,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			mutate := tt.mutate
			if tt.dist != "" {
				mutate = append([]func(*v1.Service){withTrafficDistribution(tt.dist)}, mutate...)
			}
			state := snapshotOf(t, Options{}, []*v1.Service{service("s", 10, mutate...)}, epSlice("s", "s-1", httpPort(80), tt.eps...))
			sp := state.ServicePorts[key("s", "http", proxy.IPv4)]
			if sp == nil {
				t.Fatalf("no ServicePort in %v", state.ServicePorts)
			}
			if diff := cmp.Diff(tt.want, setsOf(sp)); diff != "" {
				t.Errorf("endpoint sets (-want +got):\n%s", diff)
			}
			if sp.Topology != tt.topology {
				t.Errorf("topology %q, want %q", sp.Topology, tt.topology)
			}
			if sp.TrafficDistribution != tt.dist {
				t.Errorf("trafficDistribution %q, want the Service's %q", sp.TrafficDistribution, tt.dist)
			}
		})
	}
}

// TestTrafficDistributionChangeIsAChange: a Service whose
// trafficDistribution changes reports its ports changed, so status and
// dumps follow even before the controller rewrites the hints.
func TestTrafficDistributionChangeIsAChange(t *testing.T) {
	b := newTestBrain(t, Options{})
	s := service("s", 10)
	b.OnServiceUpdate(nil, s)
	b.OnEndpointSliceUpdate(nil, epSlice("s", "s-1", httpPort(80), hintedAs("", nearA, farB)...))
	b.OnSynced()
	b.Snapshot(true)

	s2 := service("s", 10, withTrafficDistribution(v1.ServiceTrafficDistributionPreferClose))
	s2.ResourceVersion = "2"
	b.OnServiceUpdate(s, s2)
	u, _ := b.Snapshot(false)
	k := key("s", "http", proxy.IPv4)
	if _, ok := u.Changed[k]; !ok {
		t.Errorf("changed %v, want %v in it", u.Changed, k)
	}
	if got := u.State.ServicePorts[k].TrafficDistribution; got != v1.ServiceTrafficDistributionPreferClose {
		t.Errorf("trafficDistribution %q after the update", got)
	}
}
