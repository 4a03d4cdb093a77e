package brain

import (
	"net/netip"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	v1 "k8s.io/api/core/v1"

	"github.com/nodenet/nodenet/proxy"
)

// frontendFields is the part of a ServicePort that comes from the Service
// alone.
type frontendFields struct {
	Type                     proxy.ServiceType
	ClusterIP                netip.Addr
	Port, NodePort           uint16
	ExternalIPs              []netip.Addr
	LoadBalancerIPs          []netip.Addr
	LoadBalancerSourceRanges []netip.Prefix
	SessionAffinity          time.Duration
	HealthCheckNodePort      uint16
	PreserveDestination      bool
	InternalPolicyLocal      bool
	ExternalPolicyLocal      bool
}

func frontendOf(sp *proxy.ServicePort) frontendFields {
	return frontendFields{
		Type: sp.Type, ClusterIP: sp.ClusterIP, Port: sp.Port, NodePort: sp.NodePort,
		ExternalIPs: sp.ExternalIPs, LoadBalancerIPs: sp.LoadBalancerIPs, LoadBalancerSourceRanges: sp.LoadBalancerSourceRanges,
		SessionAffinity: sp.SessionAffinity, HealthCheckNodePort: sp.HealthCheckNodePort, PreserveDestination: sp.PreserveDestination,
		InternalPolicyLocal: sp.InternalPolicyLocal, ExternalPolicyLocal: sp.ExternalPolicyLocal,
	}
}

func dualStack(s *v1.Service) {
	s.Spec.ClusterIPs = []string{s.Spec.ClusterIP, "fd00:96::10"}
	s.Spec.IPFamilies = []v1.IPFamily{v1.IPv4Protocol, v1.IPv6Protocol}
}

func loadBalancer(s *v1.Service) {
	s.Spec.Type = v1.ServiceTypeLoadBalancer
	s.Spec.Ports[0].NodePort = 30080
	s.Status.LoadBalancer.Ingress = []v1.LoadBalancerIngress{{IP: "198.51.100.1"}}
}

func etpLocal(s *v1.Service) {
	s.Spec.ExternalTrafficPolicy = v1.ServiceExternalTrafficPolicyLocal
	s.Spec.HealthCheckNodePort = 32000
}

