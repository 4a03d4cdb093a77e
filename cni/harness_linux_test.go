package cni_test

// Address plan: every test node is its own network namespace holding the
// node bridge "nodenet".
//   10.244.1.0/24  pod CIDR of the default test node; 10.244.1.1 is the
//                  gateway (the bridge's address), 10.244.1.2 the reserved
//                  overlay source VIP, pods get 10.244.1.3 and up
//   10.244.9.0/29  pod CIDR of the small-pool node: .1 gateway, .2 source
//                  VIP, .3-.6 for pods (4 addresses)
//   10.244.0.0/16  cluster CIDR; 10.96.0.0/12 service CIDR

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/containernetworking/cni/libcni"
	"github.com/containernetworking/cni/pkg/types"
	current "github.com/containernetworking/cni/pkg/types/100"
	"github.com/containernetworking/plugins/pkg/ns"
	"github.com/containernetworking/plugins/pkg/testutils"
	"github.com/vishvananda/netlink"

	"github.com/nodenet/nodenet/cni"
	"github.com/nodenet/nodenet/cni/hostport"
	"github.com/nodenet/nodenet/cni/vethbridge"
	"github.com/nodenet/nodenet/config"
	"github.com/nodenet/nodenet/internal/testroot"
)

const (
	bridgeName = "nodenet"
)

func requireRoot(tb testing.TB) {
	tb.Helper()
	testroot.Require(tb, "network namespaces")
}

// testNode is one node: a netns with the node bridge, a CNI server (in
// this process or a child), the rendered conflist and a libcni client that
// execs the real nodenet-cni binary, as containerd does.
type testNode struct {
	t        testing.TB
	netns    ns.NetNS
	dir      string
	socket   string
	ipamDir  string
	cacheDir string
	nw       *cni.NodeNetwork
	server   *cni.Server
	stop     func()
	client   *libcni.CNIConfig
	list     *libcni.NetworkConfigList
}

type nodeOptions struct {
	podCIDR string // default 10.244.1.0/24
	mtu     int    // default 1450 (overlay)
}

func newTestNode(t testing.TB, opts nodeOptions) *testNode {
	t.Helper()
	requireRoot(t)
	if opts.podCIDR == "" {
		opts.podCIDR = "10.244.1.0/24"
	}
	if opts.mtu == 0 {
		opts.mtu = 1450
	}
	podCIDR := netip.MustParsePrefix(opts.podCIDR)
	gw := podCIDR.Addr().Next()
	n := &testNode{t: t}
	var err error
	// Short, 0700: the socket path must fit sun_path and its directory
	// must not be world-writable.
	if n.dir, err = os.MkdirTemp("", "nn-cni-"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(n.dir) })
	n.socket = filepath.Join(n.dir, "run", "cni.sock")
	n.ipamDir = filepath.Join(n.dir, "ipam")
	n.cacheDir = filepath.Join(n.dir, "cache")

	if n.netns, err = testutils.NewNS(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		n.netns.Close()
		_ = testutils.UnmountNS(n.netns)
	})
	err = n.netns.Do(func(ns.NetNS) error {
		br := &netlink.Bridge{LinkAttrs: netlink.LinkAttrs{Name: bridgeName, MTU: opts.mtu}}
		if err := netlink.LinkAdd(br); err != nil {
			return err
		}
		if err := netlink.AddrAdd(br, &netlink.Addr{IPNet: prefixNet(netip.PrefixFrom(gw, podCIDR.Bits()))}); err != nil {
			return err
		}
		lo, err := netlink.LinkByName("lo")
		if err != nil {
			return err
		}
		if err := netlink.LinkSetUp(lo); err != nil {
			return err
		}
		// The node network (overlay/) turns forwarding on; hostPort DNAT
		// back into the bridge needs it.
		if err := os.WriteFile("/proc/sys/net/ipv4/ip_forward", []byte("1"), 0o644); err != nil {
			return err
		}
		return netlink.LinkSetUp(br)
	})
	if err != nil {
		t.Fatalf("create the node bridge: %v", err)
	}
	n.nw = &cni.NodeNetwork{
		Mode:         config.NetworkModeOverlay,
		Name:         bridgeName,
		PodCIDRs:     []netip.Prefix{podCIDR},
		Gateways:     []netip.Addr{gw},
		SourceVIP:    gw.Next(),
		MTU:          opts.mtu,
		ClusterCIDRs: []netip.Prefix{netip.MustParsePrefix("10.244.0.0/16")},
		ServiceCIDRs: []netip.Prefix{netip.MustParsePrefix("10.96.0.0/12")},
		DNS:          cni.DNS{Nameservers: []string{"10.96.0.10"}, Search: []string{"cluster.local"}},
	}

	cfg := &config.AgentConfiguration{ClusterCIDRs: []string{"10.244.0.0/16"}, ServiceCIDRs: []string{"10.96.0.0/12"}}
	config.SetDefaults(cfg, config.DefaultingOptions{OS: config.OSLinux, Hostname: func() (string, error) { return "node-a", nil }})
	cfg.CNI.SocketPath = n.socket
	conflist, err := cni.RenderConflist(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if n.list, err = libcni.ConfListFromBytes(conflist); err != nil {
		t.Fatal(err)
	}
	n.client = newCNIClient(binaries(t), n.cacheDir)
	return n
}

