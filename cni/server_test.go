package cni_test

// Server behavior on the HNS simulator (no root needed): rollback of a
// failed ADD, transport errors, and a fuzzed request body.
//
// Address plan (simulator only):
//   192.168.1.0/24  node subnet, this node 192.168.1.11 (adapter "Ethernet")
//   10.244.1.0/24   this node's pods: gateway .1, source VIP (overlay) or
//                   host endpoint (l2bridge) .2, pods .3+
//   10.244.0.0/16   cluster CIDR; 10.96.0.0/12 service CIDR

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"path/filepath"
	"testing"

	"github.com/containernetworking/cni/pkg/types"

	"github.com/nodenet/nodenet/cni"
	"github.com/nodenet/nodenet/cni/api"
	"github.com/nodenet/nodenet/cni/hnsendpoint"
	"github.com/nodenet/nodenet/config"
	"github.com/nodenet/nodenet/hns"
	"github.com/nodenet/nodenet/overlay"
	"github.com/nodenet/nodenet/overlay/hnsnet"
	"github.com/nodenet/nodenet/overlay/hostroute"
)

// simNode is a simulated Windows node with its network, an HCN namespace
// for one pod and a CNI server (tests call Handle or ServeHTTP, or listen).
type simNode struct {
	sim       *hns.Simulator
	dataplane *hnsnet.Network
	server    *cni.Server
	network   *hns.Network
	dir       string
	ipamDir   string
	socket    string
	podNS     string
	// nw is the network the server was handed.
	nw *cni.NodeNetwork
}

// simNodeOptions: l2bridge without DSR unless set.
type simNodeOptions struct {
	overlay bool
	dsr     bool
}

func newSimNode(t testing.TB, opts simNodeOptions) *simNode {
	t.Helper()
	ctx := context.Background()
	sim := hns.NewSimulator(hns.SimulatorOptions{
		HostAdapters: []hns.HostAdapter{{Name: "Ethernet", IPs: []string{"192.168.1.11"}, MAC: "00-15-5D-01-01-0B"}},
	})
	// The network is the one the agent's node network part builds.
	dp, err := hnsnet.New(hnsnet.Options{HNS: sim, HostRoutes: hostroute.NewFake(),
		Adapters: func(context.Context) ([]hnsnet.Adapter, error) {
			mac, _ := net.ParseMAC("00:15:5d:01:01:0b")
			return []hnsnet.Adapter{{Name: "Ethernet", Index: 4, MTU: 1500, MAC: mac,
				IPs: []netip.Prefix{netip.MustParsePrefix("192.168.1.11/24")}}}, nil
		}})
	if err != nil {
		t.Fatal(err)
	}
	spec := overlay.LocalSpec{
		Mode: config.NetworkModeL2Bridge, Name: "nodenet",
		PodCIDRs: []netip.Prefix{netip.MustParsePrefix("10.244.1.0/24")},
		Gateways: []netip.Addr{netip.MustParseAddr("10.244.1.1")},
		NodeIP:   netip.MustParseAddr("192.168.1.11"),
	}
	if opts.overlay {
		spec.Mode, spec.VNI, spec.Port, spec.SourceVIP = config.NetworkModeOverlay, 4096, 4789, netip.MustParseAddr("10.244.1.2")
	}
	local, err := dp.EnsureLocal(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	network, err := sim.GetNetworkByID(ctx, local.ID)
	if err != nil {
		t.Fatal(err)
	}
	nw := &cni.NodeNetwork{
		Mode: local.Mode, Name: local.Name, ID: local.ID,
		PodCIDRs: local.PodCIDRs, Gateways: local.Gateways,
		SourceVIP: local.SourceVIP, Reserved: local.Reserved, MTU: local.MTU,
		ClusterCIDRs: []netip.Prefix{netip.MustParsePrefix("10.244.0.0/16")},
		ServiceCIDRs: []netip.Prefix{netip.MustParsePrefix("10.96.0.0/12")},
		NodeIPs:      []netip.Addr{local.NodeIP},
		NodeSubnets:  local.NodeSubnets,
		DNS:          cni.DNS{Nameservers: []string{"10.96.0.10"}},
		EnableDSR:    opts.dsr,
	}
	w, err := hnsendpoint.New(hnsendpoint.Options{HNS: sim})
	if err != nil {
		t.Fatal(err)
	}
	dir, err := os.MkdirTemp("", "nn-srv-") // short: the socket path must fit sun_path
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	n := &simNode{sim: sim, dataplane: dp, network: network, dir: dir, ipamDir: filepath.Join(dir, "ipam"), socket: filepath.Join(dir, "run", "cni.sock"), nw: nw}
	n.server, err = cni.NewServer(cni.ServerOptions{SocketPath: n.socket, IPAMDir: n.ipamDir, Wiring: w})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.server.Close() })
	if err := n.server.SetNetwork(nw); err != nil {
		t.Fatal(err)
	}
	ns, err := sim.CreateNamespace(ctx, &hns.Namespace{Type: hns.NamespaceTypeHost})
	if err != nil {
		t.Fatal(err)
	}
	n.podNS = ns.ID
	return n
}

