package source

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/utils/ptr"
)

// TestTrafficDistributionAndHintsSurvive: a Service's trafficDistribution
// and its slice's hints reach the brain from manifests, and the informers'
// transform keeps them.
func TestTrafficDistributionAndHintsSurvive(t *testing.T) {
	objects, err := parse(t, `apiVersion: v1
kind: Service
metadata: {name: web}
spec:
  clusterIP: 10.96.0.10
  trafficDistribution: PreferSameNode
  ports: [{port: 80}]
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {name: web-1, labels: {kubernetes.io/service-name: web}}
addressType: IPv4
endpoints:
- addresses: [10.244.1.5]
  nodeName: node-a
  zone: zone-a
  hints: {forZones: [{name: zone-a}], forNodes: [{name: node-a}]}
ports: [{port: 8080}]
`)
	if err != nil {
		t.Fatal(err)
	}
	wantHints := &discoveryv1.EndpointHints{ForZones: []discoveryv1.ForZone{{Name: "zone-a"}}, ForNodes: []discoveryv1.ForNode{{Name: "node-a"}}}
	svc, es := objects[0].obj.(*v1.Service), objects[1].obj.(*discoveryv1.EndpointSlice)
	check := func(from string, svc *v1.Service, es *discoveryv1.EndpointSlice) {
		t.Helper()
		if got := ptr.Deref(svc.Spec.TrafficDistribution, ""); got != v1.ServiceTrafficDistributionPreferSameNode {
			t.Errorf("%s: trafficDistribution %q, want PreferSameNode", from, got)
		}
		if diff := cmp.Diff(wantHints, es.Endpoints[0].Hints); diff != "" {
			t.Errorf("%s: hints (-want +got):\n%s", from, diff)
		}
	}
	check("manifests", svc, es)
	trimmedSvc, err := newTrimmer().transform(svc.DeepCopy())
	if err != nil {
		t.Fatal(err)
	}
	trimmedSlice, err := newTrimmer().transform(es.DeepCopy())
	if err != nil {
		t.Fatal(err)
	}
	check("informer transform", trimmedSvc.(*v1.Service), trimmedSlice.(*discoveryv1.EndpointSlice))
}
