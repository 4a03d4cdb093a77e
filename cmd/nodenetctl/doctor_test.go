package main

import (
	"encoding/json"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/nodenet/nodenet/agent/status"
	"github.com/nodenet/nodenet/cni"
	"github.com/nodenet/nodenet/config"
	"github.com/nodenet/nodenet/overlay"
)

// doctorNode is one node's files for doctor: a CNI socket and the
// conflist the agent renders, in a fresh directory.
type doctorNode struct {
	confDir  string
	conflist string
	cniSock  string
}

func newDoctorNode(t *testing.T) doctorNode {
	t.Helper()
	dir := shortTempDir(t)
	n := doctorNode{
		confDir: filepath.Join(dir, "net.d"),
		cniSock: filepath.Join(dir, "cni.sock"),
	}
	n.conflist = filepath.Join(n.confDir, config.DefaultConflistName)
	l, err := net.Listen("unix", n.cniSock)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	n.writeConflist(t, "nodenet", n.cniSock)
	return n
}

// writeConflist writes what the agent renders for a network and socket.
func (n doctorNode) writeConflist(t *testing.T, network, sock string) {
	t.Helper()
	data, err := cni.RenderConflist(cni.ConflistOptions{Network: network, SocketPath: sock})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(n.confDir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(n.conflist, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

// status is readyStatus with this node's paths.
func (n doctorNode) status() *status.Status {
	st := readyStatus()
	st.CNI.SocketPath, st.CNI.ConflistPath = n.cniSock, n.conflist
	return st
}

// vxlanNode is a Node as nodenet (or flannel's vxlan backend) publishes it.
func vxlanNode(name, podCIDR, ip string, vni string) *v1.Node {
	return &v1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: map[string]string{
			overlay.AnnotationKubeSubnetManager: "true",
			overlay.AnnotationBackendType:       overlay.BackendVXLAN,
			overlay.AnnotationBackendData:       `{"VNI":` + vni + `,"VtepMAC":"aa:bb:cc:dd:ee:0` + name[len(name)-1:] + `"}`,
			overlay.AnnotationPublicIP:          ip,
		}},
		Spec: v1.NodeSpec{PodCIDR: podCIDR, PodCIDRs: []string{podCIDR}},
		Status: v1.NodeStatus{
			Addresses: []v1.NodeAddress{{Type: v1.NodeInternalIP, Address: ip}},
			Conditions: []v1.NodeCondition{{
				Type: v1.NodeNetworkUnavailable, Status: v1.ConditionFalse, Reason: overlay.ReasonReady, Message: "nodenet configured the node network nodenet",
			}},
		},
	}
}

// cluster is node-1 (this node) and its two peers, all vxlan VNI 4096.
func cluster() []*v1.Node {
	return []*v1.Node{
		vxlanNode("node-1", "10.244.1.0/24", "192.168.1.10", "4096"),
		vxlanNode("node-2", "10.244.2.0/24", "192.168.1.11", "4096"),
		vxlanNode("node-3", "10.244.3.0/24", "192.168.1.12", "4096"),
	}
}

func TestDoctor(t *testing.T) {
	tests := []struct {
		name string
		// setup edits the node's files and the agent's status.
		setup func(t *testing.T, n doctorNode, st *status.Status)
		// nodes are the API server's Nodes; nil runs without --kubeconfig.
		nodes    func() []*v1.Node
		noAgent  bool
		wantCode int
		// want maps check names to results; unnamed checks must be ok
		// (or skip, for node without nodes).
		want map[string]string
		// wantLines must each be contained in a line of the table.
		wantLines []string
	}{
		{
			name:      "a healthy node passes every check and skips the API server's",
			wantCode:  exitOK,
			want:      map[string]string{"node": resultSkip},
			wantLines: []string{"ok    network: overlay network \"nodenet\" is ready (pod CIDRs 10.244.1.0/24, node IP 192.168.1.10, 2 remote nodes)", "skip  node: pass --kubeconfig", "all 8 checks passed"},
		},
		{
			name:      "no agent is the one failure, with what to do",
			noAgent:   true,
			wantCode:  exitFailed,
			want:      map[string]string{"agent": resultFail},
			wantLines: []string{"FAIL: agent: is the agent running on this node? no socket at ", "→ fix: start the nodenet agent on this node", "1 of 1 check failed"},
		},
		{
			name: "a network without a pod CIDR says to allocate one",
			setup: func(t *testing.T, n doctorNode, st *status.Status) {
				st.Network.Ready, st.Network.Reason, st.Network.Message = false, overlay.ReasonNoPodCIDR, "Node node-1 has no pod CIDR"
			},
			wantCode:  exitFailed,
			want:      map[string]string{"network": resultFail, "node": resultSkip},
			wantLines: []string{`FAIL: network: overlay network "nodenet" is not ready: NoPodCIDR: Node node-1 has no pod CIDR → fix: give the Node a pod CIDR`},
		},
		{
			name:      "a missing conflist fails",
			setup:     func(t *testing.T, n doctorNode, st *status.Status) { os.Remove(n.conflist) },
			wantCode:  exitFailed,
			want:      map[string]string{"conflist": resultFail, "node": resultSkip},
			wantLines: []string{"FAIL: conflist: no CNI conflist at ", "→ fix: the agent writes it once the network is ready"},
		},
		{
			name: "a conflist that does not parse fails",
			setup: func(t *testing.T, n doctorNode, st *status.Status) {
				os.WriteFile(n.conflist, []byte(`{"cniVersion":"1.0.0"`), 0o644)
			},
			wantCode:  exitFailed,
			want:      map[string]string{"conflist": resultFail, "node": resultSkip},
			wantLines: []string{"does not parse: error parsing configuration list"},
		},
		{
			name:      "a conflist for another network fails",
			setup:     func(t *testing.T, n doctorNode, st *status.Status) { n.writeConflist(t, "cbr0", n.cniSock) },
			wantCode:  exitFailed,
			want:      map[string]string{"conflist": resultFail, "node": resultSkip},
			wantLines: []string{`names network "cbr0", but the agent's network is "nodenet" → fix: delete it: the agent rewrites it`},
		},
		{
			name:      "a conflist pointing at another socket fails",
			setup:     func(t *testing.T, n doctorNode, st *status.Status) { n.writeConflist(t, "nodenet", "/run/other.sock") },
			wantCode:  exitFailed,
			want:      map[string]string{"conflist": resultFail, "node": resultSkip},
			wantLines: []string{"points nodenet-cni at /run/other.sock, but the agent listens on "},
		},
		{
			name: "a conflist not of nodenet-cni fails",
			setup: func(t *testing.T, n doctorNode, st *status.Status) {
				os.WriteFile(n.conflist, []byte(`{"cniVersion":"1.0.0","name":"nodenet","plugins":[{"type":"flannel"}]}`), 0o644)
			},
			wantCode:  exitFailed,
			want:      map[string]string{"conflist": resultFail, "node": resultSkip},
			wantLines: []string{`calls plugin "flannel", not "nodenet-cni"`},
		},
		{
			name: "a leftover conflist that the runtime loads first fails",
			setup: func(t *testing.T, n doctorNode, st *status.Status) {
				os.WriteFile(filepath.Join(n.confDir, "10-flannel.conflist"), []byte(`{"name":"cbr0","plugins":[{"type":"flannel"}]}`), 0o644)
			},
			wantCode:  exitFailed,
			want:      map[string]string{"conflist order": resultFail, "node": resultSkip},
			wantLines: []string{"10-flannel.conflist, which sorts before 10-nodenet.conflist → fix: delete "},
		},
		{
			name:      "a missing CNI socket fails",
			setup:     func(t *testing.T, n doctorNode, st *status.Status) { st.CNI.SocketPath += ".gone" },
			wantCode:  exitFailed,
			want:      map[string]string{"cni": resultFail, "conflist": resultFail, "node": resultSkip},
			wantLines: []string{"FAIL: cni: no CNI socket at "},
		},
		{
			name: "a proxy that has not started fails",
			setup: func(t *testing.T, n doctorNode, st *status.Status) {
				st.Proxy = status.ProxyStatus{Backend: "nftables", Source: "kubernetes"}
			},
			wantCode:  exitFailed,
			want:      map[string]string{"proxy": resultFail, "node": resultSkip},
			wantLines: []string{"FAIL: proxy: nftables, source kubernetes: not started"},
		},
		{
			name: "a proxy that synced long ago fails",
			setup: func(t *testing.T, n doctorNode, st *status.Status) {
				st.Proxy.LastSync = testNow.Add(-10 * time.Minute)
			},
			wantCode:  exitFailed,
			want:      map[string]string{"proxy": resultFail, "node": resultSkip},
			wantLines: []string{"FAIL: proxy: last synced more than 2m0s ago: nftables, source kubernetes, 42 syncs, last sync 10m ago"},
		},
		{
			name:      "an unhealthy proxy fails",
			setup:     func(t *testing.T, n doctorNode, st *status.Status) { st.Proxy.Healthy = false },
			wantCode:  exitFailed,
			want:      map[string]string{"proxy": resultFail, "node": resultSkip},
			wantLines: []string{"FAIL: proxy: unhealthy (its /healthz fails)"},
		},
		{
			name:      "DSR on the Linux dataplane warns but passes",
			setup:     func(t *testing.T, n doctorNode, st *status.Status) { st.Proxy.DSR = true },
			wantCode:  exitOK,
			want:      map[string]string{"settings": resultWarn, "node": resultSkip},
			wantLines: []string{"warn: settings: DSR is on, but the Linux dataplane has no DSR", "all 8 checks passed, 1 warning"},
		},
		{
			name: "DSR on a Windows overlay node is fine",
			setup: func(t *testing.T, n doctorNode, st *status.Status) {
				st.Dataplane, st.Proxy.Backend, st.Proxy.DSR, st.Network.SourceVIP = "hns", "hns", true, "10.244.1.2"
			},
			wantCode:  exitOK,
			want:      map[string]string{"node": resultSkip},
			wantLines: []string{"ok    settings: overlay network on the hns dataplane with DSR on"},
		},
		{
			name: "a Windows overlay network without a source VIP fails",
			setup: func(t *testing.T, n doctorNode, st *status.Status) {
				st.Dataplane, st.Proxy.Backend = "sim", "hns"
			},
			wantCode: exitFailed,
			want:     map[string]string{"settings": resultFail, "node": resultSkip},
		},
		{
			name:     "the API server's view agrees",
			nodes:    cluster,
			wantCode: exitOK,
			wantLines: []string{
				"ok    node annotations: vxlan VNI 4096 VtepMAC aa:bb:cc:dd:ee:01, public-ip 192.168.1.10, pod CIDRs 10.244.1.0/24",
				"ok    node condition: NetworkUnavailable=False (NodenetReady)",
				"ok    peers: 2 peers routable (vxlan, VNI 4096), and the agent routes to each",
				"all 10 checks passed",
			},
		},
		{
			name: "this Node publishing another backend fails",
			nodes: func() []*v1.Node {
				c := cluster()
				c[0].Annotations[overlay.AnnotationBackendType] = overlay.BackendHostGW
				return c
			},
			wantCode:  exitFailed,
			want:      map[string]string{"node annotations": resultFail},
			wantLines: []string{`FAIL: node annotations: Node node-1 has flannel.alpha.coreos.com/backend-type="host-gw", but its network is overlay ("vxlan") → fix: another program writes flannel's annotations`},
		},
		{
			name: "this Node publishing another VNI fails",
			nodes: func() []*v1.Node {
				c := cluster()
				c[0].Annotations[overlay.AnnotationBackendData] = `{"VNI":1,"VtepMAC":"aa:bb:cc:dd:ee:01"}`
				return c
			},
			wantCode:  exitFailed,
			want:      map[string]string{"node annotations": resultFail},
			wantLines: []string{"FAIL: node annotations: Node node-1 publishes VNI 1 in flannel.alpha.coreos.com/backend-data, but its network uses VNI 4096"},
		},
		{
			name: "this Node publishing another IP fails",
			nodes: func() []*v1.Node {
				c := cluster()
				c[0].Annotations[overlay.AnnotationPublicIP] = "192.168.9.9"
				return c
			},
			wantCode:  exitFailed,
			want:      map[string]string{"node annotations": resultFail},
			wantLines: []string{"FAIL: node annotations: peers send to 192.168.9.9 (flannel.alpha.coreos.com/public-ip), but the agent's node IP is 192.168.1.10"},
		},
		{
			name: "a Node without annotations yet fails",
			nodes: func() []*v1.Node {
				c := cluster()
				c[0].Annotations = nil
				return c
			},
			wantCode:  exitFailed,
			want:      map[string]string{"node annotations": resultFail},
			wantLines: []string{"FAIL: node annotations: Node node-1 has no flannel.alpha.coreos.com/backend-type annotation"},
		},
		{
			name: "NetworkUnavailable=True fails with its reason",
			nodes: func() []*v1.Node {
				c := cluster()
				c[0].Status.Conditions[0].Status, c[0].Status.Conditions[0].Reason, c[0].Status.Conditions[0].Message = v1.ConditionTrue, "NoPodCIDR", "no pod CIDR"
				return c
			},
			wantCode:  exitFailed,
			want:      map[string]string{"node condition": resultFail},
			wantLines: []string{"FAIL: node condition: NetworkUnavailable=True: NoPodCIDR: no pod CIDR"},
		},
		{
			name: "no NetworkUnavailable condition fails",
			nodes: func() []*v1.Node {
				c := cluster()
				c[0].Status.Conditions = nil
				return c
			},
			wantCode: exitFailed,
			want:     map[string]string{"node condition": resultFail},
		},
		{
			name: "NetworkUnavailable=False set by flannel warns",
			nodes: func() []*v1.Node {
				c := cluster()
				c[0].Status.Conditions[0].Reason = "FlannelIsUp"
				return c
			},
			wantCode:  exitOK,
			want:      map[string]string{"node condition": resultWarn},
			wantLines: []string{"warn: node condition: NetworkUnavailable=False was set by someone else (reason FlannelIsUp"},
		},
		{
			name: "a peer with another VNI fails",
			nodes: func() []*v1.Node {
				c := cluster()
				c[2] = vxlanNode("node-3", "10.244.3.0/24", "192.168.1.12", "1")
				return c
			},
			wantCode:  exitFailed,
			want:      map[string]string{"peers": resultFail},
			wantLines: []string{"FAIL: peers: 1 peer unreachable from here: node node-3: uses VXLAN VNI 1 but this node uses 4096"},
		},
		{
			name: "a peer with another backend fails",
			nodes: func() []*v1.Node {
				c := cluster()
				c[1].Annotations[overlay.AnnotationBackendType] = overlay.BackendHostGW
				return c
			},
			wantCode:  exitFailed,
			want:      map[string]string{"peers": resultFail},
			wantLines: []string{`node node-2: runs backend "host-gw" but this node runs "vxlan"`},
		},
		{
			name: "a peer still joining warns",
			nodes: func() []*v1.Node {
				c := cluster()
				c = append(c, &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-4"}})
				return c
			},
			wantCode:  exitOK,
			want:      map[string]string{"peers": resultWarn},
			wantLines: []string{"warn: peers: 2 peers routable (vxlan, VNI 4096); still joining: node node-4: has no pod CIDR"},
		},
		{
			name: "routable peers the agent does not route to warn",
			setup: func(t *testing.T, n doctorNode, st *status.Status) {
				st.Network.RemoteNodes = 1
			},
			nodes:     cluster,
			wantCode:  exitOK,
			want:      map[string]string{"peers": resultWarn},
			wantLines: []string{"warn: peers: 2 peers routable (vxlan, VNI 4096), but the agent routes to 1 remote node"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n := newDoctorNode(t)
			st := n.status()
			if tt.setup != nil {
				tt.setup(t, n, st)
			}
			var sock string
			if tt.noAgent {
				sock = filepath.Join(shortTempDir(t), status.SocketName)
			} else {
				sock = fakeAgent{status: st}.start(t)
			}
			args := []string{"doctor", "--socket", sock}
			kube := fake.NewClientset()
			if tt.nodes != nil {
				var objs []runtime.Object
				for _, node := range tt.nodes() {
					objs = append(objs, node)
				}
				kube = fake.NewClientset(objs...)
				args = append(args, "--kubeconfig", "fake")
			}

			// The JSON answer says which checks failed.
			r := runCtl(kube, append(args, "-o", "json")...)
			if r.code != tt.wantCode {
				t.Errorf("-o json: exit code %d, want %d; stderr:\n%s", r.code, tt.wantCode, r.stderr)
			}
			var d diagnosis
			if err := json.Unmarshal([]byte(r.stdout), &d); err != nil {
				t.Fatalf("%v in:\n%s", err, r.stdout)
			}
			got := map[string]string{}
			failed := 0
			for _, c := range d.Checks {
				if c.Result != resultOK {
					got[c.Name] = c.Result
				}
				if c.Result == resultFail {
					failed++
				}
			}
			want := tt.want
			if want == nil {
				want = map[string]string{}
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("results that are not ok (-want +got):\n%s\n%s", diff, r.stdout)
			}
			if d.Failed != failed {
				t.Errorf("failed = %d, want %d", d.Failed, failed)
			}

			// The table says the same, with the fixes.
			r = runCtl(kube, args...)
			if r.code != tt.wantCode {
				t.Errorf("table: exit code %d, want %d; stderr:\n%s", r.code, tt.wantCode, r.stderr)
			}
			for _, c := range d.Checks {
				if c.Result == resultFail && c.Fix == "" {
					t.Errorf("check %s fails without a fix", c.Name)
				}
			}
			for _, w := range tt.wantLines {
				if !slices.ContainsFunc(strings.Split(r.stdout, "\n"), func(l string) bool { return strings.Contains(l, w) }) {
					t.Errorf("no line contains %q:\n%s", w, r.stdout)
				}
			}
		})
	}
}

func TestDoctorReportsAKubeconfigThatDoesNotLoad(t *testing.T) {
	n := newDoctorNode(t)
	sock := fakeAgent{status: n.status()}.start(t)
	var stdout, stderr strings.Builder
	c := newCtl(&stdout, &stderr)
	c.now = func() time.Time { return testNow }
	code := c.run([]string{"doctor", "--socket", sock, "--kubeconfig", filepath.Join(n.confDir, "missing.kubeconfig")})
	if code != exitFailed {
		t.Errorf("exit code %d, want %d", code, exitFailed)
	}
	if want := "nodenetctl doctor: load kubeconfig: "; !strings.HasPrefix(stderr.String(), want) {
		t.Errorf("stderr does not start with %q:\n%s", want, stderr.String())
	}
}
