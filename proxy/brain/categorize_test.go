package brain

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"

	"github.com/nodenet/nodenet/proxy"
)

// categorizeCase is one service port's endpoints and what the brain must
// make of them.
type categorizeCase struct {
	name string
	svc  *v1.Service
	eps  []discoveryv1.Endpoint
	want endpointSets
}

func runCategorize(t *testing.T, tests []categorizeCase) {
	t.Helper()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			state := snapshotOf(t, Options{}, []*v1.Service{tt.svc}, epSlice("s", "s-1", httpPort(80), tt.eps...))
			sp := state.ServicePorts[key("s", "http", proxy.IPv4)]
			if sp == nil {
				t.Fatalf("no ServicePort in %v", state.ServicePorts)
			}
			if diff := cmp.Diff(tt.want, setsOf(sp)); diff != "" {
				t.Errorf("endpoint sets (-want +got):\n%s", diff)
			}
		})
	}
}

func itpLocal(s *v1.Service) {
	s.Spec.InternalTrafficPolicy = ptr(v1.ServiceInternalTrafficPolicyLocal)
}

func nodePort(s *v1.Service) {
	s.Spec.Type = v1.ServiceTypeNodePort
	s.Spec.Ports[0].NodePort = 30080
}

// Endpoint shorthands: l* are on this node, r* on node-b (same zone), z*
// on node-c (zone-b).
var (
	l1, l2 = "10.244.1.1:80", "10.244.1.2:80"
	r1, r2 = "10.244.2.1:80", "10.244.2.2:80"
	z1     = "10.244.3.1:80"
)

func TestReadinessAndTerminating(t *testing.T) {
	runCategorize(t, []categorizeCase{
		{
			name: "ready endpoints are used and not-ready ones are not",
			svc:  service("s", 10),
			eps:  []discoveryv1.Endpoint{ep("10.244.1.1", "node-a", readyCond), ep("10.244.2.1", "node-b", readyCond), ep("10.244.2.2", "node-b", notReadyCond)},
			want: endpointSets{Cluster: []string{l1, r1}, Internal: []string{l1, r1}, HasEndpoints: true, LocalReady: 1},
		},
		{
			name: "terminating endpoints are not used while another endpoint is ready",
			svc:  service("s", 10),
			eps:  []discoveryv1.Endpoint{ep("10.244.1.1", "node-a", terminatingCond), ep("10.244.2.1", "node-b", readyCond)},
			want: endpointSets{Cluster: []string{r1}, Internal: []string{r1}, HasEndpoints: true},
		},
		{
			name: "when no endpoint is ready anywhere, serving terminating endpoints are used",
			svc:  service("s", 10),
			eps:  []discoveryv1.Endpoint{ep("10.244.1.1", "node-a", terminatingCond), ep("10.244.2.1", "node-b", goneCond), ep("10.244.2.2", "node-b", notReadyCond)},
			want: endpointSets{Cluster: []string{l1}, Internal: []string{l1}, HasEndpoints: true},
		},
		{
			name: "terminating endpoints that no longer serve are never used",
			svc:  service("s", 10),
			eps:  []discoveryv1.Endpoint{ep("10.244.1.1", "node-a", goneCond)},
			want: endpointSets{},
		},
		{
			name: "a service without endpoints has none and says so",
			svc:  service("s", 10, nodePort),
			want: endpointSets{},
		},
		{
			name: "a ready endpoint with unset serving and terminating is used",
			svc:  service("s", 10),
			eps:  []discoveryv1.Endpoint{ep("10.244.2.1", "node-b", cond{ready: ptr(true)})},
			want: endpointSets{Cluster: []string{r1}, Internal: []string{r1}, HasEndpoints: true},
		},
		{
			name: "a terminating endpoint with unset serving counts as serving",
			svc:  service("s", 10),
			eps:  []discoveryv1.Endpoint{ep("10.244.2.1", "node-b", cond{ready: ptr(false), terminating: ptr(true)})},
			want: endpointSets{Cluster: []string{r1}, Internal: []string{r1}, HasEndpoints: true},
		},
	})
}

