package e2e

// Address plan: node-a is the netnode slot's first node (eth0
// 192.168.(77+k).11); its pod CIDR 10.244.1.0/24 (bridge nodenet holding
// the gateway .1, pods from .3). node-b exists only in the manifests:
// 192.168.(77+k).12 with pod CIDR 10.244.2.0/24 (VTEP MAC
// 5a:7f:1e:70:e8:54 in overlay mode), so node-a programs a peer: a route,
// a neighbour and an FDB entry on the vxlan device, or a host-gw route
// (protocol 78) over eth0. Service web 10.96.0.10:80 → 10.244.2.10:8080
// fills the proxy's table. Before nodenet, the node already has what
// others made: a static route 10.99.0.0/24 via the host (.1), an
// nftables table inet other, a loopback conflist and plugin.
//
// The agent runs offline (a files source, no API server) with
// --dataplane=linux in the node's namespace; every path it uses is under
// the test's temporary directory.

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	gnft "github.com/google/nftables"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/nodenet/nodenet/agent/status"
	"github.com/nodenet/nodenet/config"
	"github.com/nodenet/nodenet/internal/netaddr"
	"github.com/nodenet/nodenet/internal/testroot"
	harness "github.com/nodenet/nodenet/test/cluster"
	"github.com/nodenet/nodenet/test/netnode"
)

const uninstallNodes = `apiVersion: v1
kind: Node
metadata: {name: node-a}
spec: {podCIDRs: [10.244.1.0/24]}
status: {addresses: [{type: InternalIP, address: %s}]}
---
apiVersion: v1
kind: Node
metadata:
  name: node-b
  annotations:
    flannel.alpha.coreos.com/kube-subnet-manager: "true"
    flannel.alpha.coreos.com/backend-type: %s
    flannel.alpha.coreos.com/backend-data: '%s'
spec: {podCIDRs: [10.244.2.0/24]}
status: {addresses: [{type: InternalIP, address: %s}]}
---
apiVersion: v1
kind: Service
metadata: {name: web, namespace: default}
spec:
  clusterIP: 10.96.0.10
  ports: [{name: http, port: 80, targetPort: 8080, protocol: TCP}]
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata:
  name: web-1
  namespace: default
  labels: {kubernetes.io/service-name: web}
addressType: IPv4
ports: [{name: http, port: 8080, protocol: TCP}]
endpoints:
- addresses: [10.244.2.10]
  nodeName: node-b
  conditions: {ready: true}
`

// Sysctls the test records. The node's own are compared with the state
// before nodenet; the conntrack ones, which the proxy sets as kube-proxy
// does and cleanup leaves (it can't know what they were), only have to
// be the same before and after cleanup.
var (
	nodeSysctls = []string{
		"net/ipv4/ip_forward",
		"net/ipv6/conf/all/forwarding",
		"net/ipv4/conf/all/route_localnet",
		"net/bridge/bridge-nf-call-iptables",
	}
	conntrackSysctls = []string{
		"net/netfilter/nf_conntrack_tcp_timeout_established",
		"net/netfilter/nf_conntrack_tcp_timeout_close_wait",
		"net/netfilter/nf_conntrack_udp_timeout",
		"net/netfilter/nf_conntrack_udp_timeout_stream",
	}
)

// TestUninstall installs nodenet on a node (the plugin, a real agent, a
// pod through the real CNI plugin), uninstalls it (the agent stops, as
// when its DaemonSet is deleted) and runs nodenetctl cleanup: the node's
// links, addresses, routes, neighbours, FDB, nftables tables, sysctls and
// CNI and state directories are as before nodenet. On the way, cleanup
// refuses while the agent runs and while a pod holds an address, a dry
// run changes nothing, a reinstalled agent adopts the pod, and a second
// cleanup finds nothing; --force takes the network from a pod that is
// still there.
func TestUninstall(t *testing.T) {
	testroot.Require(t, "node network namespaces")
	bin := t.TempDir()
	if err := harness.BuildBinaries(bin); err != nil {
		t.Fatal(err)
	}
	for _, mode := range []config.NetworkMode{config.NetworkModeOverlay, config.NetworkModeL2Bridge} {
		t.Run(string(mode), func(t *testing.T) {
			t.Parallel()
			testUninstall(t, bin, mode)
		})
	}
}