func prefixNet(p netip.Prefix) *net.IPNet {
	return &net.IPNet{IP: p.Addr().AsSlice(), Mask: net.CIDRMask(p.Bits(), p.Addr().BitLen())}
}

// linuxWiring is the production Linux wiring for this node: veths into
// the bridge, with hostPorts in nftables on top.
func (n *testNode) linuxWiring() cni.Wiring {
	w, err := linuxWiring(n.netns.Path())
	if err != nil {
		n.t.Fatal(err)
	}
	return w
}

func linuxWiring(hostNetNS string) (cni.Wiring, error) {
	veth, err := vethbridge.New(vethbridge.Options{HostNetNS: hostNetNS})
	if err != nil {
		return nil, err
	}
	return hostport.New(hostport.Options{Inner: veth, HostNetNS: hostNetNS})
}

// startServer runs a CNI server in this process; ready says whether it
// is handed the node network at once.
func (n *testNode) startServer(w cni.Wiring, ready bool) {
	n.t.Helper()
	s, err := cni.NewServer(cni.ServerOptions{SocketPath: n.socket, IPAMDir: n.ipamDir, Wiring: w})
	if err != nil {
		n.t.Fatal(err)
	}
	l, err := s.Listen()
	if err != nil {
		n.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx, l) }()
	n.server = s
	n.stop = func() {
		cancel()
		if err := <-done; err != nil {
			n.t.Errorf("server: %v", err)
		}
		l.Close()
		s.Close()
	}
	n.t.Cleanup(func() {
		if n.stop != nil {
			n.stop()
			n.stop = nil
		}
	})
	if ready {
		n.setNetwork()
	}
}

func (n *testNode) setNetwork() {
	n.t.Helper()
	if err := n.server.SetNetwork(n.nw); err != nil {
		n.t.Fatal(err)
	}
}

// testPod is a pod sandbox: its own netns and the runtime config a
// runtime would pass.
type testPod struct {
	netns ns.NetNS
	rt    *libcni.RuntimeConf
}

// close removes the pod's netns now rather than at the test's end (the
// benchmarks make thousands).
func (p *testPod) close() {
	p.netns.Close()
	_ = testutils.UnmountNS(p.netns)
}

func (p *testPod) nsName() string { return filepath.Base(p.netns.Path()) }

func (n *testNode) newPod(name string) *testPod {
	n.t.Helper()
	podNS, err := testutils.NewNS()
	if err != nil {
		n.t.Fatal(err)
	}
	n.t.Cleanup(func() {
		podNS.Close()
		_ = testutils.UnmountNS(podNS)
	})
	return &testPod{netns: podNS, rt: &libcni.RuntimeConf{
		ContainerID: "ctr-" + name,
		NetNS:       podNS.Path(),
		IfName:      "eth0",
		Args:        [][2]string{{"IgnoreUnknown", "1"}, {"K8S_POD_NAMESPACE", "default"}, {"K8S_POD_NAME", name}, {"K8S_POD_INFRA_CONTAINER_ID", "ctr-" + name}},
	}}
}

func (n *testNode) add(p *testPod) (*current.Result, error) {
	res, err := n.client.AddNetworkList(context.Background(), n.list, p.rt)
	if err != nil {
		return nil, err
	}
	return current.NewResultFromResult(res)
}

func (n *testNode) mustAdd(p *testPod) netip.Addr {
	n.t.Helper()
	res, err := n.add(p)
	if err != nil {
		n.t.Fatalf("ADD %s: %v", p.rt.ContainerID, err)
	}
	if len(res.IPs) == 0 {
		n.t.Fatalf("ADD %s returned no IP", p.rt.ContainerID)
	}
	a, _ := netip.AddrFromSlice(res.IPs[0].Address.IP)
	return a.Unmap()
}

func (n *testNode) del(p *testPod) error {
	return n.client.DelNetworkList(context.Background(), n.list, p.rt)
}

func (n *testNode) check(p *testPod) error {
	return n.client.CheckNetworkList(context.Background(), n.list, p.rt)
}

// allocations lists the IPAM store's allocation files (host-local's
// layout: one file per address).
func (n *testNode) allocations() []string {
	entries, _ := os.ReadDir(filepath.Join(n.ipamDir, n.nw.Name))
	var out []string
	for _, e := range entries {
		if _, err := netip.ParseAddr(e.Name()); err == nil {
			out = append(out, e.Name())
		}
	}
	return out
}

