package source

// Address plan: this node is node-a in zone-a; cluster IPs in
// 10.96.0.0/16 and fd00:96::/112, endpoints in 10.244.0.0/16 and
// fd00:244::/64, external and load-balancer IPs in 192.0.2.0/24 and
// 198.51.100.0/24, client ranges in 203.0.113.0/24.

import (
	"fmt"
	"runtime"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2/ktesting"

	"github.com/nodenet/nodenet/proxy"
	"github.com/nodenet/nodenet/proxy/brain"
)

var created = metav1.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// apiMeta is the metadata the API server and the controllers put on an
// object: managed fields, owner references, finalizers, generateName and
// the labels and annotations of whoever applied it.
func apiMeta(name string, labels, annotations map[string]string) metav1.ObjectMeta {
	return metav1.ObjectMeta{
		Name: name, GenerateName: name[:len(name)-1], Namespace: "shop",
		UID: types.UID("uid-" + name), ResourceVersion: "4711", Generation: 3, CreationTimestamp: created,
		Labels: labels, Annotations: annotations,
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Service", Name: "web", UID: "uid-web", Controller: new(true)}},
		Finalizers:      []string{"example.com/keep"},
		ManagedFields: []metav1.ManagedFieldsEntry{{
			Manager: "kube-controller-manager", Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: "v1",
			Time: &created, FieldsType: "FieldsV1", FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:metadata":{"f:labels":{}}}`)},
		}},
	}
}

// realisticService is a LoadBalancer Service as kubectl apply and a cloud
// controller leave it, using every field the proxy reads.
func realisticService(name string, n int) *v1.Service {
	ip := fmt.Sprintf("10.96.0.%d", n)
	return &v1.Service{
		ObjectMeta: apiMeta(name, map[string]string{"app": name, "tier": "front"}, map[string]string{
			"kubectl.kubernetes.io/last-applied-configuration": `{"apiVersion":"v1","kind":"Service"}`,
			annotationPreserveDestination:                      "true",
		}),
		Spec: v1.ServiceSpec{
			Type:       v1.ServiceTypeLoadBalancer,
			ClusterIP:  ip,
			ClusterIPs: []string{ip, fmt.Sprintf("fd00:96::%d", n)},
			IPFamilies: []v1.IPFamily{v1.IPv4Protocol, v1.IPv6Protocol}, IPFamilyPolicy: new(v1.IPFamilyPolicyPreferDualStack),
			Selector: map[string]string{"app": name},
			Ports: []v1.ServicePort{
				{Name: "http", Protocol: v1.ProtocolTCP, Port: 80, TargetPort: intstr.FromString("web"), NodePort: 30080, AppProtocol: new("http")},
				{Name: "dns", Protocol: v1.ProtocolUDP, Port: 53, TargetPort: intstr.FromInt32(5353), NodePort: 30053},
				{Name: "bad", Protocol: "ICMP", Port: 7}, // reported by the brain
			},
			ExternalIPs:                   []string{"192.0.2.10"},
			LoadBalancerIP:                "198.51.100.9",
			LoadBalancerSourceRanges:      []string{"203.0.113.0/24"},
			LoadBalancerClass:             new("example.com/lb"),
			SessionAffinity:               v1.ServiceAffinityClientIP,
			SessionAffinityConfig:         &v1.SessionAffinityConfig{ClientIP: &v1.ClientIPConfig{TimeoutSeconds: new(int32(600))}},
			ExternalTrafficPolicy:         v1.ServiceExternalTrafficPolicyLocal,
			InternalTrafficPolicy:         new(v1.ServiceInternalTrafficPolicyCluster),
			HealthCheckNodePort:           32000,
			TrafficDistribution:           new(v1.ServiceTrafficDistributionPreferClose),
			AllocateLoadBalancerNodePorts: new(true),
			PublishNotReadyAddresses:      true,
		},
		Status: v1.ServiceStatus{
			LoadBalancer: v1.LoadBalancerStatus{Ingress: []v1.LoadBalancerIngress{
				{IP: "198.51.100.9", IPMode: new(v1.LoadBalancerIPModeVIP), Ports: []v1.PortStatus{{Port: 80, Protocol: v1.ProtocolTCP}}},
				{IP: "198.51.100.10", IPMode: new(v1.LoadBalancerIPModeProxy)},
				{Hostname: "lb.example.com"},
			}},
			Conditions: []metav1.Condition{{Type: "LoadBalancerReady", Status: metav1.ConditionTrue}},
		},
	}
}

