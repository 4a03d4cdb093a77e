package brain

import (
	"net/netip"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"

	"github.com/nodenet/nodenet/proxy"
)

func TestEndpointMerging(t *testing.T) {
	twoPorts := func(s *v1.Service) {
		s.Spec.Ports = []v1.ServicePort{
			{Name: "http", Protocol: v1.ProtocolTCP, Port: 80},
			{Name: "dns", Protocol: v1.ProtocolUDP, Port: 53},
		}
	}
	tests := []struct {
		name     string
		families []proxy.IPFamily
		svc      *v1.Service
		slices   []*discoveryv1.EndpointSlice
		// want is each key's ClusterEndpoints.
		want map[proxy.ServicePortKey][]proxy.Endpoint
	}{
		{
			name: "a named target port resolves to each slice's own port number",
			svc:  service("s", 10),
			slices: []*discoveryv1.EndpointSlice{
				epSlice("s", "s-1", httpPort(8080), ep("10.244.1.1", "node-a", readyCond)),
				epSlice("s", "s-2", httpPort(9090), ep("10.244.2.1", "node-b", readyCond)),
			},
			want: map[proxy.ServicePortKey][]proxy.Endpoint{key("s", "http", proxy.IPv4): {
				{IP: mustAddrs("10.244.1.1")[0], Port: 8080, NodeName: "node-a", Local: true, Ready: true, Serving: true},
				{IP: mustAddrs("10.244.2.1")[0], Port: 9090, NodeName: "node-b", Ready: true, Serving: true},
			}},
		},
		{
			name: "slice ports match service ports by name and protocol",
			svc:  service("s", 10, twoPorts),
			slices: []*discoveryv1.EndpointSlice{epSlice("s", "s-1", []discoveryv1.EndpointPort{
				{Name: ptr("http"), Protocol: ptr(v1.ProtocolTCP), Port: ptr[int32](8080)},
				{Name: ptr("dns"), Protocol: ptr(v1.ProtocolTCP), Port: ptr[int32](5353)},
				{Name: ptr("dns"), Protocol: ptr(v1.ProtocolUDP), Port: ptr[int32](53)},
			}, ep("10.244.2.1", "node-b", readyCond))},
			want: map[proxy.ServicePortKey][]proxy.Endpoint{
				key("s", "http", proxy.IPv4): {{IP: mustAddrs("10.244.2.1")[0], Port: 8080, NodeName: "node-b", Ready: true, Serving: true}},
				{ServicePortName: proxy.ServicePortName{NamespacedName: key("s", "", proxy.IPv4).NamespacedName, Port: "dns", Protocol: proxy.UDP}, Family: proxy.IPv4}: {
					{IP: mustAddrs("10.244.2.1")[0], Port: 53, NodeName: "node-b", Ready: true, Serving: true},
				},
			},
		},
		{
			name: "a slice port without name or protocol matches an unnamed TCP service port",
			svc:  service("s", 10, func(s *v1.Service) { s.Spec.Ports = []v1.ServicePort{{Port: 80}} }),
			slices: []*discoveryv1.EndpointSlice{epSlice("s", "s-1", []discoveryv1.EndpointPort{{Port: ptr[int32](8080)}},
				ep("10.244.2.1", "node-b", readyCond))},
			want: map[proxy.ServicePortKey][]proxy.Endpoint{key("s", "", proxy.IPv4): {
				{IP: mustAddrs("10.244.2.1")[0], Port: 8080, NodeName: "node-b", Ready: true, Serving: true},
			}},
		},
		{
			name: "an endpoint in two slices is kept once, from the slice where it is ready",
			svc:  service("s", 10),
			slices: []*discoveryv1.EndpointSlice{
				epSlice("s", "s-1", httpPort(8080), ep("10.244.2.1", "node-b", terminatingCond), ep("10.244.2.2", "node-b", readyCond)),
				epSlice("s", "s-2", httpPort(8080), ep("10.244.2.1", "node-b", readyCond)),
			},
			want: map[proxy.ServicePortKey][]proxy.Endpoint{key("s", "http", proxy.IPv4): {
				{IP: mustAddrs("10.244.2.1")[0], Port: 8080, NodeName: "node-b", Ready: true, Serving: true},
				{IP: mustAddrs("10.244.2.2")[0], Port: 8080, NodeName: "node-b", Ready: true, Serving: true},
			}},
		},
		{
			name: "the same IP on two ports is two endpoints",
			svc:  service("s", 10),
			slices: []*discoveryv1.EndpointSlice{
				epSlice("s", "s-1", httpPort(8080), ep("10.244.2.1", "node-b", readyCond)),
				epSlice("s", "s-2", httpPort(8081), ep("10.244.2.1", "node-b", readyCond)),
			},
			want: map[proxy.ServicePortKey][]proxy.Endpoint{key("s", "http", proxy.IPv4): {
				{IP: mustAddrs("10.244.2.1")[0], Port: 8080, NodeName: "node-b", Ready: true, Serving: true},
				{IP: mustAddrs("10.244.2.1")[0], Port: 8081, NodeName: "node-b", Ready: true, Serving: true},
			}},
		},
		{
			name: "conditions left unset are ready, serving and not terminating",
			svc:  service("s", 10),
			slices: []*discoveryv1.EndpointSlice{
				epSlice("s", "s-1", httpPort(8080), ep("10.244.2.1", "", cond{})),
			},
			want: map[proxy.ServicePortKey][]proxy.Endpoint{key("s", "http", proxy.IPv4): {
				{IP: mustAddrs("10.244.2.1")[0], Port: 8080, Ready: true, Serving: true},
			}},
		},
		{
			name: "an endpoint's zone is carried and only this node's endpoints are local",
			svc:  service("s", 10),
			slices: []*discoveryv1.EndpointSlice{
				epSlice("s", "s-1", httpPort(8080), func() discoveryv1.Endpoint {
					e := ep("10.244.3.1", "node-c", readyCond)
					e.Zone = ptr("zone-b")
					return e
				}(), ep("10.244.1.1", "node-a", readyCond)),
			},
			want: map[proxy.ServicePortKey][]proxy.Endpoint{key("s", "http", proxy.IPv4): {
				{IP: mustAddrs("10.244.1.1")[0], Port: 8080, NodeName: "node-a", Local: true, Ready: true, Serving: true},
				{IP: mustAddrs("10.244.3.1")[0], Port: 8080, NodeName: "node-c", Zone: "zone-b", Ready: true, Serving: true},
			}},
		},
		{
			name:     "a dual-stack service takes each family's endpoints from that family's slices",
			families: []proxy.IPFamily{proxy.IPv4, proxy.IPv6},
			svc:      service("s", 10, dualStack),
			slices: []*discoveryv1.EndpointSlice{
				epSlice("s", "s-v4", httpPort(8080), ep("10.244.2.1", "node-b", readyCond)),
				epSlice("s", "s-v6", httpPort(8080), ep("fd00:244::2:1", "node-b", readyCond)),
			},
			want: map[proxy.ServicePortKey][]proxy.Endpoint{
				key("s", "http", proxy.IPv4): {{IP: mustAddrs("10.244.2.1")[0], Port: 8080, NodeName: "node-b", Ready: true, Serving: true}},
				key("s", "http", proxy.IPv6): {{IP: mustAddrs("fd00:244::2:1")[0], Port: 8080, NodeName: "node-b", Ready: true, Serving: true}},
			},
		},
		{
			name: "an FQDN slice is ignored",
			svc:  service("s", 10),
			slices: []*discoveryv1.EndpointSlice{func() *discoveryv1.EndpointSlice {
				s := epSlice("s", "s-1", httpPort(8080), discoveryv1.Endpoint{Addresses: []string{"pod.example.com"}})
				s.AddressType = discoveryv1.AddressTypeFQDN
				return s
			}()},
			want: map[proxy.ServicePortKey][]proxy.Endpoint{key("s", "http", proxy.IPv4): nil},
		},
		{
			name: "a slice labelled headless is ignored",
			svc:  service("s", 10),
			slices: []*discoveryv1.EndpointSlice{func() *discoveryv1.EndpointSlice {
				s := epSlice("s", "s-1", httpPort(8080), ep("10.244.2.1", "node-b", readyCond))
				s.Labels[v1.IsHeadlessService] = ""
				return s
			}()},
			want: map[proxy.ServicePortKey][]proxy.Endpoint{key("s", "http", proxy.IPv4): nil},
		},
		{
			name: "a slice port with no number is skipped",
			svc:  service("s", 10),
			slices: []*discoveryv1.EndpointSlice{
				epSlice("s", "s-1", []discoveryv1.EndpointPort{{Name: ptr("http"), Protocol: ptr(v1.ProtocolTCP)}}, ep("10.244.2.1", "node-b", readyCond)),
			},
			want: map[proxy.ServicePortKey][]proxy.Endpoint{key("s", "http", proxy.IPv4): nil},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			state := snapshotOf(t, Options{Families: tt.families}, []*v1.Service{tt.svc}, tt.slices...)
			got := map[proxy.ServicePortKey][]proxy.Endpoint{}
			for k, sp := range state.ServicePorts {
				got[k] = sp.ClusterEndpoints
			}
			if diff := cmp.Diff(tt.want, got, cmpopts.EquateComparable(netip.Addr{})); diff != "" {
				t.Errorf("cluster endpoints (-want +got):\n%s", diff)
			}
		})
	}
}