// bridgePorts lists the interfaces attached to the node bridge.
func (n *testNode) bridgePorts() []string {
	n.t.Helper()
	var out []string
	err := n.netns.Do(func(ns.NetNS) error {
		br, err := netlink.LinkByName(bridgeName)
		if err != nil {
			return err
		}
		links, err := netlink.LinkList()
		if err != nil {
			return err
		}
		for _, l := range links {
			if l.Attrs().MasterIndex == br.Attrs().Index {
				out = append(out, l.Attrs().Name)
			}
		}
		return nil
	})
	if err != nil {
		n.t.Fatal(err)
	}
	return out
}

// ping sends real ICMP echo requests from netns nsName to dst.
func ping(nsName string, dst netip.Addr) error {
	out, err := exec.Command("ip", "netns", "exec", nsName, "ping", "-c", "1", "-W", "2", dst.String()).CombinedOutput()
	if err != nil {
		return fmt.Errorf("ping %s from %s: %v\n%s", dst, nsName, err, out)
	}
	return nil
}

// tcpConnect listens on port in server's netns and connects from client's,
// exchanging one line both ways.
func tcpConnect(client, server ns.NetNS, dst netip.Addr, port int) error {
	return tcpConnectVia(client, server, dst, port, port)
}

// tcpConnectVia is tcpConnect where the server listens on listenPort and
// the client dials dialPort (a hostPort DNATed to listenPort).
func tcpConnectVia(client, server ns.NetNS, dst netip.Addr, dialPort, listenPort int) error {
	var l net.Listener
	err := server.Do(func(ns.NetNS) error {
		var err error
		l, err = net.Listen("tcp", netip.AddrPortFrom(netip.IPv4Unspecified(), uint16(listenPort)).String())
		return err
	})
	if err != nil {
		return err
	}
	defer l.Close()
	go func() {
		c, err := l.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		buf := make([]byte, 5)
		if _, err := c.Read(buf); err == nil {
			_, _ = c.Write([]byte("pong\n"))
		}
	}()
	return client.Do(func(ns.NetNS) error {
		c, err := net.DialTimeout("tcp", netip.AddrPortFrom(dst, uint16(dialPort)).String(), 3*time.Second)
		if err != nil {
			return err
		}
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(3 * time.Second))
		if _, err := c.Write([]byte("ping\n")); err != nil {
			return err
		}
		buf := make([]byte, 5)
		if _, err := c.Read(buf); err != nil {
			return err
		}
		if string(buf) != "pong\n" {
			return fmt.Errorf("got %q, want pong", buf)
		}
		return nil
	})
}

// cniCode returns the CNI error code of err (0 when it isn't one).
func cniCode(err error) uint {
	var e *types.Error
	if errors.As(err, &e) {
		return e.Code
	}
	return 0
}

// agentSpec configures the test agent process.
type agentSpec struct {
	Socket    string
	IPAMDir   string
	HostNetNS string
	Network   cni.NodeNetwork
}

// startAgentProcess runs the CNI server in a child process (this test
// binary, see TestMain) and waits until it listens; kill stops it hard.
func (n *testNode) startAgentProcess() (kill func()) {
	n.t.Helper()
	spec, err := json.Marshal(agentSpec{Socket: n.socket, IPAMDir: n.ipamDir, HostNetNS: n.netns.Path(), Network: *n.nw})
	if err != nil {
		n.t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), agentEnv+"="+string(spec))
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		n.t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		n.t.Fatal(err)
	}
	buf := make([]byte, 6)
	if _, err := stdout.Read(buf); err != nil || !strings.HasPrefix(string(buf), "ready") {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		n.t.Fatalf("test agent did not start: %q %v", buf, err)
	}
	killed := false
	kill = func() {
		if killed {
			return
		}
		killed = true
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	}
	n.t.Cleanup(kill)
	return kill
}

// runTestAgent is the child side of startAgentProcess.
func runTestAgent(specJSON string) int {
	var spec agentSpec
	if err := json.Unmarshal([]byte(specJSON), &spec); err != nil {
		fmt.Fprintln(os.Stderr, "test agent:", err)
		return 2
	}
	w, err := linuxWiring(spec.HostNetNS)
	if err == nil {
		var s *cni.Server
		if s, err = cni.NewServer(cni.ServerOptions{SocketPath: spec.Socket, IPAMDir: spec.IPAMDir, Wiring: w}); err == nil {
			if err = s.SetNetwork(&spec.Network); err == nil {
				var l net.Listener
				if l, err = s.Listen(); err == nil {
					fmt.Println("ready")
					err = s.Serve(context.Background(), l)
				}
			}
		}
	}
	fmt.Fprintln(os.Stderr, "test agent:", err)
	return 1
}