// realisticSlice is an EndpointSlice as the EndpointSlice controller
// writes it (it copies the Service's labels), with n endpoints spread
// over nodes node-a..node-c in two zones: ready, terminating and
// not-ready ones, with hints.
func realisticSlice(svc, name string, family discoveryv1.AddressType, n int) *discoveryv1.EndpointSlice {
	s := &discoveryv1.EndpointSlice{
		ObjectMeta: apiMeta(name, map[string]string{
			discoveryv1.LabelServiceName: svc, discoveryv1.LabelManagedBy: "endpointslice-controller.k8s.io",
			"app": svc, "tier": "front",
		}, map[string]string{v1.EndpointsLastChangeTriggerTime: "2026-01-01T00:00:00Z", "example.com/note": "x"}),
		AddressType: family,
		Ports: []discoveryv1.EndpointPort{
			{Name: new("http"), Protocol: new(v1.ProtocolTCP), Port: new(int32(8080)), AppProtocol: new("http")},
			{Name: new("dns"), Protocol: new(v1.ProtocolUDP), Port: new(int32(5353))},
		},
	}
	for j := range n {
		nodeName := fmt.Sprintf("node-%c", 'a'+j%3)
		zone := "zone-a"
		if j%3 == 2 {
			zone = "zone-b"
		}
		addr := fmt.Sprintf("10.244.%d.%d", j%3+1, j+10)
		if family == discoveryv1.AddressTypeIPv6 {
			addr = fmt.Sprintf("fd00:244::%x", j+10)
		}
		ready, terminating := j%4 != 3, j%5 == 4
		s.Endpoints = append(s.Endpoints, discoveryv1.Endpoint{
			Addresses:          []string{addr},
			Conditions:         discoveryv1.EndpointConditions{Ready: new(ready && !terminating), Serving: new(ready), Terminating: new(terminating)},
			Hostname:           new(fmt.Sprintf("%s-%d", svc, j)),
			TargetRef:          &v1.ObjectReference{Kind: "Pod", Namespace: "shop", Name: fmt.Sprintf("%s-%d", svc, j), UID: types.UID(fmt.Sprintf("pod-%d", j))},
			NodeName:           new(nodeName),
			Zone:               new(zone),
			Hints:              &discoveryv1.EndpointHints{ForZones: []discoveryv1.ForZone{{Name: zone}}, ForNodes: []discoveryv1.ForNode{{Name: nodeName}}},
			DeprecatedTopology: map[string]string{v1.LabelHostname: nodeName},
		})
	}
	return s
}