// listen serves the node's socket until the test ends.
func (n *simNode) listen(t testing.TB) {
	t.Helper()
	l, err := n.server.Listen()
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- n.server.Serve(ctx, l) }()
	t.Cleanup(func() {
		stop()
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
	})
}

func (n *simNode) allocations(t testing.TB) int {
	entries, _ := os.ReadDir(filepath.Join(n.ipamDir, "nodenet"))
	count := 0
	for _, e := range entries {
		if _, err := netip.ParseAddr(e.Name()); err == nil {
			count++
		}
	}
	return count
}

func (n *simNode) podEndpoints(t testing.TB) int {
	eps, err := n.sim.ListEndpoints(context.Background(), "")
	if err != nil {
		t.Fatal(err)
	}
	count := 0
	for _, ep := range eps {
		if _, ours := hnsendpoint.ParseEndpointName(ep.Name); ours {
			count++
		}
	}
	return count
}

func (n *simNode) addRequest(id string) *api.Request {
	return &api.Request{Command: api.CommandAdd, ContainerID: id, Netns: n.podNS, IfName: "eth0",
		Config: []byte(`{"cniVersion":"1.1.0","name":"nodenet","type":"nodenet-cni"}`)}
}

func TestServerRollsBackAFailedAdd(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name     string
		fault    hns.Fault
		wantCode uint
	}{
		{"attaching to the namespace fails", hns.Fault{Op: hns.OpAddNamespaceEndpoint, Every: 1, Err: errors.New("hcn: attach failed")}, types.ErrInternal},
		{"creating the endpoint fails", hns.Fault{Op: hns.OpCreateEndpoint, Every: 1, Err: errors.New("hcn: create failed")}, types.ErrInternal},
		{"HNS creates the endpoint but reports a failure", hns.Fault{Op: hns.OpCreateEndpoint, Every: 1, AfterApply: true, Err: errors.New("hcn: timed out")}, types.ErrInternal},
	}
	for _, tt := range tests {
		t.Run(tt.name+": no address or endpoint is left", func(t *testing.T) {
			n := newSimNode(t, simNodeOptions{})
			remove := n.sim.InjectFault(tt.fault)
			resp := n.server.Handle(ctx, n.addRequest("c1"))
			remove()
			if resp.Error == nil || resp.Error.Code != tt.wantCode {
				t.Fatalf("ADD answered %+v, want code %d", resp.Error, tt.wantCode)
			}
			if got := n.allocations(t); got != 0 {
				t.Errorf("%d allocations left", got)
			}
			if got := n.podEndpoints(t); got != 0 {
				t.Errorf("%d pod endpoints left", got)
			}
			// The runtime's retry then succeeds.
			if resp := n.server.Handle(ctx, n.addRequest("c1")); resp.Error != nil {
				t.Errorf("retried ADD: %v", resp.Error)
			}
		})
	}
	t.Run("a transient HNS error says try again later", func(t *testing.T) {
		n := newSimNode(t, simNodeOptions{})
		remove := n.sim.InjectFault(hns.Fault{Op: hns.OpCreateEndpoint, Every: 1, Err: &hns.Error{Op: hns.OpCreateEndpoint, Kind: hns.KindTransient, Msg: "busy"}})
		defer remove()
		if resp := n.server.Handle(ctx, n.addRequest("c1")); resp.Error == nil || resp.Error.Code != types.ErrTryAgainLater {
			t.Errorf("ADD answered %+v, want code %d", resp.Error, types.ErrTryAgainLater)
		}
	})
}

func TestServeHTTP(t *testing.T) {
	n := newSimNode(t, simNodeOptions{})
	post := func(method, path string, body []byte) (int, *api.Response) {
		rec := httptest.NewRecorder()
		n.server.ServeHTTP(rec, httptest.NewRequest(method, path, bytes.NewReader(body)))
		var resp api.Response
		if err := json.Unmarshal(rec.Body.Bytes(), &resp); err != nil {
			t.Fatalf("%s %s answered a body that is not a Response: %q", method, path, rec.Body.String())
		}
		return rec.Code, &resp
	}
	tests := []struct {
		name       string
		method     string
		path       string
		body       []byte
		wantStatus int
		wantCode   uint
	}{
		{"a wrong path is 404 with a CNI error", http.MethodPost, "/v2/cni", []byte(`{}`), http.StatusNotFound, types.ErrInvalidNetworkConfig},
		{"GET is 405 with a CNI error", http.MethodGet, api.RequestPath, nil, http.StatusMethodNotAllowed, types.ErrInvalidNetworkConfig},
		{"a body that is not JSON is 400", http.MethodPost, api.RequestPath, []byte(`{"command":`), http.StatusBadRequest, types.ErrDecodingFailure},
		{"a body over the limit is 413", http.MethodPost, api.RequestPath, bytes.Repeat([]byte(" "), api.DefaultMaxRequestBytes+1), http.StatusRequestEntityTooLarge, types.ErrDecodingFailure},
		{"a CNI error travels with status 200", http.MethodPost, api.RequestPath, []byte(`{"command":"ADD"}`), http.StatusOK, types.ErrInvalidEnvironmentVariables},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			status, resp := post(tt.method, tt.path, tt.body)
			if status != tt.wantStatus || resp.Error == nil || resp.Error.Code != tt.wantCode {
				t.Errorf("got %d %+v, want %d with code %d", status, resp.Error, tt.wantStatus, tt.wantCode)
			}
		})
	}
}