func testUninstall(t *testing.T, bin string, mode config.NetworkMode) {
	ctx := t.Context()
	u := newUninstallNode(t, bin, mode)
	u.prepare(t)
	before := u.snapshot(t)

	u.install(t)
	u.startAgent(t)
	rt := u.NewRuntime(t, netnode.RuntimeOptions{Conflist: u.read(t, u.conflist()), BinDir: u.cniBin})
	// A hostPort, so the hostPort table is there too.
	pod := u.NewPod(t, "web")
	pod.Conf.CapabilityArgs = map[string]any{"portMappings": []map[string]any{{"hostPort": 8080, "containerPort": 80, "protocol": "tcp"}}}
	if err := rt.Add(ctx, pod); err != nil {
		t.Fatal(err)
	}

	t.Run("cleanup refuses while the agent runs", func(t *testing.T) {
		was := u.snapshot(t)
		r := u.cleanup(t)
		r.want(t, 1, "", "nodenet-agent still runs on this node")
		u.same(t, was, "a refused cleanup")
	})

	u.stopAgent(t)
	mid := u.snapshot(t)
	t.Run("the agent programmed the node and left it programmed", func(t *testing.T) {
		want := []string{
			"nftables table inet nodenet",
			"nftables table inet nodenet-hostport",
			"nftables table inet nodenet-egress",
			"link nodenet type=bridge",
			"addr 10.244.1.1/24 dev nodenet",
			"file etc/cni/net.d/10-nodenet.conflist",
			"file opt/cni/bin/nodenet-cni",
			"socket var/run/nodenet/cni.sock",
			"socket var/run/nodenet/agent.sock",
			"file var/lib/nodenet/ipam/nodenet/" + pod.IP.String(),
		}
		peer := fmt.Sprintf("route table=254 dst=10.244.2.0/24 gw=%s dev=eth0 proto=78", u.peerIP)
		if mode == config.NetworkModeOverlay {
			peer = "route table=254 dst=10.244.2.0/24 gw=10.244.2.0 dev=nodenet.4096 proto=78"
			want = append(want, "link nodenet.4096 type=vxlan", "addr 10.244.1.0/32 dev nodenet.4096",
				"neigh 10.244.2.0 lladdr 5a:7f:1e:70:e8:54 dev nodenet.4096",
				fmt.Sprintf("fdb 5a:7f:1e:70:e8:54 dev nodenet.4096 dst %s", u.peerIP))
		}
		want = append(want, peer)
		for _, w := range want {
			if !slices.ContainsFunc(mid.lines, func(l string) bool { return strings.HasPrefix(l, w) }) {
				t.Errorf("after the agent ran, the node has no %q:\n%s", w, strings.Join(mid.lines, "\n"))
			}
		}
	})

	t.Run("the pod keeps its network while the agent is gone", func(t *testing.T) {
		if err := pod.Ping(ctx, netip.MustParseAddr("10.244.1.1")); err != nil {
			t.Error(err)
		}
	})

	t.Run("cleanup refuses while a pod holds an address", func(t *testing.T) {
		r := u.cleanup(t)
		r.want(t, 1, "", "refusing: pods on this node still use nodenet's network",
			fmt.Sprintf("address %s held by container ctr-web (eth0)", pod.IP),
			"veth nn", "until the node is drained", "kubectl drain")
		t.Logf("cleanup said:\n%s", r.stderr)
		u.same(t, mid, "a refused cleanup")
	})

	t.Run("a dry run lists what cleanup removes and changes nothing", func(t *testing.T) {
		wants := []string{"would remove conflist ", "would remove nftables table inet nodenet\n", "would remove bridge nodenet",
			"would remove IPAM store " + filepath.Join(u.root, "var/lib/nodenet/ipam") + " (1 allocation)"}
		if mode == config.NetworkModeOverlay {
			wants = append(wants, "would remove vxlan device nodenet.4096 (VNI 4096, with its 1 route, 1 neighbour and 1 FDB entry)")
		} else {
			wants = append(wants, fmt.Sprintf("would remove route 10.244.2.0/24 via %s dev eth0 proto 78", u.peerIP))
		}
		r := u.cleanup(t, "--dry-run")
		r.want(t, 1, "refusing", wants...)
		u.same(t, mid, "cleanup --dry-run")
		r = u.cleanup(t, "--dry-run", "--force")
		r.want(t, 0, "cutting off", append(wants, "would remove veth nn")...)
		u.same(t, mid, "cleanup --dry-run --force")
	})

	// Reinstalled, the agent adopts what it left: the pod's wiring and
	// address; its DEL goes through the new agent.
	u.startAgent(t)
	t.Run("a reinstalled agent adopts the pod", func(t *testing.T) {
		if err := rt.Check(ctx, pod); err != nil {
			t.Error(err)
		}
	})
	if err := rt.Del(ctx, pod); err != nil {
		t.Fatal(err)
	}
	u.stopAgent(t)

	t.Run("cleanup removes what nodenet left and the node is as before", func(t *testing.T) {
		r := u.cleanup(t)
		r.want(t, 0, "", "removed conflist ", "removed CNI plugin ", "removed nftables table inet nodenet\n",
			"removed nftables table inet nodenet-hostport\n", "removed nftables table inet nodenet-egress\n",
			"removed bridge nodenet", "removed socket ", "removed IPAM store ", "removed state directory ", "removed socket directory ")
		t.Logf("cleanup said:\n%s", r.stdout)
		after := u.snapshot(t)
		if diff := cmp.Diff(before.lines, after.lines); diff != "" {
			t.Errorf("the node after cleanup differs from before nodenet (-before +after):\n%s\ncleanup said:\n%s", diff, r.stdout)
		}
		if diff := cmp.Diff(mid.conntrack, after.conntrack); diff != "" {
			t.Errorf("cleanup changed conntrack sysctls (-before +after):\n%s", diff)
		}
	})

	// The node as before nodenet, with the conntrack sysctls the agent
	// set (cleanup leaves them).
	asBefore := nodeState{lines: before.lines, conntrack: mid.conntrack}

	t.Run("a second cleanup finds nothing and succeeds", func(t *testing.T) {
		r := u.cleanup(t)
		r.want(t, 0, "")
		if r.stdout != "nothing of nodenet's is left on this node\n" {
			t.Errorf("stdout:\n%s", r.stdout)
		}
		u.same(t, asBefore, "a second cleanup")
	})

	t.Run("--force takes the network from a pod that is still there", func(t *testing.T) {
		u.install(t)
		u.startAgent(t)
		db := rt.AddPod(t, "db")
		u.stopAgent(t)
		r := u.cleanup(t, "--force")
		r.want(t, 0, "--force: cutting off", "removed veth nn", "removed bridge nodenet")
		u.same(t, asBefore, "cleanup --force")
		if out, err := db.Run(ctx, "ip", "link", "show", "eth0"); err == nil {
			t.Errorf("the pod still has eth0:\n%s", out)
		}
	})
}