func TestTrimKeepsWhatTheProxyReadsAndDropsTheRest(t *testing.T) {
	keptMeta := func(name string, labels, annotations map[string]string) metav1.ObjectMeta {
		return metav1.ObjectMeta{
			Name: name, Namespace: "shop", UID: types.UID("uid-" + name), ResourceVersion: "4711", Generation: 3,
			CreationTimestamp: created, Labels: labels, Annotations: annotations,
		}
	}
	deleting := metav1.NewTime(created.Add(time.Hour))
	for _, tc := range []struct {
		name string
		in   any
		want any
	}{{
		name: "a Service keeps its addresses, ports, policies and the proxy's labels and annotation only",
		in: func() *v1.Service {
			s := realisticService("web", 10)
			s.Labels[labelServiceProxyName] = "other" // filtered out by the selector, but read
			return s
		}(),
		want: &v1.Service{
			ObjectMeta: keptMeta("web", map[string]string{labelServiceProxyName: "other"}, map[string]string{annotationPreserveDestination: "true"}),
			Spec: v1.ServiceSpec{
				Type:       v1.ServiceTypeLoadBalancer,
				ClusterIP:  "10.96.0.10",
				ClusterIPs: []string{"10.96.0.10", "fd00:96::10"},
				Ports: []v1.ServicePort{
					{Name: "http", Protocol: v1.ProtocolTCP, Port: 80, NodePort: 30080},
					{Name: "dns", Protocol: v1.ProtocolUDP, Port: 53, NodePort: 30053},
					{Name: "bad", Protocol: "ICMP", Port: 7},
				},
				ExternalIPs:              []string{"192.0.2.10"},
				LoadBalancerSourceRanges: []string{"203.0.113.0/24"},
				SessionAffinity:          v1.ServiceAffinityClientIP,
				SessionAffinityConfig:    &v1.SessionAffinityConfig{ClientIP: &v1.ClientIPConfig{TimeoutSeconds: new(int32(600))}},
				ExternalTrafficPolicy:    v1.ServiceExternalTrafficPolicyLocal,
				InternalTrafficPolicy:    new(v1.ServiceInternalTrafficPolicyCluster),
				HealthCheckNodePort:      32000,
				TrafficDistribution:      new(v1.ServiceTrafficDistributionPreferClose),
				PublishNotReadyAddresses: true,
			},
			Status: v1.ServiceStatus{LoadBalancer: v1.LoadBalancerStatus{Ingress: []v1.LoadBalancerIngress{
				{IP: "198.51.100.9", IPMode: new(v1.LoadBalancerIPModeVIP)},
				{IP: "198.51.100.10", IPMode: new(v1.LoadBalancerIPModeProxy)},
				{},
			}}},
		},
	}, {
		name: "a Service with nothing the proxy reads in its labels and annotations keeps neither map",
		in: &v1.Service{
			ObjectMeta: metav1.ObjectMeta{Name: "a", Labels: map[string]string{"app": "a"}, Annotations: map[string]string{"x": "y"}},
			Spec:       v1.ServiceSpec{ClusterIP: "10.96.0.1"},
		},
		want: &v1.Service{ObjectMeta: metav1.ObjectMeta{Name: "a"}, Spec: v1.ServiceSpec{ClusterIP: "10.96.0.1"}},
	}, {
		name: "an EndpointSlice keeps addresses, conditions, node, zone, hints, its service label and trigger time",
		in: func() *discoveryv1.EndpointSlice {
			s := realisticSlice("web", "web-abc12", discoveryv1.AddressTypeIPv4, 1)
			s.Endpoints[0].Addresses = append(s.Endpoints[0].Addresses, "10.244.9.9")
			return s
		}(),
		want: &discoveryv1.EndpointSlice{
			ObjectMeta: keptMeta("web-abc12", map[string]string{discoveryv1.LabelServiceName: "web"},
				map[string]string{v1.EndpointsLastChangeTriggerTime: "2026-01-01T00:00:00Z"}),
			AddressType: discoveryv1.AddressTypeIPv4,
			Ports: []discoveryv1.EndpointPort{
				{Name: new("http"), Protocol: new(v1.ProtocolTCP), Port: new(int32(8080))},
				{Name: new("dns"), Protocol: new(v1.ProtocolUDP), Port: new(int32(5353))},
			},
			Endpoints: []discoveryv1.Endpoint{{
				Addresses:  []string{"10.244.1.10", "10.244.9.9"},
				Conditions: discoveryv1.EndpointConditions{Ready: new(true), Serving: new(true), Terminating: new(false)},
				NodeName:   new("node-a"),
				Zone:       new("zone-a"),
				Hints:      &discoveryv1.EndpointHints{ForZones: []discoveryv1.ForZone{{Name: "zone-a"}}, ForNodes: []discoveryv1.ForNode{{Name: "node-a"}}},
			}},
		},
	}, {
		name: "a headless Service's slice keeps the headless label the filter reads",
		in: &discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Name: "h", Labels: map[string]string{
			discoveryv1.LabelServiceName: "h", labelHeadless: "", discoveryv1.LabelManagedBy: "x",
		}}},
		want: &discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Name: "h", Labels: map[string]string{
			discoveryv1.LabelServiceName: "h", labelHeadless: "",
		}}},
	}, {
		name: "this node's Node keeps its labels, taints and deletion, not its status",
		in: &v1.Node{
			ObjectMeta: metav1.ObjectMeta{
				Name: "node-a", ResourceVersion: "9", DeletionTimestamp: &deleting,
				Labels:        map[string]string{v1.LabelTopologyZone: "zone-a", v1.LabelHostname: "node-a"},
				Annotations:   map[string]string{"node.alpha.kubernetes.io/ttl": "0"},
				ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubelet"}},
			},
			Spec: v1.NodeSpec{PodCIDR: "10.244.1.0/24", Taints: []v1.Taint{{Key: "ToBeDeletedByClusterAutoscaler", Effect: v1.TaintEffectNoSchedule}}},
			Status: v1.NodeStatus{
				Images:     []v1.ContainerImage{{Names: []string{"registry.example.com/big:1"}, SizeBytes: 1 << 30}},
				Conditions: []v1.NodeCondition{{Type: v1.NodeReady, Status: v1.ConditionTrue}},
			},
		},
		want: &v1.Node{
			ObjectMeta: metav1.ObjectMeta{
				Name: "node-a", ResourceVersion: "9", DeletionTimestamp: &deleting,
				Labels: map[string]string{v1.LabelTopologyZone: "zone-a", v1.LabelHostname: "node-a"},
			},
			Spec: v1.NodeSpec{PodCIDR: "10.244.1.0/24", Taints: []v1.Taint{{Key: "ToBeDeletedByClusterAutoscaler", Effect: v1.TaintEffectNoSchedule}}},
		},
	}, {
		name: "other types pass unchanged",
		in:   &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Annotations: map[string]string{"x": "y"}}},
		want: &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Annotations: map[string]string{"x": "y"}}},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := newTrimmer().transform(tc.in)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("trimmed (-want +got):\n%s", diff)
			}
		})
	}
}