func TestFrontends(t *testing.T) {
	v4 := netip.MustParseAddr("10.96.0.10")
	v6 := netip.MustParseAddr("fd00:96::10")
	tests := []struct {
		name     string
		families []proxy.IPFamily
		svc      *v1.Service
		// want maps each family expected in the state to its fields.
		want map[proxy.IPFamily]frontendFields
	}{
		{
			name: "a ClusterIP service gets its cluster IP and port and nothing else",
			svc:  service("s", 10),
			want: map[proxy.IPFamily]frontendFields{proxy.IPv4: {Type: proxy.ClusterIP, ClusterIP: v4, Port: 80}},
		},
		{
			name:     "a dual-stack service gets one ServicePort per family with that family's cluster IP",
			families: []proxy.IPFamily{proxy.IPv4, proxy.IPv6},
			svc:      service("s", 10, dualStack),
			want: map[proxy.IPFamily]frontendFields{
				proxy.IPv4: {Type: proxy.ClusterIP, ClusterIP: v4, Port: 80},
				proxy.IPv6: {Type: proxy.ClusterIP, ClusterIP: v6, Port: 80},
			},
		},
		{
			name:     "a dual-stack service on an IPv4-only node keeps only its IPv4 ServicePort",
			families: []proxy.IPFamily{proxy.IPv4},
			svc:      service("s", 10, dualStack),
			want:     map[proxy.IPFamily]frontendFields{proxy.IPv4: {Type: proxy.ClusterIP, ClusterIP: v4, Port: 80}},
		},
		{
			name:     "an IPv6 primary dual-stack service on an IPv6-only node keeps only its IPv6 ServicePort",
			families: []proxy.IPFamily{proxy.IPv6},
			svc: service("s", 10, func(s *v1.Service) {
				s.Spec.ClusterIP = "fd00:96::10"
				s.Spec.ClusterIPs = []string{"fd00:96::10", "10.96.0.10"}
				s.Spec.IPFamilies = []v1.IPFamily{v1.IPv6Protocol, v1.IPv4Protocol}
			}),
			want: map[proxy.IPFamily]frontendFields{proxy.IPv6: {Type: proxy.ClusterIP, ClusterIP: v6, Port: 80}},
		},
		{
			name: "a service from an old API server with only spec.clusterIP still gets its cluster IP",
			svc: service("s", 10, func(s *v1.Service) {
				s.Spec.ClusterIPs = nil
				s.Spec.IPFamilies = nil
			}),
			want: map[proxy.IPFamily]frontendFields{proxy.IPv4: {Type: proxy.ClusterIP, ClusterIP: v4, Port: 80}},
		},
		{
			name:     "external IPs, load-balancer IPs and source ranges are split by family",
			families: []proxy.IPFamily{proxy.IPv4, proxy.IPv6},
			svc: service("s", 10, dualStack, loadBalancer, func(s *v1.Service) {
				s.Spec.ExternalIPs = []string{"192.0.2.1", "2001:db8:2::1", "192.0.2.2"}
				s.Status.LoadBalancer.Ingress = []v1.LoadBalancerIngress{{IP: "198.51.100.1"}, {IP: "2001:db8:51::1"}, {Hostname: "lb.example.com"}}
				s.Spec.LoadBalancerSourceRanges = []string{" 203.0.113.0/24 ", "2001:db8:113::/48", "203.0.113.128/25"}
			}),
			want: map[proxy.IPFamily]frontendFields{
				proxy.IPv4: {
					Type: proxy.LoadBalancer, ClusterIP: v4, Port: 80, NodePort: 30080,
					ExternalIPs:              mustAddrs("192.0.2.1", "192.0.2.2"),
					LoadBalancerIPs:          mustAddrs("198.51.100.1"),
					LoadBalancerSourceRanges: mustPrefixes("203.0.113.0/24", "203.0.113.128/25"),
				},
				proxy.IPv6: {
					Type: proxy.LoadBalancer, ClusterIP: v6, Port: 80, NodePort: 30080,
					ExternalIPs:              mustAddrs("2001:db8:2::1"),
					LoadBalancerIPs:          mustAddrs("2001:db8:51::1"),
					LoadBalancerSourceRanges: mustPrefixes("2001:db8:113::/48"),
				},
			},
		},
		{
			name: "load-balancer ingress IPs in Proxy mode are left to the load balancer",
			svc: service("s", 10, loadBalancer, func(s *v1.Service) {
				s.Status.LoadBalancer.Ingress = []v1.LoadBalancerIngress{
					{IP: "198.51.100.1", IPMode: ptr(v1.LoadBalancerIPModeProxy)},
					{IP: "198.51.100.2", IPMode: ptr(v1.LoadBalancerIPModeVIP)},
				}
			}),
			want: map[proxy.IPFamily]frontendFields{proxy.IPv4: {
				Type: proxy.LoadBalancer, ClusterIP: v4, Port: 80, NodePort: 30080,
				LoadBalancerIPs: mustAddrs("198.51.100.2"),
			}},
		},
		{
			name: "a /0 source range allows every source, like no ranges at all",
			svc: service("s", 10, loadBalancer, func(s *v1.Service) {
				s.Spec.LoadBalancerSourceRanges = []string{"203.0.113.0/24", "0.0.0.0/0"}
			}),
			want: map[proxy.IPFamily]frontendFields{proxy.IPv4: {
				Type: proxy.LoadBalancer, ClusterIP: v4, Port: 80, NodePort: 30080,
				LoadBalancerIPs: mustAddrs("198.51.100.1"),
			}},
		},
		{
			name: "source ranges with host bits or legacy leading zeros are normalized",
			svc: service("s", 10, loadBalancer, func(s *v1.Service) {
				s.Spec.LoadBalancerSourceRanges = []string{"203.0.113.7/24", "010.1.0.0/16"}
			}),
			want: map[proxy.IPFamily]frontendFields{proxy.IPv4: {
				Type: proxy.LoadBalancer, ClusterIP: v4, Port: 80, NodePort: 30080,
				LoadBalancerIPs:          mustAddrs("198.51.100.1"),
				LoadBalancerSourceRanges: mustPrefixes("203.0.113.0/24", "10.1.0.0/16"),
			}},
		},
		{
			name: "ClientIP affinity without a timeout uses the API default of three hours",
			svc:  service("s", 10, func(s *v1.Service) { s.Spec.SessionAffinity = v1.ServiceAffinityClientIP }),
			want: map[proxy.IPFamily]frontendFields{proxy.IPv4: {Type: proxy.ClusterIP, ClusterIP: v4, Port: 80, SessionAffinity: 10800 * time.Second}},
		},
		{
			name: "ClientIP affinity with a timeout uses it",
			svc: service("s", 10, func(s *v1.Service) {
				s.Spec.SessionAffinity = v1.ServiceAffinityClientIP
				s.Spec.SessionAffinityConfig = &v1.SessionAffinityConfig{ClientIP: &v1.ClientIPConfig{TimeoutSeconds: ptr[int32](60)}}
			}),
			want: map[proxy.IPFamily]frontendFields{proxy.IPv4: {Type: proxy.ClusterIP, ClusterIP: v4, Port: 80, SessionAffinity: time.Minute}},
		},
		{
			name: "an eTP Local LoadBalancer service gets its health-check node port",
			svc:  service("s", 10, loadBalancer, etpLocal),
			want: map[proxy.IPFamily]frontendFields{proxy.IPv4: {
				Type: proxy.LoadBalancer, ClusterIP: v4, Port: 80, NodePort: 30080,
				LoadBalancerIPs: mustAddrs("198.51.100.1"), HealthCheckNodePort: 32000, ExternalPolicyLocal: true,
			}},
		},
		{
			name: "an eTP Local NodePort service has no health-check node port",
			svc: service("s", 10, etpLocal, func(s *v1.Service) {
				s.Spec.Type = v1.ServiceTypeNodePort
				s.Spec.Ports[0].NodePort = 30080
			}),
			want: map[proxy.IPFamily]frontendFields{proxy.IPv4: {Type: proxy.NodePort, ClusterIP: v4, Port: 80, NodePort: 30080, ExternalPolicyLocal: true}},
		},
		{
			name: "eTP Local on a ClusterIP service without external IPs means nothing",
			svc:  service("s", 10, etpLocal),
			want: map[proxy.IPFamily]frontendFields{proxy.IPv4: {Type: proxy.ClusterIP, ClusterIP: v4, Port: 80}},
		},
		{
			name: "eTP Local on a ClusterIP service with external IPs applies to them",
			svc:  service("s", 10, etpLocal, func(s *v1.Service) { s.Spec.ExternalIPs = []string{"192.0.2.1"} }),
			want: map[proxy.IPFamily]frontendFields{proxy.IPv4: {Type: proxy.ClusterIP, ClusterIP: v4, Port: 80, ExternalIPs: mustAddrs("192.0.2.1"), ExternalPolicyLocal: true}},
		},
		{
			name: "iTP Local is carried",
			svc:  service("s", 10, func(s *v1.Service) { s.Spec.InternalTrafficPolicy = ptr(v1.ServiceInternalTrafficPolicyLocal) }),
			want: map[proxy.IPFamily]frontendFields{proxy.IPv4: {Type: proxy.ClusterIP, ClusterIP: v4, Port: 80, InternalPolicyLocal: true}},
		},
		{
			name: "the preserve-destination annotation set to true is carried",
			svc:  service("s", 10, func(s *v1.Service) { s.Annotations = map[string]string{"preserve-destination": "true"} }),
			want: map[proxy.IPFamily]frontendFields{proxy.IPv4: {Type: proxy.ClusterIP, ClusterIP: v4, Port: 80, PreserveDestination: true}},
		},
		{
			name: "a prefixed preserve-destination annotation is not the Windows one",
			svc: service("s", 10, func(s *v1.Service) {
				s.Annotations = map[string]string{"service.kubernetes.io/preserve-destination": "true"}
			}),
			want: map[proxy.IPFamily]frontendFields{proxy.IPv4: {Type: proxy.ClusterIP, ClusterIP: v4, Port: 80}},
		},
		{
			name: "a service without a type is a ClusterIP service",
			svc:  service("s", 10, func(s *v1.Service) { s.Spec.Type = "" }),
			want: map[proxy.IPFamily]frontendFields{proxy.IPv4: {Type: proxy.ClusterIP, ClusterIP: v4, Port: 80}},
		},
		{name: "an ExternalName service is not proxied", svc: service("s", 10, func(s *v1.Service) { s.Spec.Type = v1.ServiceTypeExternalName })},
		{name: "a headless service is not proxied", svc: service("s", 10, func(s *v1.Service) { s.Spec.ClusterIP, s.Spec.ClusterIPs = "None", []string{"None"} })},
		{name: "a service without a cluster IP is not proxied", svc: service("s", 10, func(s *v1.Service) { s.Spec.ClusterIP, s.Spec.ClusterIPs = "", nil })},
		{
			name: "a service another proxy claims is not proxied",
			svc:  service("s", 10, func(s *v1.Service) { s.Labels = map[string]string{"service.kubernetes.io/service-proxy-name": "other"} }),
		},
		{name: "a service without ports has no ServicePorts", svc: service("s", 10, func(s *v1.Service) { s.Spec.Ports = nil })},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			state := snapshotOf(t, Options{Families: tt.families}, []*v1.Service{tt.svc})
			got := map[proxy.IPFamily]frontendFields{}
			for k, sp := range state.ServicePorts {
				if k != sp.Key || k.Name != "s" || k.Port != "http" || k.Protocol != proxy.TCP {
					t.Fatalf("unexpected key %v for ServicePort %v", k, sp.Key)
				}
				got[k.Family] = frontendOf(sp)
			}
			if diff := cmp.Diff(tt.want, got, cmpopts.EquateEmpty(), cmpopts.EquateComparable(netip.Addr{}, netip.Prefix{})); diff != "" {
				t.Errorf("frontends (-want +got):\n%s", diff)
			}
		})
	}
}