// uninstallNode is one node and nodenet's files on it.
type uninstallNode struct {
	*netnode.Node
	mode config.NetworkMode
	// bin holds the built binaries; dir the test's files (config,
	// manifests, logs); root the node's files, where every cni path is.
	bin, dir, root string
	cfgPath        string
	cniConf        string
	cniBin         string
	cniSocket      string
	peerIP, hostIP netip.Addr
	agent          *netnode.Process
	runs           int
}

func newUninstallNode(t *testing.T, bin string, mode config.NetworkMode) *uninstallNode {
	t.Helper()
	env := netnode.New(t, netnode.Options{Nodes: []string{"node-a"}})
	// A short directory: unix socket paths are limited to 107 bytes.
	dir, err := os.MkdirTemp("", "nn-uninst")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	u := &uninstallNode{Node: env.Nodes[0], mode: mode, bin: bin, dir: dir, root: filepath.Join(dir, "node"), peerIP: env.Addr(12), hostIP: env.HostIP}
	u.cniConf = filepath.Join(u.root, "etc/cni/net.d")
	u.cniBin = filepath.Join(u.root, "opt/cni/bin")
	u.cniSocket = filepath.Join(u.root, "var/run/nodenet/cni.sock")

	cfg := &config.AgentConfiguration{ClusterCIDRs: []string{"10.244.0.0/16"}, ServiceCIDRs: []string{"10.96.0.0/12"}, NodeName: "node-a"}
	cfg.Network.Mode = mode
	cfg.CNI = config.CNIConfiguration{
		SocketPath: u.cniSocket,
		ConfDir:    u.cniConf,
		BinDir:     u.cniBin,
		DataDir:    filepath.Join(u.root, "var/lib/nodenet"),
	}
	// A namespace can't size the conntrack table: leave it.
	zero := int32(0)
	cfg.Linux.Conntrack.MaxPerCore = &zero
	u.cfgPath = filepath.Join(dir, "config.yaml")
	if err := config.WriteFile(cfg, u.cfgPath); err != nil {
		t.Fatal(err)
	}
	backend, data := "host-gw", "null"
	if mode == config.NetworkModeOverlay {
		backend, data = "vxlan", `{"VNI":4096,"VtepMAC":"5a:7f:1e:70:e8:54"}`
	}
	u.write(t, filepath.Join(dir, "manifests", "cluster.yaml"), fmt.Sprintf(uninstallNodes, u.IP, backend, data, u.peerIP))
	return u
}