// TestTrimKeepsWhatTheBrainReads feeds one brain the objects as the API
// server sends them and another the trimmed ones: the states and the
// reported problems must be the same.
func TestTrimKeepsWhatTheBrainReads(t *testing.T) {
	objects := func() ([]*v1.Service, []*discoveryv1.EndpointSlice) {
		var svcs []*v1.Service
		var eps []*discoveryv1.EndpointSlice
		for i := range 6 {
			name := fmt.Sprintf("web%d", i)
			s := realisticService(name, i+10)
			switch i {
			case 1:
				s.Spec.Type, s.Spec.ExternalTrafficPolicy = v1.ServiceTypeClusterIP, ""
				s.Spec.InternalTrafficPolicy = new(v1.ServiceInternalTrafficPolicyLocal)
			case 2:
				s.Spec.Type = v1.ServiceTypeNodePort
				s.Spec.TrafficDistribution = new(v1.ServiceTrafficDistributionPreferSameNode)
			case 3:
				s.Spec.SessionAffinity, s.Spec.SessionAffinityConfig = v1.ServiceAffinityNone, nil
				s.Spec.TrafficDistribution = nil
			}
			svcs = append(svcs, s)
			eps = append(eps,
				realisticSlice(name, name+"-v4", discoveryv1.AddressTypeIPv4, 7),
				realisticSlice(name, name+"-v6", discoveryv1.AddressTypeIPv6, 4))
		}
		// A slice without a service label: reported, not proxied.
		orphan := realisticSlice("x", "orphan-1", discoveryv1.AddressTypeIPv4, 1)
		delete(orphan.Labels, discoveryv1.LabelServiceName)
		return svcs, append(eps, orphan)
	}
	node := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-a", Labels: map[string]string{v1.LabelTopologyZone: "zone-a"}}}

	run := func(trim bool) (map[proxy.ServicePortKey]*proxy.ServicePort, []string) {
		rec := record.NewFakeRecorder(100)
		b := brain.New(brain.Options{
			NodeName: "node-a", Families: []proxy.IPFamily{proxy.IPv4, proxy.IPv6}, DSR: true,
			Recorder: rec, Logger: ktesting.NewLogger(t, ktesting.NewConfig()),
		})
		tr := newTrimmer()
		in := func(o any) any {
			if !trim {
				return o
			}
			out, err := tr.transform(o)
			if err != nil {
				t.Fatal(err)
			}
			return out
		}
		b.OnNodeUpdate(nil, in(node.DeepCopy()).(*v1.Node))
		svcs, eps := objects()
		for _, s := range svcs {
			b.OnServiceUpdate(nil, in(s).(*v1.Service))
		}
		for _, s := range eps {
			b.OnEndpointSliceUpdate(nil, in(s).(*discoveryv1.EndpointSlice))
		}
		b.OnSynced()
		update, _ := b.Snapshot(true)
		close(rec.Events)
		var events []string
		for e := range rec.Events {
			events = append(events, e)
		}
		slices.Sort(events)
		return update.State.ServicePorts, events
	}
	wantState, wantEvents := run(false)
	gotState, gotEvents := run(true)
	if len(wantState) != 6*2*2 {
		t.Fatalf("the untrimmed objects give %d service ports, want 24: the test's objects are wrong", len(wantState))
	}
	if len(wantEvents) == 0 {
		t.Fatal("no problem reported for the untrimmed objects: the test's bad port is not bad")
	}
	for key, want := range wantState {
		if got := gotState[key]; !want.Equal(got) {
			t.Errorf("%v: trimmed objects give\n%+v\nwant\n%+v", key, got, want)
		}
	}
	if len(gotState) != len(wantState) {
		t.Errorf("trimmed objects give %d service ports, want %d", len(gotState), len(wantState))
	}
	if diff := cmp.Diff(wantEvents, gotEvents); diff != "" {
		t.Errorf("events (-untrimmed +trimmed):\n%s", diff)
	}
}

