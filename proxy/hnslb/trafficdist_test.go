package hnslb

import (
	"fmt"
	"slices"
	"testing"

	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodenet/nodenet/hns"
	"github.com/nodenet/nodenet/proxy"
	"github.com/nodenet/nodenet/proxy/brain"
)

// zoneOf is where the test's nodes are: this node (node-1) and node-2 in
// zone-a, node-3 and node-4 in zone-b.
var zoneOf = map[string]string{"node-1": "zone-a", "node-2": "zone-a", "node-3": "zone-b", "node-4": "zone-b"}

// zonedEndpoint is a ready endpoint at ip on node, hinted as the
// EndpointSlice controller hints it for trafficDistribution dist.
func zonedEndpoint(dist, ip, node string) discoveryv1.Endpoint {
	ready := true
	zone := zoneOf[node]
	e := discoveryv1.Endpoint{
		Addresses:  []string{ip},
		Conditions: discoveryv1.EndpointConditions{Ready: &ready},
		NodeName:   &node,
		Zone:       &zone,
		Hints:      &discoveryv1.EndpointHints{ForZones: []discoveryv1.ForZone{{Name: zone}}},
	}
	if dist == v1.ServiceTrafficDistributionPreferSameNode {
		e.Hints.ForNodes = []discoveryv1.ForNode{{Name: node}}
	}
	return e
}

// TestTrafficDistributionNarrowsTheLoadBalancer runs the brain on this
// node (node-1, zone-a) and the HNS backend on the simulator, changes a
// Service's trafficDistribution and its slice as the controller would,
// and traces a local pod's packet to the cluster IP and an outside
// client's to the node port after each step: they reach only the
// preferred backends, and every backend when none is preferred here.
func TestTrafficDistributionNarrowsTheLoadBalancer(t *testing.T) {
	h := newHost(t, hostOptions{})
	h.addPod(localPodIP(0)) // the client
	h.addPod(localPodIP(1)) // a backend on this node
	b := h.backend()
	br := brain.New(brain.Options{NodeName: "node-1", Families: []proxy.IPFamily{proxy.IPv4}, Logger: testLogger(t)})
	br.OnNodeUpdate(nil, &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-1", Labels: map[string]string{v1.LabelTopologyZone: "zone-a"}}})

	here, near, far, far2 := localPodIP(1), remotePodIP(2, 0), remotePodIP(3, 0), remotePodIP(4, 0)
	on := map[string]string{here: "node-1", near: "node-2", far: "node-3", far2: "node-4"}
	steps := []struct {
		name string
		dist string
		eps  []string
		want []string
	}{
		{"PreferClose reaches only the zone's backends", v1.ServiceTrafficDistributionPreferClose, []string{near, far, far2}, []string{near}},
		{"with no backend in the zone every backend is reached", v1.ServiceTrafficDistributionPreferClose, []string{far, far2}, []string{far, far2}},
		{"PreferSameNode with a backend here reaches only it", v1.ServiceTrafficDistributionPreferSameNode, []string{here, near, far}, []string{here}},
		{"PreferSameNode without one here reaches the zone's", v1.ServiceTrafficDistributionPreferSameNode, []string{near, far}, []string{near}},
		{"without trafficDistribution the controller drops the hints and every backend is reached", "", []string{near, far}, []string{near, far}},
	}
	var prevSvc *v1.Service
	var prevSlice *discoveryv1.EndpointSlice
	for i, st := range steps {
		t.Run(st.name, func(t *testing.T) {
			svc := zonedService(st.dist, i)
			slice := zonedSlice(st.dist, i, on, st.eps)
			br.OnServiceUpdate(prevSvc, svc)
			br.OnEndpointSliceUpdate(prevSlice, slice)
			prevSvc, prevSlice = svc, slice
			if i == 0 {
				br.OnSynced()
			}
			u, _ := br.Snapshot(i == 0)
			mustSync(t, b, u)

			for _, tr := range []*hns.Trace{
				h.trace(hns.FromEndpoint, localPodIP(0), "10.96.0.50", 80),
				h.trace(hns.FromExternal, client, nodeIP, 30050),
			} {
				if got := reached(tr); !slices.Equal(got, st.want) {
					t.Errorf("reaches %v, want %v\n%s\n%s", got, st.want, tr, h.sim.Dump())
				}
			}
		})
	}

	t.Run("setting trafficDistribution before the controller hints the slice changes nothing in HNS", func(t *testing.T) {
		h.sim.ResetCalls()
		svc := zonedService(v1.ServiceTrafficDistributionPreferClose, len(steps))
		br.OnServiceUpdate(prevSvc, svc)
		u, _ := br.Snapshot(false)
		if len(u.Changed) != 1 {
			t.Fatalf("changed %v, want the Service's port", u.Changed)
		}
		mustSync(t, b, u)
		for op, n := range h.sim.CallCounts() {
			if n > 0 && !slices.Contains(listOps, op) {
				t.Errorf("%d %s calls, want none", n, op)
			}
		}
		if got, want := reached(h.trace(hns.FromEndpoint, localPodIP(0), "10.96.0.50", 80)), []string{near, far}; !slices.Equal(got, want) {
			t.Errorf("reaches %v, want %v", got, want)
		}
	})
}

// zonedService is a NodePort Service on 10.96.0.50:80 (node port 30050)
// with trafficDistribution dist ("" for none) at resource version rv.
func zonedService(dist string, rv int) *v1.Service {
	s := &v1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "zoned", ResourceVersion: fmt.Sprint(rv + 1)},
		Spec: v1.ServiceSpec{
			Type: v1.ServiceTypeNodePort, ClusterIP: "10.96.0.50", ClusterIPs: []string{"10.96.0.50"},
			IPFamilies: []v1.IPFamily{v1.IPv4Protocol},
			Ports:      []v1.ServicePort{{Name: "http", Protocol: v1.ProtocolTCP, Port: 80, NodePort: 30050}},
		},
	}
	if dist != "" {
		s.Spec.TrafficDistribution = &dist
	}
	return s
}

// zonedSlice is the Service's slice with endpoints at ips (each on the
// node on[ip]), hinted for dist.
func zonedSlice(dist string, rv int, on map[string]string, ips []string) *discoveryv1.EndpointSlice {
	name, proto, port := "http", v1.ProtocolTCP, int32(8080)
	s := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: "ns", Name: "zoned-1", ResourceVersion: fmt.Sprint(rv + 1),
			Labels: map[string]string{discoveryv1.LabelServiceName: "zoned"},
		},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: &name, Protocol: &proto, Port: &port}},
	}
	for _, ip := range ips {
		e := zonedEndpoint(dist, ip, on[ip])
		if dist == "" {
			e.Hints = nil
		}
		s.Endpoints = append(s.Endpoints, e)
	}
	return s
}

// reached is the sorted backend addresses a trace delivers to.
func reached(tr *hns.Trace) []string {
	var out []string
	for _, d := range tr.Deliveries {
		out = append(out, d.Packet.Dst)
	}
	slices.Sort(out)
	return out
}