// prepare gives the node what it has before nodenet: the runtime's CNI
// directories with a loopback conflist and plugin, /var/run and /var/lib,
// a static route and another program's nftables table. Cleanup must leave
// all of them.
func (u *uninstallNode) prepare(t *testing.T) {
	t.Helper()
	for _, dir := range []string{"var/run", "var/lib"} {
		if err := os.MkdirAll(filepath.Join(u.root, dir), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	u.write(t, filepath.Join(u.cniConf, "99-loopback.conflist"), `{"cniVersion":"1.0.0","name":"lo","plugins":[{"type":"loopback"}]}`)
	u.write(t, filepath.Join(u.cniBin, "loopback"), "#!/bin/true\n")
	h := u.Netlink(t)
	eth0, err := h.LinkByName("eth0")
	if err != nil {
		t.Fatal(err)
	}
	if err := h.RouteAdd(&netlink.Route{
		LinkIndex: eth0.Attrs().Index, Dst: netaddr.IPNet(netip.MustParsePrefix("10.99.0.0/24")),
		Gw: net.IP(u.hostIP.AsSlice()), Protocol: unix.RTPROT_STATIC,
	}); err != nil {
		t.Fatal(err)
	}
	conn := u.nft(t)
	conn.AddTable(&gnft.Table{Name: "other", Family: gnft.TableFamilyINet})
	if err := conn.Flush(); err != nil {
		t.Fatal(err)
	}
}

// install puts the plugin in the CNI bin dir, as the DaemonSet's
// install-cni does.
func (u *uninstallNode) install(t *testing.T) {
	t.Helper()
	u.write(t, filepath.Join(u.cniBin, "nodenet-cni"), string(u.read(t, filepath.Join(u.bin, harness.CNIBinary))))
	if err := os.Chmod(filepath.Join(u.cniBin, "nodenet-cni"), 0o755); err != nil {
		t.Fatal(err)
	}
}

func (u *uninstallNode) conflist() string {
	return filepath.Join(u.cniConf, config.DefaultConflistName)
}

// startAgent runs nodenet-agent in the node, offline, and waits until
// its network, CNI server and proxy are ready and the conflist is there.
func (u *uninstallNode) startAgent(t *testing.T) {
	t.Helper()
	u.runs++
	logPath := filepath.Join(u.dir, fmt.Sprintf("agent-%d.log", u.runs))
	log, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	defer log.Close()
	cmd := u.Command(context.Background(), filepath.Join(u.bin, harness.AgentBinary),
		"--config", u.cfgPath, "--dataplane=linux", "--source=files:"+filepath.Join(u.dir, "manifests"), "--v=2")
	// Nothing that could lead to an API server.
	cmd.Env = append(os.Environ(), "KUBERNETES_SERVICE_HOST=", "KUBERNETES_SERVICE_PORT=", "KUBECONFIG=", "NODENET_APISERVER=")
	cmd.Stdout, cmd.Stderr = log, log
	p, err := netnode.StartProcess(cmd)
	if err != nil {
		t.Fatal(err)
	}
	u.agent = p
	t.Cleanup(func() {
		p.Kill()
		if t.Failed() {
			t.Logf("agent run %d log:\n%s", u.runs, u.read(t, logPath))
		}
	})
	client := status.NewClient(status.SocketPath(u.cniSocket))
	err = netnode.Eventually(t.Context(), harness.Converge, func(ctx context.Context) error {
		select {
		case <-p.Done():
			return fmt.Errorf("the agent exited: %w", p.Err())
		default:
		}
		st, err := client.Status(ctx)
		switch {
		case err != nil:
			return err
		case !st.Network.Ready || !st.CNI.Ready:
			return fmt.Errorf("network or CNI not ready: %+v", st.Network)
		case !st.Proxy.Running || st.Proxy.Syncs == 0:
			return errors.New("proxy not synced")
		case st.Network.RemoteNodes != 1:
			return fmt.Errorf("%d remote nodes, want node-b", st.Network.RemoteNodes)
		}
		_, err = os.Stat(u.conflist())
		return err
	})
	if err != nil {
		t.Fatalf("agent run %d not ready: %v\n%s", u.runs, err, u.read(t, logPath))
	}
}

// stopAgent stops the agent as deleting its DaemonSet does (SIGTERM) and
// wants a clean exit.
func (u *uninstallNode) stopAgent(t *testing.T) {
	t.Helper()
	u.agent.Signal(syscall.SIGTERM)
	select {
	case <-u.agent.Done():
	case <-time.After(30 * time.Second):
		t.Fatal("the agent did not stop within 30s of SIGTERM")
	}
	if code := u.agent.ExitCode(); code != 0 {
		t.Fatalf("the agent exited with %d after SIGTERM", code)
	}
}

// cleanupResult is one nodenetctl cleanup run.
type cleanupResult struct {
	code           int
	stdout, stderr string
}

// cleanup runs the nodenetctl binary in the node with the agent's
// config.
func (u *uninstallNode) cleanup(t *testing.T, args ...string) cleanupResult {
	t.Helper()
	cmd := u.Command(t.Context(), filepath.Join(u.bin, harness.CtlBinary), append([]string{"cleanup", "--config", u.cfgPath}, args...)...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		t.Fatal(err)
	}
	return cleanupResult{code: cmd.ProcessState.ExitCode(), stdout: stdout.String(), stderr: stderr.String()}
}

// want checks the exit code, that stderr holds inStderr and that the
// output (stdout and stderr) holds each of want.
func (r cleanupResult) want(t *testing.T, code int, inStderr string, want ...string) {
	t.Helper()
	out := r.stdout + r.stderr
	ok := r.code == code && strings.Contains(r.stderr, inStderr)
	for _, w := range want {
		ok = ok && strings.Contains(out, w)
	}
	if !ok {
		t.Errorf("cleanup exited %d (want %d); want %q in stderr and %q in its output\nstdout:\n%s\nstderr:\n%s",
			r.code, code, inStderr, want, r.stdout, r.stderr)
	}
}

// nodeState is what the test records of the node.
type nodeState struct {
	// lines: links, addresses, routes (every table), permanent
	// neighbours, the FDB but for learned entries, nftables tables, the
	// node's sysctls and every file under the node's root.
	lines []string
	// conntrack holds the conntrack sysctls.
	conntrack []string
}

// same wants the node as it was.
func (u *uninstallNode) same(t *testing.T, was nodeState, what string) {
	t.Helper()
	if diff := cmp.Diff(was, u.snapshot(t), cmp.AllowUnexported(nodeState{})); diff != "" {
		t.Errorf("%s changed the node (-before +after):\n%s", what, diff)
	}
}

func (u *uninstallNode) snapshot(t *testing.T) nodeState {
	t.Helper()
	var s nodeState
	add := func(format string, args ...any) { s.lines = append(s.lines, fmt.Sprintf(format, args...)) }
	h := u.Netlink(t)
	links, err := h.LinkList()
	if err != nil {
		t.Fatal(err)
	}
	names := map[int]string{}
	for _, l := range links {
		names[l.Attrs().Index] = l.Attrs().Name
	}
	for _, l := range links {
		a := l.Attrs()
		add("link %s type=%s mtu=%d up=%t master=%s alias=%q mac=%s", a.Name, l.Type(), a.MTU, a.Flags&net.FlagUp != 0, names[a.MasterIndex], a.Alias, a.HardwareAddr)
	}
	addrs, err := h.AddrList(nil, netlink.FAMILY_ALL)
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range addrs {
		add("addr %s dev %s", a.IPNet, names[a.LinkIndex])
	}
	routes, err := h.RouteListFiltered(netlink.FAMILY_ALL, &netlink.Route{Table: unix.RT_TABLE_UNSPEC}, netlink.RT_FILTER_TABLE)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range routes {
		// Without linkdown: it follows the carrier of the link, which a
		// bridge gets a moment after its first port comes up.
		flags := r.Flags &^ unix.RTNH_F_LINKDOWN
		add("route table=%d dst=%v gw=%v dev=%s proto=%d scope=%d type=%d src=%v flags=%d", r.Table, r.Dst, r.Gw, names[r.LinkIndex], r.Protocol, r.Scope, r.Type, r.Src, flags)
	}
	for _, family := range []int{netlink.FAMILY_V4, netlink.FAMILY_V6} {
		neighs, err := h.NeighList(0, family)
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range neighs {
			if n.State&netlink.NUD_PERMANENT != 0 {
				add("neigh %s lladdr %s dev %s", n.IP, n.HardwareAddr, names[n.LinkIndex])
			}
		}
	}
	fdb, err := h.NeighList(0, unix.AF_BRIDGE)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range fdb {
		if n.State&(netlink.NUD_PERMANENT|netlink.NUD_NOARP) == 0 {
			continue // learned by a bridge from traffic: the kernel's cache
		}
		add("fdb %s dev %s dst %v master=%s state=%d flags=%d", n.HardwareAddr, names[n.LinkIndex], n.IP, names[n.MasterIndex], n.State, n.Flags)
	}
	tables, err := u.nft(t).ListTables()
	if err != nil {
		t.Fatal(err)
	}
	for _, tb := range tables {
		add("nftables table %s %s", familyName(tb.Family), tb.Name)
	}
	for _, key := range nodeSysctls {
		add("sysctl %s = %s", key, u.sysctl(t, key))
	}
	for _, key := range conntrackSysctls {
		s.conntrack = append(s.conntrack, fmt.Sprintf("sysctl %s = %s", key, u.sysctl(t, key)))
	}
	err = filepath.WalkDir(u.root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(u.root, path)
		fi, err := d.Info()
		if err != nil {
			return err
		}
		switch {
		case d.IsDir():
			add("dir %s %v", rel, fi.Mode())
		case fi.Mode()&fs.ModeSocket != 0:
			add("socket %s", rel)
		case fi.Mode().IsRegular():
			sum := sha256.Sum256(u.read(t, path))
			add("file %s %v %x", rel, fi.Mode(), sum[:8])
		default:
			add("other %s %v", rel, fi.Mode())
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(s.lines)
	return s
}

// nft is an nftables connection inside the node.
func (u *uninstallNode) nft(t *testing.T) *gnft.Conn {
	t.Helper()
	conn, err := gnft.New(gnft.WithNetNSFd(int(u.Handle)))
	if err != nil {
		t.Fatal(err)
	}
	return conn
}

// sysctl reads one sysctl of the node ("absent" when it does not exist).
func (u *uninstallNode) sysctl(t *testing.T, key string) string {
	t.Helper()
	var value string
	err := u.Do(func() error {
		data, err := os.ReadFile(filepath.Join("/proc/sys", key))
		if errors.Is(err, fs.ErrNotExist) {
			value = "absent"
			return nil
		}
		value = strings.TrimSpace(string(data))
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return value
}

func familyName(f gnft.TableFamily) string {
	switch f {
	case gnft.TableFamilyINet:
		return "inet"
	case gnft.TableFamilyIPv4:
		return "ip"
	case gnft.TableFamilyIPv6:
		return "ip6"
	case gnft.TableFamilyBridge:
		return "bridge"
	}
	return fmt.Sprint(f)
}

func (u *uninstallNode) write(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func (u *uninstallNode) read(t *testing.T, path string) []byte {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return data
}