func TestTrafficPolicies(t *testing.T) {
	runCategorize(t, []categorizeCase{
		{
			name: "eTP Cluster sends external traffic to every ready endpoint",
			svc:  service("s", 10, nodePort),
			eps:  []discoveryv1.Endpoint{ep("10.244.1.1", "node-a", readyCond), ep("10.244.2.1", "node-b", readyCond)},
			want: endpointSets{Cluster: []string{l1, r1}, Internal: []string{l1, r1}, External: []string{l1, r1}, HasEndpoints: true, LocalReady: 1},
		},
		{
			name: "eTP Local sends external traffic to local endpoints only and keeps cluster traffic on all",
			svc:  service("s", 10, loadBalancer, etpLocal),
			eps:  []discoveryv1.Endpoint{ep("10.244.1.1", "node-a", readyCond), ep("10.244.2.1", "node-b", readyCond)},
			want: endpointSets{Cluster: []string{l1, r1}, Local: []string{l1}, Internal: []string{l1, r1}, External: []string{l1}, HasEndpoints: true, LocalReady: 1},
		},
		{
			name: "eTP Local with only remote endpoints drops external traffic but keeps cluster traffic",
			svc:  service("s", 10, loadBalancer, etpLocal),
			eps:  []discoveryv1.Endpoint{ep("10.244.2.1", "node-b", readyCond)},
			want: endpointSets{Cluster: []string{r1}, Internal: []string{r1}, HasEndpoints: true},
		},
		{
			name: "eTP Local falls back to local serving terminating endpoints while remote ones are ready",
			svc:  service("s", 10, loadBalancer, etpLocal),
			eps:  []discoveryv1.Endpoint{ep("10.244.1.1", "node-a", terminatingCond), ep("10.244.2.1", "node-b", readyCond)},
			want: endpointSets{Cluster: []string{r1}, Local: []string{l1}, Internal: []string{r1}, External: []string{l1}, HasEndpoints: true},
		},
		{
			name: "eTP Local prefers local ready endpoints to local terminating ones",
			svc:  service("s", 10, loadBalancer, etpLocal),
			eps:  []discoveryv1.Endpoint{ep("10.244.1.1", "node-a", terminatingCond), ep("10.244.1.2", "node-a", readyCond)},
			want: endpointSets{Cluster: []string{l2}, Local: []string{l2}, Internal: []string{l2}, External: []string{l2}, HasEndpoints: true, LocalReady: 1},
		},
		{
			name: "iTP Local sends cluster-IP traffic to local endpoints only",
			svc:  service("s", 10, itpLocal),
			eps:  []discoveryv1.Endpoint{ep("10.244.1.1", "node-a", readyCond), ep("10.244.2.1", "node-b", readyCond)},
			want: endpointSets{Local: []string{l1}, Internal: []string{l1}, HasEndpoints: true, LocalReady: 1},
		},
		{
			name: "iTP Local with only remote endpoints has no internal endpoints but still has endpoints",
			svc:  service("s", 10, itpLocal),
			eps:  []discoveryv1.Endpoint{ep("10.244.2.1", "node-b", readyCond)},
			want: endpointSets{HasEndpoints: true},
		},
		{
			name: "iTP Local with a node port keeps cluster endpoints for external traffic",
			svc:  service("s", 10, itpLocal, nodePort),
			eps:  []discoveryv1.Endpoint{ep("10.244.1.1", "node-a", readyCond), ep("10.244.2.1", "node-b", readyCond)},
			want: endpointSets{Cluster: []string{l1, r1}, Local: []string{l1}, Internal: []string{l1}, External: []string{l1, r1}, HasEndpoints: true, LocalReady: 1},
		},
		{
			name: "iTP and eTP Local use local endpoints for both",
			svc:  service("s", 10, itpLocal, loadBalancer, etpLocal),
			eps:  []discoveryv1.Endpoint{ep("10.244.1.1", "node-a", readyCond), ep("10.244.2.1", "node-b", readyCond)},
			want: endpointSets{Cluster: []string{l1, r1}, Local: []string{l1}, Internal: []string{l1}, External: []string{l1}, HasEndpoints: true, LocalReady: 1},
		},
	})
}