// FuzzServeHTTP: whatever arrives on the socket, the server answers with
// a Response (never a panic), and a failed request leaves no allocation.
func FuzzServeHTTP(f *testing.F) {
	for _, seed := range []string{
		`{"command":"ADD","containerID":"c1","netns":"NS","ifName":"eth0","config":{"cniVersion":"1.1.0","name":"nodenet"}}`,
		`{"command":"DEL","containerID":"c1","ifName":"eth0","config":{"cniVersion":"0.4.0","name":"nodenet"}}`,
		`{"command":"CHECK","containerID":"c1","netns":"NS","ifName":"eth0","config":{"cniVersion":"1.0.0","name":"nodenet","prevResult":{"cniVersion":"1.0.0","ips":[{"address":"10.244.1.3/24"}]}}}`,
		`{"command":"GC","config":{"cniVersion":"1.1.0","name":"nodenet","cni.dev/valid-attachments":[{"containerID":"c1","ifname":"eth0"}]}}`,
		`{"command":"STATUS","config":{"cniVersion":"1.1.0","name":"nodenet"}}`,
		`{"command":"ADD","containerID":"c2","netns":"NS","ifName":"eth0","config":{"cniVersion":"1.1.0","name":"nodenet","runtimeConfig":{"portMappings":[{"hostPort":80,"containerPort":80,"protocol":"sctp"}]}}}`,
		`{}`, `[]`, `{"command":"ADD","config":"x"}`,
	} {
		f.Add([]byte(seed))
	}
	n := newSimNode(f, simNodeOptions{})
	f.Fuzz(func(t *testing.T, body []byte) {
		body = bytes.ReplaceAll(body, []byte(`"NS"`), []byte(`"`+n.podNS+`"`))
		rec := httptest.NewRecorder()
		n.server.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, api.RequestPath, bytes.NewReader(body)))
		var resp api.Response
		if err := json.Unmarshal(rec.Body.Bytes(), &resp); err != nil {
			t.Fatalf("answer is not a Response: %q", rec.Body.String())
		}
		if resp.Error != nil && resp.Error.Msg == "" {
			t.Fatalf("error without a message: %+v", resp.Error)
		}
		var req api.Request
		if json.Unmarshal(body, &req) == nil && req.Command == api.CommandAdd && resp.Error != nil && req.ContainerID != "" {
			// A failed ADD must not hold an address for its container.
			entries, _ := os.ReadDir(filepath.Join(n.ipamDir, "nodenet"))
			for _, e := range entries {
				data, _ := os.ReadFile(filepath.Join(n.ipamDir, "nodenet", e.Name()))
				if _, err := netip.ParseAddr(e.Name()); err == nil && bytes.HasPrefix(data, []byte(req.ContainerID+"\r\n"+req.IfName)) {
					t.Fatalf("failed ADD (%v) left allocation %s for %s", resp.Error, e.Name(), req.ContainerID)
				}
			}
		}
	})
}

func TestServerNeverHandsOutReservedAddresses(t *testing.T) {
	ctx := context.Background()
	n := newSimNode(t, simNodeOptions{})
	// An l2bridge node whose host endpoint holds .2 (and, for the test,
	// .3): the first pod must get .4.
	nw := &cni.NodeNetwork{
		Mode: config.NetworkModeL2Bridge, Name: "nodenet", ID: n.network.ID,
		PodCIDRs: []netip.Prefix{netip.MustParsePrefix("10.244.1.0/24")},
		Gateways: []netip.Addr{netip.MustParseAddr("10.244.1.1")},
		Reserved: []netip.Addr{netip.MustParseAddr("10.244.1.2"), netip.MustParseAddr("10.244.1.3")},
	}
	if err := n.server.SetNetwork(nw); err != nil {
		t.Fatal(err)
	}
	resp := n.server.Handle(ctx, n.addRequest("c1"))
	if resp.Error != nil {
		t.Fatalf("ADD: %v", resp.Error)
	}
	var result struct {
		IPs []struct{ Address string } `json:"ips"`
	}
	if err := json.Unmarshal(resp.Result, &result); err != nil {
		t.Fatal(err)
	}
	if len(result.IPs) != 1 || result.IPs[0].Address != "10.244.1.4/24" {
		t.Errorf("the first pod got %+v, want 10.244.1.4/24 (past the gateway and both reserved addresses)", result.IPs)
	}
}