func TestServicePorts(t *testing.T) {
	tests := []struct {
		name  string
		ports []v1.ServicePort
		want  []proxy.ServicePortKey
	}{
		{
			name:  "an unnamed single port has an empty port name",
			ports: []v1.ServicePort{{Protocol: v1.ProtocolUDP, Port: 53}},
			want:  []proxy.ServicePortKey{{ServicePortName: proxy.ServicePortName{NamespacedName: key("s", "", proxy.IPv4).NamespacedName, Protocol: proxy.UDP}, Family: proxy.IPv4}},
		},
		{
			name: "each port and protocol pair is its own ServicePort",
			ports: []v1.ServicePort{
				{Name: "dns", Protocol: v1.ProtocolUDP, Port: 53},
				{Name: "dns-tcp", Protocol: v1.ProtocolTCP, Port: 53},
				{Name: "sctp", Protocol: v1.ProtocolSCTP, Port: 9},
			},
			want: []proxy.ServicePortKey{
				{ServicePortName: proxy.ServicePortName{NamespacedName: key("s", "", proxy.IPv4).NamespacedName, Port: "dns", Protocol: proxy.UDP}, Family: proxy.IPv4},
				{ServicePortName: proxy.ServicePortName{NamespacedName: key("s", "", proxy.IPv4).NamespacedName, Port: "dns-tcp", Protocol: proxy.TCP}, Family: proxy.IPv4},
				{ServicePortName: proxy.ServicePortName{NamespacedName: key("s", "", proxy.IPv4).NamespacedName, Port: "sctp", Protocol: proxy.SCTP}, Family: proxy.IPv4},
			},
		},
		{
			name:  "a port without a protocol is TCP, the API default",
			ports: []v1.ServicePort{{Name: "http", Port: 80}},
			want:  []proxy.ServicePortKey{key("s", "http", proxy.IPv4)},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			state := snapshotOf(t, Options{}, []*v1.Service{service("s", 10, func(s *v1.Service) { s.Spec.Ports = tt.ports })})
			var got []proxy.ServicePortKey
			for k := range state.ServicePorts {
				got = append(got, k)
			}
			if diff := cmp.Diff(tt.want, got, cmpopts.SortSlices(func(a, b proxy.ServicePortKey) bool { return a.String() < b.String() })); diff != "" {
				t.Errorf("keys (-want +got):\n%s", diff)
			}
		})
	}
}
