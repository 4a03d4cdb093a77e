package brain

import (
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/record"

	"github.com/nodenet/nodenet/proxy"
)

// drain returns the events recorded so far.
func drain(r *record.FakeRecorder) []string {
	var out []string
	for {
		select {
		case e := <-r.Events:
			out = append(out, e)
		default:
			return out
		}
	}
}

func TestBadInput(t *testing.T) {
	bad := key("bad", "http", proxy.IPv4)
	twoPorts := func(s *v1.Service) {
		s.Spec.Ports = append(s.Spec.Ports, v1.ServicePort{Name: "other", Protocol: v1.ProtocolTCP, Port: 81})
	}
	tests := []struct {
		name   string
		svc    *v1.Service
		slices []*discoveryv1.EndpointSlice
		// want is, per key of the bad service left in the state, a
		// summary of what survived.
		want map[proxy.ServicePortKey]string
		// event is a substring of the one Warning event expected.
		event string
	}{
		{
			name:  "an invalid cluster IP drops the service",
			svc:   service("bad", 20, func(s *v1.Service) { s.Spec.ClusterIP, s.Spec.ClusterIPs = "10.96.0.300", []string{"10.96.0.300"} }),
			want:  map[proxy.ServicePortKey]string{},
			event: `invalid cluster IP "10.96.0.300"`,
		},
		{
			name: "an invalid second cluster IP drops only that family",
			svc: service("bad", 20, func(s *v1.Service) {
				s.Spec.ClusterIPs = []string{s.Spec.ClusterIP, "fd00::zz"}
				s.Spec.IPFamilies = []v1.IPFamily{v1.IPv4Protocol, v1.IPv6Protocol}
			}),
			want:  map[proxy.ServicePortKey]string{bad: "10.96.0.20:80 eps=[]"},
			event: `invalid cluster IP "fd00::zz"`,
		},
		{
			name:  "an invalid external IP is skipped and the others kept",
			svc:   service("bad", 20, func(s *v1.Service) { s.Spec.ExternalIPs = []string{"192.0.2.1", "192.0.2", "192.0.2.2"} }),
			want:  map[proxy.ServicePortKey]string{bad: "10.96.0.20:80 ext=[192.0.2.1 192.0.2.2] eps=[]"},
			event: `invalid external IP "192.0.2"`,
		},
		{
			name: "an invalid load-balancer IP is skipped and the others kept",
			svc: service("bad", 20, loadBalancer, func(s *v1.Service) {
				s.Status.LoadBalancer.Ingress = []v1.LoadBalancerIngress{{IP: "lb"}, {IP: "198.51.100.2"}}
			}),
			want:  map[proxy.ServicePortKey]string{bad: "10.96.0.20:80 lb=[198.51.100.2] eps=[]"},
			event: `invalid load-balancer ingress IP "lb"`,
		},
		{
			name: "an invalid source range is skipped and the others kept",
			svc: service("bad", 20, loadBalancer, func(s *v1.Service) {
				s.Spec.LoadBalancerSourceRanges = []string{"203.0.113.0/33", "203.0.113.0/24", "203.0.113.0"}
			}),
			want:  map[proxy.ServicePortKey]string{bad: "10.96.0.20:80 lb=[198.51.100.1] ranges=[203.0.113.0/24] eps=[]"},
			event: `invalid loadBalancerSourceRange "203.0.113.0/33"`,
		},
		{
			name:  "a port 0 is skipped and the other ports kept",
			svc:   service("bad", 20, twoPorts, func(s *v1.Service) { s.Spec.Ports[0].Port = 0 }),
			want:  map[proxy.ServicePortKey]string{key("bad", "other", proxy.IPv4): "10.96.0.20:81 eps=[]"},
			event: `port "http": port 0 out of range`,
		},
		{
			name:  "an unknown protocol is skipped and the other ports kept",
			svc:   service("bad", 20, twoPorts, func(s *v1.Service) { s.Spec.Ports[0].Protocol = "QUIC" }),
			want:  map[proxy.ServicePortKey]string{key("bad", "other", proxy.IPv4): "10.96.0.20:81 eps=[]"},
			event: `unknown protocol "QUIC"`,
		},
		{
			name:  "a node port out of range is dropped and the port kept",
			svc:   service("bad", 20, func(s *v1.Service) { s.Spec.Type, s.Spec.Ports[0].NodePort = v1.ServiceTypeNodePort, 70000 }),
			want:  map[proxy.ServicePortKey]string{bad: "10.96.0.20:80 eps=[]"},
			event: "node port 70000 out of range",
		},
		{
			name: "an unparsable endpoint address is skipped and the others kept",
			svc:  service("bad", 20),
			slices: []*discoveryv1.EndpointSlice{epSlice("bad", "bad-1", httpPort(80),
				ep("10.244.2.1", "node-b", readyCond), ep("pod-ip", "node-b", readyCond))},
			want:  map[proxy.ServicePortKey]string{bad: "10.96.0.20:80 eps=[10.244.2.1:80]"},
			event: `endpoint address "pod-ip" is not an IP`,
		},
		{
			name: "an endpoint without addresses is skipped",
			svc:  service("bad", 20),
			slices: []*discoveryv1.EndpointSlice{epSlice("bad", "bad-1", httpPort(80),
				ep("10.244.2.1", "node-b", readyCond), discoveryv1.Endpoint{})},
			want:  map[proxy.ServicePortKey]string{bad: "10.96.0.20:80 eps=[10.244.2.1:80]"},
			event: "endpoint 1 has no address",
		},
		{
			name: "an IPv6 endpoint in an IPv4 slice is skipped",
			svc:  service("bad", 20),
			slices: []*discoveryv1.EndpointSlice{epSlice("bad", "bad-1", httpPort(80),
				ep("10.244.2.1", "node-b", readyCond), ep("fd00:244::1", "node-b", readyCond))},
			want:  map[proxy.ServicePortKey]string{bad: "10.96.0.20:80 eps=[10.244.2.1:80]"},
			event: "endpoint address fd00:244::1 is not IPv4",
		},
		{
			name: "an endpoint listed twice in one slice is kept once",
			svc:  service("bad", 20),
			slices: []*discoveryv1.EndpointSlice{epSlice("bad", "bad-1", httpPort(80),
				ep("10.244.2.1", "node-b", readyCond), ep("10.244.2.1", "node-b", readyCond))},
			want:  map[proxy.ServicePortKey]string{bad: "10.96.0.20:80 eps=[10.244.2.1:80]"},
			event: "endpoint 10.244.2.1 listed twice",
		},
		{
			name: "a slice port 0 is skipped",
			svc:  service("bad", 20),
			slices: []*discoveryv1.EndpointSlice{
				epSlice("bad", "bad-1", httpPort(0), ep("10.244.2.1", "node-b", readyCond)),
				epSlice("bad", "bad-2", httpPort(80), ep("10.244.2.2", "node-b", readyCond)),
			},
			want:  map[proxy.ServicePortKey]string{bad: "10.96.0.20:80 eps=[10.244.2.2:80]"},
			event: `port "http": port 0 out of range`,
		},
		{
			name: "a slice without a service label belongs to no service",
			svc:  service("bad", 20),
			slices: []*discoveryv1.EndpointSlice{func() *discoveryv1.EndpointSlice {
				s := epSlice("bad", "bad-1", httpPort(80), ep("10.244.2.1", "node-b", readyCond))
				s.Labels = nil
				return s
			}()},
			want:  map[proxy.ServicePortKey]string{bad: "10.96.0.20:80 eps=[]"},
			event: "no kubernetes.io/service-name label",
		},
		{
			name: "an unknown trafficDistribution is reported and the hints still count",
			svc:  service("bad", 20, func(s *v1.Service) { s.Spec.TrafficDistribution = ptr("PreferFar") }),
			slices: []*discoveryv1.EndpointSlice{epSlice("bad", "bad-1", httpPort(8080),
				withZoneHints(ep("10.244.2.1", "node-b", readyCond), "zone-a"), withZoneHints(ep("10.244.3.1", "node-c", readyCond), "zone-b"))},
			want:  map[proxy.ServicePortKey]string{bad: "10.96.0.20:80 eps=[10.244.2.1:8080]"},
			event: `unknown trafficDistribution "PreferFar"`,
		},
		{
			name: "nil maps and pointers everywhere are the API defaults",
			svc: &v1.Service{
				ObjectMeta: metav1.ObjectMeta{Namespace: testNS, Name: "bad"},
				Spec: v1.ServiceSpec{
					ClusterIP:       "10.96.0.20",
					SessionAffinity: v1.ServiceAffinityClientIP,
					Type:            v1.ServiceTypeLoadBalancer,
					Ports:           []v1.ServicePort{{Name: "http", Port: 80}},
				},
				Status: v1.ServiceStatus{LoadBalancer: v1.LoadBalancerStatus{Ingress: []v1.LoadBalancerIngress{{}}}},
			},
			slices: []*discoveryv1.EndpointSlice{
				{
					ObjectMeta:  metav1.ObjectMeta{Namespace: testNS, Name: "bad-1", Labels: map[string]string{discoveryv1.LabelServiceName: "bad"}},
					AddressType: discoveryv1.AddressTypeIPv4,
					Ports:       []discoveryv1.EndpointPort{{}, {Port: ptr[int32](8080), Name: ptr("http")}},
					Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{"10.244.2.1"}, Hints: &discoveryv1.EndpointHints{}}},
				},
				{ObjectMeta: metav1.ObjectMeta{Namespace: testNS, Name: "bad-2", Labels: map[string]string{discoveryv1.LabelServiceName: "bad"}}, AddressType: discoveryv1.AddressTypeIPv4},
			},
			want: map[proxy.ServicePortKey]string{bad: "10.96.0.20:80 eps=[10.244.2.1:8080]"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := record.NewFakeRecorder(100)
			b := newTestBrain(t, Options{Recorder: rec})
			good := service("good", 10)
			goodSlice := epSlice("good", "good-1", httpPort(8080), ep("10.244.2.1", "node-b", readyCond))
			b.OnServiceUpdate(nil, good)
			b.OnEndpointSliceUpdate(nil, goodSlice)
			b.OnServiceUpdate(nil, tt.svc)
			for _, s := range tt.slices {
				b.OnEndpointSliceUpdate(nil, s)
			}
			u, _ := b.Snapshot(false)

			if sp := u.State.ServicePorts[key("good", "http", proxy.IPv4)]; sp == nil || summary(sp) != "10.96.0.10:80 eps=[10.244.2.1:8080]" {
				t.Errorf("the good service was harmed: %+v", sp)
			}
			got := map[proxy.ServicePortKey]string{}
			for k, sp := range u.State.ServicePorts {
				if k.Name == "bad" {
					got[k] = summary(sp)
				}
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("what survived of the bad service (-want +got):\n%s", diff)
			}

			events := drain(rec)
			if tt.event == "" {
				if len(events) != 0 {
					t.Errorf("unexpected events %q", events)
				}
				return
			}
			if len(events) != 1 || !strings.HasPrefix(events[0], "Warning ") || !strings.Contains(events[0], tt.event) {
				t.Fatalf("events %q, want one Warning containing %q", events, tt.event)
			}
			// The same generation is reported once, however often it is
			// recomputed; a new generation is reported again.
			b.Snapshot(true)
			if events := drain(rec); len(events) != 0 {
				t.Errorf("the same generation was reported again: %q", events)
			}
			b.OnServiceUpdate(tt.svc, bumped(tt.svc.DeepCopy(), "7"))
			for _, s := range tt.slices {
				b.OnEndpointSliceUpdate(s, bumped(s.DeepCopy(), "7"))
			}
			b.Snapshot(false)
			if events := drain(rec); len(events) != 1 || !strings.Contains(events[0], tt.event) {
				t.Errorf("a new generation gave events %q, want one containing %q", events, tt.event)
			}
		})
	}
}

// summary condenses a ServicePort for TestBadInput.
func summary(sp *proxy.ServicePort) string {
	s := fmt.Sprintf("%s:%d", sp.ClusterIP, sp.Port)
	if len(sp.ExternalIPs) > 0 {
		s += fmt.Sprintf(" ext=%v", sp.ExternalIPs)
	}
	if len(sp.LoadBalancerIPs) > 0 {
		s += fmt.Sprintf(" lb=%v", sp.LoadBalancerIPs)
	}
	if len(sp.LoadBalancerSourceRanges) > 0 {
		s += fmt.Sprintf(" ranges=%v", sp.LoadBalancerSourceRanges)
	}
	return s + fmt.Sprintf(" eps=%v", addrs(sp.ClusterEndpoints))
}
