package proxier_test

import (
	"fmt"
	"slices"
	"testing"

	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/nodenet/nodenet/proxy"
)

// TestTrafficDistributionFromTheAPIServer: each trafficDistribution value
// the API server serves survives it and the informer source into the
// brain's state, and the hints the EndpointSlice controller would write
// for it (written here by hand: no controller runs) narrow this node's
// (node-a, zone-a) endpoints as kube-proxy narrows them.
func TestTrafficDistributionFromTheAPIServer(t *testing.T) {
	f := newFixture(t)
	ctx := t.Context()
	here, near, far := "10.244.1.5", "10.244.2.5", "10.244.3.5"
	for i, c := range []struct {
		dist, topology string
		want           []string
	}{
		{v1.ServiceTrafficDistributionPreferClose, v1.ServiceTrafficDistributionPreferSameZone, []string{here, near}},
		{v1.ServiceTrafficDistributionPreferSameZone, v1.ServiceTrafficDistributionPreferSameZone, []string{here, near}},
		{v1.ServiceTrafficDistributionPreferSameNode, v1.ServiceTrafficDistributionPreferSameNode, []string{here}},
	} {
		t.Run(c.dist, func(t *testing.T) {
			name := fmt.Sprintf("td-%d", i)
			svc := service(name, 80)
			svc.Spec.TrafficDistribution = ptr.To(c.dist)
			created, err := f.client.CoreV1().Services(ns).Create(ctx, svc, metav1.CreateOptions{})
			if err != nil {
				t.Fatalf("create service: %v", err)
			}
			if got := ptr.Deref(created.Spec.TrafficDistribution, ""); got != c.dist {
				t.Fatalf("the API server returned trafficDistribution %q, want %q", got, c.dist)
			}
			es := slice(name, 8080, here, near, far)
			for j, node := range []string{nodeName, "node-b", "node-c"} {
				zone := map[string]string{nodeName: "zone-a", "node-b": "zone-a", "node-c": "zone-b"}[node]
				ep := &es.Endpoints[j]
				ep.NodeName, ep.Zone = ptr.To(node), ptr.To(zone)
				ep.Hints = &discoveryv1.EndpointHints{ForZones: []discoveryv1.ForZone{{Name: zone}}}
				if c.dist == v1.ServiceTrafficDistributionPreferSameNode {
					ep.Hints.ForNodes = []discoveryv1.ForNode{{Name: node}}
				}
			}
			if _, err := f.client.DiscoveryV1().EndpointSlices(ns).Create(ctx, es, metav1.CreateOptions{}); err != nil {
				t.Fatalf("create slice: %v", err)
			}
			key := webKey()
			key.Name = name
			var last string
			f.waitFor(t, fmt.Sprintf("%s with %s and cluster endpoints %v", key, c.dist, c.want), func() bool {
				sp := f.proxier.State().ServicePorts[key]
				if sp == nil {
					return false
				}
				last = fmt.Sprintf("trafficDistribution %q topology %q endpoints %v", sp.TrafficDistribution, sp.Topology, sp.ClusterEndpoints)
				return sp.TrafficDistribution == c.dist && sp.Topology == c.topology && slices.Equal(endpointIPs(sp.ClusterEndpoints), c.want)
			})
			t.Log(last)
		})
	}
}

func endpointIPs(eps []proxy.Endpoint) []string {
	var out []string
	for _, e := range eps {
		out = append(out, e.IP.String())
	}
	return out
}