func TestTrimSharesRepeatedValues(t *testing.T) {
	tr := newTrimmer()
	a, _ := tr.transform(realisticSlice("a", "a-1", discoveryv1.AddressTypeIPv4, 6))
	b, _ := tr.transform(realisticSlice("b", "b-1", discoveryv1.AddressTypeIPv4, 6))
	ea, eb := a.(*discoveryv1.EndpointSlice).Endpoints, b.(*discoveryv1.EndpointSlice).Endpoints
	if ea[0].NodeName != eb[0].NodeName || ea[0].NodeName != ea[3].NodeName || ea[0].Zone != eb[1].Zone {
		t.Error("one node name or zone has several copies")
	}
	if *ea[1].NodeName != "node-b" || *ea[2].Zone != "zone-b" || ea[0].NodeName == ea[1].NodeName {
		t.Errorf("interning mixed values up: %s/%s, %s", *ea[1].NodeName, *ea[2].Zone, *ea[0].NodeName)
	}
	if ea[0].Conditions.Ready != eb[0].Conditions.Ready || ea[0].Conditions.Ready != ea[0].Conditions.Serving {
		t.Error("the true conditions are not shared")
	}
	if !*ea[0].Conditions.Ready || *ea[0].Conditions.Terminating || !*ea[4].Conditions.Terminating || *ea[3].Conditions.Ready {
		t.Errorf("shared conditions have the wrong values: %+v", ea[0].Conditions)
	}
	if a.(*discoveryv1.EndpointSlice).Namespace != "shop" {
		t.Error("namespace lost")
	}
}

func TestTrimStartsAfreshPastItsBound(t *testing.T) {
	tr := newTrimmer()
	first := tr.internPtr(new("node-0"))
	for i := 1; i <= maxInterned; i++ {
		tr.internPtr(new(fmt.Sprintf("node-%d", i)))
	}
	if len(tr.strings) > maxInterned {
		t.Errorf("the interner holds %d strings, bound %d", len(tr.strings), maxInterned)
	}
	if *first != "node-0" {
		t.Errorf("a string handed out changed to %q", *first)
	}
}