func TestTopology(t *testing.T) {
	zoned := func(ip, node, zone string) discoveryv1.Endpoint {
		return withZoneHints(ep(ip, node, readyCond), zone)
	}
	runCategorize(t, []categorizeCase{
		{
			name: "zone hints for this zone narrow cluster endpoints to them",
			svc:  service("s", 10),
			eps:  []discoveryv1.Endpoint{zoned("10.244.2.1", "node-b", "zone-a"), zoned("10.244.3.1", "node-c", "zone-b")},
			want: endpointSets{Cluster: []string{r1}, Internal: []string{r1}, HasEndpoints: true},
		},
		{
			name: "zone hints are ignored when one ready endpoint has none",
			svc:  service("s", 10),
			eps:  []discoveryv1.Endpoint{zoned("10.244.2.1", "node-b", "zone-a"), ep("10.244.3.1", "node-c", readyCond)},
			want: endpointSets{Cluster: []string{r1, z1}, Internal: []string{r1, z1}, HasEndpoints: true},
		},
		{
			name: "zone hints are ignored when none names this zone",
			svc:  service("s", 10),
			eps:  []discoveryv1.Endpoint{zoned("10.244.2.1", "node-b", "zone-b"), zoned("10.244.3.1", "node-c", "zone-b")},
			want: endpointSets{Cluster: []string{r1, z1}, Internal: []string{r1, z1}, HasEndpoints: true},
		},
		{
			name: "a not-ready endpoint without hints does not disable zone hints",
			svc:  service("s", 10),
			eps:  []discoveryv1.Endpoint{zoned("10.244.2.1", "node-b", "zone-a"), zoned("10.244.3.1", "node-c", "zone-b"), ep("10.244.2.2", "node-b", notReadyCond)},
			want: endpointSets{Cluster: []string{r1}, Internal: []string{r1}, HasEndpoints: true},
		},
		{
			name: "node hints for this node win over zone hints",
			svc:  service("s", 10),
			eps: []discoveryv1.Endpoint{
				withNodeHints(zoned("10.244.1.1", "node-a", "zone-a"), "node-a"),
				withNodeHints(zoned("10.244.2.1", "node-b", "zone-a"), "node-b"),
			},
			want: endpointSets{Cluster: []string{l1}, Internal: []string{l1}, HasEndpoints: true, LocalReady: 1},
		},
		{
			name: "node hints that name no endpoint for this node fall back to zone hints",
			svc:  service("s", 10),
			eps: []discoveryv1.Endpoint{
				withNodeHints(zoned("10.244.2.1", "node-b", "zone-a"), "node-b"),
				withNodeHints(zoned("10.244.3.1", "node-c", "zone-b"), "node-c"),
			},
			want: endpointSets{Cluster: []string{r1}, Internal: []string{r1}, HasEndpoints: true},
		},
		{
			name: "topology does not narrow local endpoints",
			svc:  service("s", 10, loadBalancer, etpLocal),
			eps:  []discoveryv1.Endpoint{zoned("10.244.1.1", "node-a", "zone-b"), zoned("10.244.2.1", "node-b", "zone-a")},
			want: endpointSets{Cluster: []string{r1}, Local: []string{l1}, Internal: []string{r1}, External: []string{l1}, HasEndpoints: true, LocalReady: 1},
		},
		{
			name: "topology is ignored when the terminating fallback applies",
			svc:  service("s", 10),
			eps: []discoveryv1.Endpoint{
				withZoneHints(ep("10.244.2.1", "node-b", terminatingCond), "zone-a"),
				withZoneHints(ep("10.244.3.1", "node-c", terminatingCond), "zone-b"),
			},
			want: endpointSets{Cluster: []string{r1, z1}, Internal: []string{r1, z1}, HasEndpoints: true},
		},
	})
}

