package overlay_test

// Address plan: cluster CIDR 10.244.0.0/16, service CIDR 10.96.0.0/12;
// node n1 (this node) 10.244.1.0/24 on 192.168.77.11, n2 10.244.2.0/24 on
// 192.168.77.12 (later .22), n3 10.244.3.0/24 on 192.168.77.13; underlay
// 192.168.77.0/24 on the simulated host's adapter "Ethernet".

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2/ktesting"

	"github.com/nodenet/nodenet/config"
	"github.com/nodenet/nodenet/hns"
	"github.com/nodenet/nodenet/overlay"
	"github.com/nodenet/nodenet/overlay/hnsnet"
	"github.com/nodenet/nodenet/overlay/hostroute"
)

const testConfig = `apiVersion: nodenet.io/v1alpha1
kind: AgentConfiguration
nodeName: n1
syncPeriod: 1h
`

// winNode is this node on a simulated Windows host, with its controller.
type winNode struct {
	sim      *hns.Simulator
	client   *fake.Clientset
	recorder *record.FakeRecorder
	seen     []string // events drained from recorder
	cfg      *config.AgentConfiguration

	mu    sync.Mutex
	ready []*overlay.LocalNetwork
	// tables are the remote node tables OnRemotes handed over.
	tables [][]overlay.RemoteNode
	ctrl   *overlay.Controller
	stop   func()
}

func newWinNode(t *testing.T, extraConfig string, nodes ...*v1.Node) *winNode {
	t.Helper()
	if !strings.Contains(extraConfig, "clusterCIDRs") {
		extraConfig += "clusterCIDRs: [10.244.0.0/16]\nserviceCIDRs: [10.96.0.0/12]\n"
	}
	cfg, _, err := config.Load([]byte(testConfig+extraConfig), config.LoadOptions{OS: config.OSWindows,
		Getenv: func(string) string { return "" }, Hostname: func() (string, error) { return "n1", nil }})
	if err != nil {
		t.Fatal(err)
	}
	sim := hns.NewSimulator(hns.SimulatorOptions{HostAdapters: []hns.HostAdapter{
		{Name: "Ethernet", IPs: []string{"192.168.77.11"}, MAC: "00-15-5D-4D-00-0B"}}})
	objs := make([]runtime.Object, 0, len(nodes))
	for _, n := range nodes {
		objs = append(objs, n)
	}
	return &winNode{sim: sim, client: fake.NewClientset(objs...), recorder: record.NewFakeRecorder(100), cfg: cfg}
}

// start runs a new controller over a new hnsnet.Network on the same host,
// as an agent (re)start does.
func (w *winNode) start(t *testing.T) {
	t.Helper()
	dp, err := hnsnet.New(hnsnet.Options{HNS: w.sim, HostRoutes: hostroute.NewFake(), Adapters: w.adapters})
	if err != nil {
		t.Fatal(err)
	}
	ctrl, err := overlay.NewController(overlay.ControllerOptions{
		Config: w.cfg, Client: w.client, Dataplane: dp, Recorder: w.recorder,
		OnReady: func(l *overlay.LocalNetwork) {
			w.mu.Lock()
			w.ready = append(w.ready, l)
			w.mu.Unlock()
		},
		OnRemotes: func(r []overlay.RemoteNode) {
			w.mu.Lock()
			w.tables = append(w.tables, r)
			w.mu.Unlock()
		},
		RetryBackoff: wait.Backoff{Duration: 10 * time.Millisecond, Factor: 2, Steps: 5, Cap: 100 * time.Millisecond},
		Logger:       ktesting.NewLogger(t, ktesting.NewConfig()),
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- ctrl.Run(ctx) }()
	w.ctrl = ctrl
	w.stop = func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("controller: %v", err)
		}
	}
	t.Cleanup(func() {
		if w.stop != nil {
			w.stop()
			w.stop = nil
		}
	})
}

func (w *winNode) restart(t *testing.T) {
	w.stop()
	w.stop = nil
	w.start(t)
}