// BenchmarkCachedBytes measures what one cached object costs the
// informers: realistic objects (realisticService, realisticSlice with 10
// endpoints) decoded from protobuf as a reflector does, as sent and
// trimmed. Run with -benchtime=1x; B/object is the heap they keep.
func BenchmarkCachedBytes(b *testing.B) {
	const n = 5000
	svcData, err := realisticService("web", 10).Marshal()
	if err != nil {
		b.Fatal(err)
	}
	sliceData, err := realisticSlice("web", "web-abc12", discoveryv1.AddressTypeIPv4, 10).Marshal()
	if err != nil {
		b.Fatal(err)
	}
	benchSvc, benchSlice := benchProxyObjects()
	benchSvcData, err := benchSvc.Marshal()
	if err != nil {
		b.Fatal(err)
	}
	benchSliceData, err := benchSlice.Marshal()
	if err != nil {
		b.Fatal(err)
	}
	unmarshal := func(data []byte, o interface{ Unmarshal([]byte) error }) any {
		if err := o.Unmarshal(data); err != nil {
			b.Fatal(err)
		}
		return o
	}
	decode := map[string]func() any{
		"Service":              func() any { return unmarshal(svcData, &v1.Service{}) },
		"EndpointSlice10":      func() any { return unmarshal(sliceData, &discoveryv1.EndpointSlice{}) },
		"BenchService":         func() any { return unmarshal(benchSvcData, &v1.Service{}) },
		"BenchEndpointSlice10": func() any { return unmarshal(benchSliceData, &discoveryv1.EndpointSlice{}) },
	}
	for _, kind := range []string{"Service", "EndpointSlice10", "BenchService", "BenchEndpointSlice10"} {
		for _, trim := range []bool{false, true} {
			b.Run(fmt.Sprintf("%s/trimmed=%v", kind, trim), func(b *testing.B) {
				for range b.N {
					tr := newTrimmer()
					keep := make([]any, n)
					before := heapInUse()
					for i := range keep {
						o := decode[kind]()
						if trim {
							o, _ = tr.transform(o)
						}
						keep[i] = o
					}
					after := heapInUse()
					runtime.KeepAlive(keep)
					b.ReportMetric(float64(after-before)/n, "B/object")
				}
			})
		}
	}
}

// benchProxyObjects are one Service and its slice as bench/proxy creates
// them, with what the API server adds (UID, resource version, creation
// time, managed fields, the defaulted spec).
func benchProxyObjects() (*v1.Service, *discoveryv1.EndpointSlice) {
	meta := func(name string) metav1.ObjectMeta {
		return metav1.ObjectMeta{
			Name: name, Namespace: "bench", UID: "0b6f2c3e-5a7d-4e0a-9a57-3c1f7e2d9b10", ResourceVersion: "123456",
			CreationTimestamp: created,
			ManagedFields: []metav1.ManagedFieldsEntry{{
				Manager: "proxy", Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: "v1", Time: &created,
				FieldsType: "FieldsV1", FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:spec":{"f:clusterIP":{},"f:ports":{".":{},"k:{\"port\":80,\"protocol\":\"TCP\"}":{".":{},"f:name":{},"f:port":{},"f:protocol":{},"f:targetPort":{}}},"f:selector":{},"f:sessionAffinity":{},"f:type":{}}}`)},
			}},
		}
	}
	svc := &v1.Service{
		ObjectMeta: meta("svc-01234"),
		Spec: v1.ServiceSpec{
			Type: v1.ServiceTypeClusterIP, ClusterIP: "10.96.5.210", ClusterIPs: []string{"10.96.5.210"},
			IPFamilies: []v1.IPFamily{v1.IPv4Protocol}, IPFamilyPolicy: new(v1.IPFamilyPolicySingleStack),
			Selector:        map[string]string{"app": "svc-01234"},
			SessionAffinity: v1.ServiceAffinityNone, InternalTrafficPolicy: new(v1.ServiceInternalTrafficPolicyCluster),
			Ports: []v1.ServicePort{{Name: "http", Protocol: v1.ProtocolTCP, Port: 80, TargetPort: intstr.FromInt32(8080)}},
		},
	}
	slice := &discoveryv1.EndpointSlice{
		ObjectMeta:  meta("svc-01234-bench"),
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: new("http"), Protocol: new(v1.ProtocolTCP), Port: new(int32(8080))}},
	}
	slice.Labels = map[string]string{discoveryv1.LabelServiceName: "svc-01234", discoveryv1.LabelManagedBy: "bench.nodenet.io"}
	slice.Annotations = map[string]string{v1.EndpointsLastChangeTriggerTime: "2026-11-27T16:20:16.487455123Z"}
	for j := range 10 {
		slice.Endpoints = append(slice.Endpoints, discoveryv1.Endpoint{
			Addresses:  []string{fmt.Sprintf("100.64.48.%d", 30+j)},
			Conditions: discoveryv1.EndpointConditions{Ready: new(true)},
			NodeName:   new(fmt.Sprintf("node-%d", j)),
		})
	}
	return svc, slice
}

func heapInUse() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}