func TestTopologyFollowsTheNodeZone(t *testing.T) {
	b := newTestBrain(t, Options{})
	b.OnServiceUpdate(nil, service("s", 10))
	b.OnEndpointSliceUpdate(nil, epSlice("s", "s-1", httpPort(80),
		withZoneHints(ep("10.244.2.1", "node-b", readyCond), "zone-a"),
		withZoneHints(ep("10.244.3.1", "node-c", readyCond), "zone-b")))
	k := key("s", "http", proxy.IPv4)
	steps := []struct {
		name string
		zone string
		want []string
	}{
		{name: "in zone-a the zone-a endpoint is used", zone: "zone-a", want: []string{r1}},
		{name: "after moving to zone-b the zone-b endpoint is used", zone: "zone-b", want: []string{z1}},
		{name: "without a zone label every endpoint is used", zone: "", want: []string{r1, z1}},
	}
	for i, st := range steps {
		t.Run(st.name, func(t *testing.T) {
			if i > 0 {
				labels := map[string]string{}
				if st.zone != "" {
					labels[v1.LabelTopologyZone] = st.zone
				}
				node := &v1.Node{}
				node.Name, node.Labels = thisNode, labels
				b.OnNodeUpdate(nil, node)
			}
			u, _ := b.Snapshot(false)
			if diff := cmp.Diff(st.want, addrs(u.State.ServicePorts[k].ClusterEndpoints)); diff != "" {
				t.Errorf("cluster endpoints (-want +got):\n%s", diff)
			}
			if u.State.Zone != st.zone {
				t.Errorf("state zone %q, want %q", u.State.Zone, st.zone)
			}
		})
	}
}