// adapters is the simulated host's adapter as the OS would list it.
func (w *winNode) adapters(context.Context) ([]hnsnet.Adapter, error) {
	mac, _ := net.ParseMAC("00:15:5d:4d:00:0b")
	return []hnsnet.Adapter{{Name: "Ethernet", Index: 4, MTU: 1500, MAC: mac,
		IPs: []netip.Prefix{netip.MustParsePrefix("192.168.77.11/24")}}}, nil
}

func (w *winNode) readyCalls() []*overlay.LocalNetwork {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]*overlay.LocalNetwork(nil), w.ready...)
}

// eventually polls cond until it holds or 10s pass.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	err := wait.PollUntilContextTimeout(context.Background(), 10*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		return cond(), nil
	})
	if err != nil {
		t.Fatalf("timed out waiting until %s", what)
	}
}

func (w *winNode) node(t *testing.T, name string) *v1.Node {
	t.Helper()
	n, err := w.client.CoreV1().Nodes().Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func (w *winNode) condition(t *testing.T) (v1.ConditionStatus, string) {
	for _, c := range w.node(t, "n1").Status.Conditions {
		if c.Type == v1.NodeNetworkUnavailable {
			return c.Status, c.Reason
		}
	}
	return "", ""
}

// routes returns the overlay network's RemoteSubnetRoutes as
// "prefix→provider/mac" strings, sorted by HNS order.
func (w *winNode) routes(t *testing.T) []string {
	t.Helper()
	n, err := w.sim.GetNetworkByName(context.Background(), "nodenet")
	if err != nil {
		return nil
	}
	var out []string
	for _, p := range n.Policies {
		if p.Type == hns.NetworkPolicyRemoteSubnetRoute {
			r := p.RemoteSubnetRoute
			out = append(out, fmt.Sprintf("%s→%s/%s", r.DestinationPrefix, r.ProviderAddress, strings.ToLower(r.DistributedRouterMacAddress)))
		}
	}
	return out
}

func (w *winNode) update(t *testing.T, name string, change func(*v1.Node)) {
	t.Helper()
	n := w.node(t, name)
	change(n)
	if _, err := w.client.CoreV1().Nodes().Update(context.Background(), n, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// events returns every event recorded so far. The recorder sends an
// event after the API write it reports, so callers wait with eventually.
func (w *winNode) events() []string {
	for {
		select {
		case e := <-w.recorder.Events:
			w.seen = append(w.seen, e)
		default:
			return w.seen
		}
	}
}

func (w *winNode) hasEvents(reasons ...string) func() bool {
	return func() bool {
		all := strings.Join(w.events(), "\n")
		for _, r := range reasons {
			if !strings.Contains(all, r) {
				return false
			}
		}
		return true
	}
}

func testNode(name, podCIDR, ip string, annotations map[string]string) *v1.Node {
	n := &v1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: annotations},
		Status:     v1.NodeStatus{Addresses: []v1.NodeAddress{{Type: v1.NodeInternalIP, Address: ip}}},
	}
	if podCIDR != "" {
		n.Spec.PodCIDR, n.Spec.PodCIDRs = podCIDR, []string{podCIDR}
	}
	return n
}

func flannelPeer(name, podCIDR, ip, mac string, vni int) *v1.Node {
	return testNode(name, podCIDR, ip, map[string]string{
		overlay.AnnotationKubeSubnetManager: "true",
		overlay.AnnotationBackendType:       "vxlan",
		overlay.AnnotationBackendData:       fmt.Sprintf(`{"VNI":%d,"VtepMAC":%q}`, vni, mac),
		overlay.AnnotationPublicIP:          ip,
	})
}

func TestControllerWaitsForThePodCIDR(t *testing.T) {
	w := newWinNode(t, "", testNode("n1", "", "192.168.77.11", nil))
	w.start(t)
	eventually(t, "the condition says NoPodCIDR", func() bool {
		s, r := w.condition(t)
		return s == v1.ConditionTrue && r == overlay.ReasonNoPodCIDR
	})
	if got := w.sim.Writes(); got != 0 {
		t.Errorf("%d HNS writes before the pod CIDR is known", got)
	}
	if len(w.readyCalls()) != 0 || w.ctrl.Local() != nil {
		t.Error("the network was handed over before it exists")
	}

	w.update(t, "n1", func(n *v1.Node) { n.Spec.PodCIDR, n.Spec.PodCIDRs = "10.244.1.0/24", []string{"10.244.1.0/24"} })
	eventually(t, "the network is ready", func() bool { return len(w.readyCalls()) == 1 })
	local := w.readyCalls()[0]
	if local.SourceVIP.String() != "10.244.1.2" || local.PodCIDRs[0].String() != "10.244.1.0/24" {
		t.Errorf("handed over source VIP %v pod CIDRs %v", local.SourceVIP, local.PodCIDRs)
	}
	eventually(t, "the condition says ready", func() bool {
		s, r := w.condition(t)
		return s == v1.ConditionFalse && r == overlay.ReasonReady
	})
	a := w.node(t, "n1").Annotations
	wantData := fmt.Sprintf(`{"VNI":4096,"VtepMAC":"%s"}`, local.VtepMAC)
	if a[overlay.AnnotationBackendType] != "vxlan" || a[overlay.AnnotationBackendData] != wantData ||
		a[overlay.AnnotationPublicIP] != "192.168.77.11" || a[overlay.AnnotationKubeSubnetManager] != "true" {
		t.Errorf("published annotations %v, want backend-data %s", a, wantData)
	}
	eventually(t, "a NoPodCIDR warning and a ready event", w.hasEvents(overlay.ReasonNoPodCIDR, overlay.ReasonReady))
}

func TestControllerFollowsRemoteNodes(t *testing.T) {
	w := newWinNode(t, "",
		testNode("n1", "10.244.1.0/24", "192.168.77.11", map[string]string{"x": "y"}),
		flannelPeer("n2", "10.244.2.0/24", "192.168.77.12", "0e:4e:c0:a8:4d:0c", 4096))
	w.start(t)
	eventually(t, "n2 is routed", func() bool {
		r := w.routes(t)
		return len(r) == 1 && r[0] == "10.244.2.0/24→192.168.77.12/0e-4e-c0-a8-4d-0c"
	})

	t.Run("a node joining adds its route", func(t *testing.T) {
		if _, err := w.client.CoreV1().Nodes().Create(context.Background(), flannelPeer("n3", "10.244.3.0/24", "192.168.77.13", "0e:4e:c0:a8:4d:0d", 4096), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		eventually(t, "n3 is routed", func() bool { return len(w.routes(t)) == 2 })
	})
	t.Run("a node changing its IP moves its route", func(t *testing.T) {
		w.update(t, "n2", func(n *v1.Node) { n.Annotations[overlay.AnnotationPublicIP] = "192.168.77.22" })
		eventually(t, "n2's route points at .22", func() bool {
			return strings.Contains(strings.Join(w.routes(t), " "), "10.244.2.0/24→192.168.77.22/")
		})
	})
	t.Run("a malformed annotation keeps the last good route and says why", func(t *testing.T) {
		w.update(t, "n2", func(n *v1.Node) { n.Annotations[overlay.AnnotationBackendData] = `{"VNI":4096,"VtepMAC":"garbage"}` })
		eventually(t, "a PeerMalformedAnnotation event", func() bool {
			return strings.Contains(strings.Join(w.events(), "\n"), overlay.PeerMalformedAnnotation)
		})
		if r := strings.Join(w.routes(t), " "); !strings.Contains(r, "10.244.2.0/24→192.168.77.22/") {
			t.Errorf("n2's route was dropped over a malformed annotation: %s", r)
		}
	})
	t.Run("a VNI mismatch is an event, not a route", func(t *testing.T) {
		if _, err := w.client.CoreV1().Nodes().Create(context.Background(), flannelPeer("n4", "10.244.4.0/24", "192.168.77.14", "0e:4e:c0:a8:4d:0e", 1), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		eventually(t, "a PeerVNIMismatch event", func() bool {
			return strings.Contains(strings.Join(w.events(), "\n"), overlay.PeerVNIMismatch)
		})
		if r := strings.Join(w.routes(t), " "); strings.Contains(r, "10.244.4.0/24") {
			t.Errorf("a route to a node with another VNI: %s", r)
		}
	})
	t.Run("a deleted node loses its route", func(t *testing.T) {
		if err := w.client.CoreV1().Nodes().Delete(context.Background(), "n3", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		eventually(t, "n3's route is gone", func() bool {
			return !strings.Contains(strings.Join(w.routes(t), " "), "10.244.3.0/24")
		})
	})
	if remotes := w.ctrl.Remotes(); len(remotes) != 1 || remotes[0].Name != "n2" {
		t.Errorf("remote node table %+v, want n2 only", remotes)
	}
}

// TestControllerHandsOverEachNewRemoteNodeTable: the proxy learns of
// every change of the remote node table (its remote endpoints' provider
// addresses come from it), and of nothing else.
func TestControllerHandsOverEachNewRemoteNodeTable(t *testing.T) {
	w := newWinNode(t, "", testNode("n1", "10.244.1.0/24", "192.168.77.11", map[string]string{"x": "y"}))
	w.start(t)
	eventually(t, "the network is ready", func() bool { return len(w.readyCalls()) == 1 })
	tables := func() [][]overlay.RemoteNode {
		w.mu.Lock()
		defer w.mu.Unlock()
		return slices.Clone(w.tables)
	}
	if n := len(tables()); n != 0 {
		t.Fatalf("%d tables handed over with no other node", n)
	}
	last := func() string {
		ts := tables()
		if len(ts) == 0 {
			return ""
		}
		var out []string
		for _, r := range ts[len(ts)-1] {
			out = append(out, r.Name+"@"+r.NodeIP.String())
		}
		return strings.Join(out, ",")
	}
	if _, err := w.client.CoreV1().Nodes().Create(context.Background(), flannelPeer("n2", "10.244.2.0/24", "192.168.77.12", "0e:4e:c0:a8:4d:0c", 4096), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "a node joining is handed over", func() bool { return last() == "n2@192.168.77.12" })
	w.update(t, "n2", func(n *v1.Node) { n.Annotations[overlay.AnnotationPublicIP] = "192.168.77.22" })
	eventually(t, "a node changing its IP is handed over", func() bool { return last() == "n2@192.168.77.22" })
	n := len(tables())
	// A change the table does not show hands nothing over: only the
	// delete below counts.
	w.update(t, "n2", func(n *v1.Node) { n.Labels = map[string]string{"unrelated": "change"} })
	if err := w.client.CoreV1().Nodes().Delete(context.Background(), "n2", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "a node leaving is handed over", func() bool { return len(tables()) == n+1 && last() == "" })
}

func TestControllerRestartOnACorrectNodeWritesNothing(t *testing.T) {
	w := newWinNode(t, "",
		testNode("n1", "10.244.1.0/24", "192.168.77.11", map[string]string{"x": "y"}),
		flannelPeer("n2", "10.244.2.0/24", "192.168.77.12", "0e:4e:c0:a8:4d:0c", 4096))
	w.start(t)
	eventually(t, "ready and n2 routed", func() bool {
		s, _ := w.condition(t)
		return s == v1.ConditionFalse && len(w.routes(t)) == 1
	})
	before := w.readyCalls()[0]
	w.stop()
	w.stop = nil
	w.sim.ResetCalls()
	w.client.ClearActions()

	w.start(t)
	eventually(t, "the new controller is ready", func() bool { return w.ctrl.Local() != nil && len(w.ctrl.Remotes()) == 1 })
	if got := w.sim.Writes(); got != 0 {
		t.Errorf("restart made %d HNS writes (%v), want 0", got, w.sim.CallCounts())
	}
	for _, a := range w.client.Actions() {
		if a.GetVerb() != "list" && a.GetVerb() != "watch" && a.GetVerb() != "get" {
			t.Errorf("restart wrote to the API server: %s %s", a.GetVerb(), a.GetResource().Resource)
		}
	}
	after := w.ctrl.Local()
	if after.VtepMAC.String() != before.VtepMAC.String() || after.SourceVIPEndpointID != before.SourceVIPEndpointID {
		t.Errorf("restart changed the network's facts: %+v → %+v", before, after)
	}
}

func TestControllerReportsWhatItCannotBuild(t *testing.T) {
	tests := []struct {
		name       string
		config     string
		self       *v1.Node
		prepare    func(t *testing.T, sim *hns.Simulator)
		wantReason string
		wantText   string
	}{
		{
			name:       "a pod CIDR inside the service CIDR",
			self:       testNode("n1", "10.96.1.0/24", "192.168.77.11", nil),
			wantReason: overlay.ReasonInvalidPodCIDR,
			wantText:   "service CIDR",
		},
		{
			name:       "a node without an IPv4 address",
			self:       testNode("n1", "10.244.1.0/24", "fd00::11", nil),
			wantReason: overlay.ReasonNoNodeIP,
			wantText:   "InternalIP",
		},
		{
			name:       "an external adapter the host doesn't have",
			config:     "network: {externalInterface: Ethernet 7}\n",
			self:       testNode("n1", "10.244.1.0/24", "192.168.77.11", nil),
			wantReason: overlay.ReasonInvalidNetworkConfig,
			wantText:   "Ethernet 7",
		},
		{
			name: "an existing network of another type",
			self: testNode("n1", "10.244.1.0/24", "192.168.77.11", nil),
			prepare: func(t *testing.T, sim *hns.Simulator) {
				_, err := sim.CreateNetwork(context.Background(), &hns.Network{Name: "nodenet", Type: hns.NetworkTypeL2Bridge,
					Ipams: []hns.IPAM{{Type: "Static", Subnets: []hns.Subnet{{IpAddressPrefix: "10.244.1.0/24", Routes: []hns.Route{{NextHop: "10.244.1.1", DestinationPrefix: "0.0.0.0/0"}}}}}}})
				if err != nil {
					t.Fatal(err)
				}
			},
			wantReason: overlay.ReasonNetworkMismatch,
			wantText:   "allowRecreate",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name+" is reported on the Node and changes nothing", func(t *testing.T) {
			w := newWinNode(t, tt.config, tt.self)
			if tt.prepare != nil {
				tt.prepare(t, w.sim)
			}
			w.sim.ResetCalls()
			w.start(t)
			eventually(t, "the condition says "+tt.wantReason, func() bool {
				s, r := w.condition(t)
				return s == v1.ConditionTrue && r == tt.wantReason
			})
			if got := w.sim.Writes(); got != 0 {
				t.Errorf("%d HNS writes (%v), want 0", got, w.sim.CallCounts())
			}
			if msg := w.ctrl.Ready(); msg == nil || !strings.Contains(msg.Error(), tt.wantText) {
				t.Errorf("Ready() = %v, want it to mention %q", msg, tt.wantText)
			}
			if len(w.readyCalls()) != 0 {
				t.Error("a network was handed over")
			}
		})
	}
}

func TestControllerRunsOverlayDualStackAsIPv4Only(t *testing.T) {
	w := newWinNode(t, "clusterCIDRs: [10.244.0.0/16, \"fd00:10:244::/56\"]\nserviceCIDRs: [10.96.0.0/12, \"fd00:10:96::/112\"]\nipFamilyPolicy: PreferDualStack\n")
	self := testNode("n1", "", "192.168.77.11", nil)
	self.Spec.PodCIDR, self.Spec.PodCIDRs = "10.244.1.0/24", []string{"10.244.1.0/24", "fd00:10:244:1::/64"}
	if _, err := w.client.CoreV1().Nodes().Create(context.Background(), self, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	w.start(t)
	eventually(t, "the network is ready", func() bool { return w.ctrl.Local() != nil })
	n, err := w.sim.GetNetworkByName(context.Background(), "nodenet")
	if err != nil {
		t.Fatal(err)
	}
	var subnets []string
	for _, s := range n.Subnets() {
		subnets = append(subnets, s.IpAddressPrefix)
	}
	if strings.Join(subnets, ",") != "10.244.1.0/24" {
		t.Errorf("HNS network subnets %v, want the IPv4 pod CIDR only", subnets)
	}
	eventually(t, "a "+overlay.ReasonFamiliesDropped+" warning that says overlay is IPv4 only", w.hasEvents(overlay.ReasonFamiliesDropped, "IPv4 only"))
}