func TestDSR(t *testing.T) {
	withExternalIP := func(s *v1.Service) { s.Spec.ExternalIPs = []string{"192.0.2.1"} }
	type frontends struct {
		NodePort        uint16
		ExternalIPs     int
		LoadBalancerIPs int
	}
	all := frontends{NodePort: 30080, ExternalIPs: 1, LoadBalancerIPs: 1}
	lbOnly := frontends{LoadBalancerIPs: 1}
	tests := []struct {
		name      string
		dsr       bool
		svc       *v1.Service
		eps       []discoveryv1.Endpoint
		want      endpointSets
		wantFront frontends
	}{
		{
			name:      "without DSR an eTP Local LoadBalancer whose local endpoints all terminate keeps every frontend on them",
			svc:       service("s", 10, loadBalancer, etpLocal, withExternalIP),
			eps:       []discoveryv1.Endpoint{ep("10.244.1.1", "node-a", terminatingCond), ep("10.244.2.1", "node-b", readyCond)},
			want:      endpointSets{Cluster: []string{r1}, Local: []string{l1}, Internal: []string{r1}, External: []string{l1}, HasEndpoints: true},
			wantFront: all,
		},
		{
			name:      "with DSR an eTP Local LoadBalancer whose local endpoints all terminate drops its node port and external IPs but its LB IPs still reach them",
			dsr:       true,
			svc:       service("s", 10, loadBalancer, etpLocal, withExternalIP),
			eps:       []discoveryv1.Endpoint{ep("10.244.1.1", "node-a", terminatingCond), ep("10.244.2.1", "node-b", readyCond)},
			want:      endpointSets{Cluster: []string{r1}, Local: []string{l1}, Internal: []string{r1}, External: []string{l1}, HasEndpoints: true},
			wantFront: lbOnly,
		},
		{
			name:      "with DSR an eTP Local LoadBalancer with a ready local endpoint keeps every frontend while remote ones terminate",
			dsr:       true,
			svc:       service("s", 10, loadBalancer, etpLocal, withExternalIP),
			eps:       []discoveryv1.Endpoint{ep("10.244.1.1", "node-a", readyCond), ep("10.244.2.1", "node-b", terminatingCond)},
			want:      endpointSets{Cluster: []string{l1}, Local: []string{l1}, Internal: []string{l1}, External: []string{l1}, HasEndpoints: true, LocalReady: 1},
			wantFront: all,
		},
		{
			name:      "with DSR an eTP Local LoadBalancer without local endpoints drops its node port and external IPs",
			dsr:       true,
			svc:       service("s", 10, loadBalancer, etpLocal, withExternalIP),
			eps:       []discoveryv1.Endpoint{ep("10.244.2.1", "node-b", readyCond)},
			want:      endpointSets{Cluster: []string{r1}, Internal: []string{r1}, HasEndpoints: true},
			wantFront: lbOnly,
		},
		{
			name:      "with DSR an eTP Cluster LoadBalancer without local endpoints keeps every frontend on remote ones",
			dsr:       true,
			svc:       service("s", 10, loadBalancer, withExternalIP),
			eps:       []discoveryv1.Endpoint{ep("10.244.2.1", "node-b", readyCond)},
			want:      endpointSets{Cluster: []string{r1}, Internal: []string{r1}, External: []string{r1}, HasEndpoints: true},
			wantFront: all,
		},
		{
			name:      "with DSR an eTP Cluster LoadBalancer whose endpoints all terminate drops its node port and external IPs but its LB IPs still reach them",
			dsr:       true,
			svc:       service("s", 10, loadBalancer, withExternalIP),
			eps:       []discoveryv1.Endpoint{ep("10.244.1.1", "node-a", terminatingCond), ep("10.244.2.1", "node-b", terminatingCond)},
			want:      endpointSets{Cluster: []string{l1, r1}, Internal: []string{l1, r1}, External: []string{l1, r1}, HasEndpoints: true},
			wantFront: lbOnly,
		},
		{
			name:      "with DSR a ready but non-serving local endpoint counts as non-serving",
			dsr:       true,
			svc:       service("s", 10, loadBalancer, etpLocal, withExternalIP),
			eps:       []discoveryv1.Endpoint{ep("10.244.1.1", "node-a", cond{ready: ptr(true), serving: ptr(false)})},
			want:      endpointSets{Cluster: []string{l1}, Local: []string{l1}, Internal: []string{l1}, External: []string{l1}, HasEndpoints: true, LocalReady: 1},
			wantFront: lbOnly,
		},
		{
			name:      "with DSR a LoadBalancer still waiting for its IP keeps its node port",
			dsr:       true,
			svc:       service("s", 10, loadBalancer, etpLocal, func(s *v1.Service) { s.Status.LoadBalancer.Ingress = nil }),
			eps:       []discoveryv1.Endpoint{ep("10.244.2.1", "node-b", readyCond)},
			want:      endpointSets{Cluster: []string{r1}, Internal: []string{r1}, HasEndpoints: true},
			wantFront: frontends{NodePort: 30080},
		},
		{
			name:      "with DSR a NodePort service keeps its node port on terminating endpoints",
			dsr:       true,
			svc:       service("s", 10, nodePort),
			eps:       []discoveryv1.Endpoint{ep("10.244.2.1", "node-b", terminatingCond)},
			want:      endpointSets{Cluster: []string{r1}, Internal: []string{r1}, External: []string{r1}, HasEndpoints: true},
			wantFront: frontends{NodePort: 30080},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			state := snapshotOf(t, Options{DSR: tt.dsr}, []*v1.Service{tt.svc}, epSlice("s", "s-1", httpPort(80), tt.eps...))
			sp := state.ServicePorts[key("s", "http", proxy.IPv4)]
			if sp == nil {
				t.Fatalf("no ServicePort in %v", state.ServicePorts)
			}
			if diff := cmp.Diff(tt.want, setsOf(sp)); diff != "" {
				t.Errorf("endpoint sets (-want +got):\n%s", diff)
			}
			got := frontends{NodePort: sp.NodePort, ExternalIPs: len(sp.ExternalIPs), LoadBalancerIPs: len(sp.LoadBalancerIPs)}
			if diff := cmp.Diff(tt.wantFront, got); diff != "" {
				t.Errorf("frontends (-want +got):\n%s", diff)
			}
		})
	}
}
