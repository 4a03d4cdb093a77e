package e2e

// The service proxy's environment. Address plan (k is the netnode slot):
//
//	underlay           192.168.(77+k).0/24: node-1 .11, node-2 .12, and
//	                   "outside" .13, a host on the underlay that runs no
//	                   nodenet and routes the service CIDR and the
//	                   external IP to node-1, like a router would
//	pod CIDRs          node-1 10.244.1.0/24, node-2 10.244.2.0/24, wired
//	                   by linuxnet in l2bridge mode (host-gw routes) and
//	                   the nodenet CNI server
//	pods               client on node-1; backends be-1 on node-1, be-2
//	                   and be-3 on node-2
//	backend ports      TCP 8080 answers "<pod name> <source address>";
//	                   UDP 5353 answers "<pod name>"
//	services           cluster IPs from 10.96.0.0/12, external IP
//	                   203.0.113.10, node ports 30080-30089
//
// The proxy (brain + nftables backend) runs for node-1 only, inside its
// namespace, fed Service and EndpointSlice objects directly: no
// apiserver is needed to test the dataplane.

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/klog/v2/ktesting"
	"sigs.k8s.io/knftables"

	"github.com/nodenet/nodenet/agent/config"
	"github.com/nodenet/nodenet/internal/netaddr"
	"github.com/nodenet/nodenet/overlay"
	"github.com/nodenet/nodenet/overlay/linuxnet"
	"github.com/nodenet/nodenet/proxy"
	"github.com/nodenet/nodenet/proxy/brain"
	"github.com/nodenet/nodenet/proxy/conntrack"
	"github.com/nodenet/nodenet/proxy/nftables"
	"github.com/nodenet/nodenet/test/netnode"
)

const (
	// backendTCPPort and backendUDPPort are where every backend pod serves.
	backendTCPPort = 8080
	backendUDPPort = 5353
	// externalIP is routed to node-1 by the outside host.
	externalIP = "203.0.113.10"
	// probe bounds one connection attempt or UDP round trip.
	probe = 2 * time.Second
)

// serviceEnv is two nodenet nodes with pods, and a host outside them.
type serviceEnv struct {
	env     *netnode.Env
	node1   *netnode.Node
	node2   *netnode.Node
	outside *netnode.Node
	// client is a pod on node-1 that only connects; backends serve.
	client   *netnode.Pod
	backends map[string]*netnode.Pod
}

// newServiceEnv builds the nodes' network, the pods and their servers.
func newServiceEnv(t *testing.T) *serviceEnv {
	t.Helper()
	env := netnode.New(t, netnode.Options{Nodes: []string{"node-1", "node-2", "outside"}})
	e := &serviceEnv{env: env, node1: env.Node("node-1"), node2: env.Node("node-2"), outside: env.Node("outside"), backends: map[string]*netnode.Pod{}}

	var remotes []overlay.RemoteNode
	var dps []*linuxnet.Network
	cnis := map[string]*netnode.NodenetCNI{}
	for i, n := range []*netnode.Node{e.node1, e.node2} {
		cidr := podCIDR(i + 1)
		cfg := agentConfig(t, config.NetworkModeL2Bridge, n.Name)
		dp, err := linuxnet.New(linuxnet.Options{NetNS: n.Handle, Logger: ktesting.NewLogger(t, ktesting.NewConfig()).WithValues("node", n.Name)})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { dp.Close() })
		gw, _ := netaddr.AtOffset(cidr, config.GatewayOffset)
		local, err := dp.EnsureLocal(t.Context(), overlay.LocalSpec{
			Mode:     config.NetworkModeL2Bridge,
			Name:     cfg.Network.Name,
			PodCIDRs: []netip.Prefix{cidr},
			Gateways: []netip.Addr{gw},
			NodeIP:   n.IP,
		})
		if err != nil {
			t.Fatalf("node network of %s: %v", n.Name, err)
		}
		cni := n.StartNodenetCNI(t, netnode.NodenetCNIOptions{NetworkName: cfg.Network.Name})
		if err := cni.Server.SetNetwork(nodeNetwork(cfg, local)); err != nil {
			t.Fatal(err)
		}
		cnis[n.Name] = cni
		remotes = append(remotes, overlay.RemoteNode{Name: n.Name, PodCIDRs: []netip.Prefix{cidr}, NodeIP: n.IP})
		dps = append(dps, dp)
	}
	// Every node routes to the other's pods.
	for i, dp := range dps {
		if _, err := dp.SyncRemotes(t.Context(), []overlay.RemoteNode{remotes[1-i]}); err != nil {
			t.Fatalf("routes of %s: %v", remotes[i].Name, err)
		}
	}
	// The outside host sends service traffic to node-1, as a router
	// with routes to the service CIDR and the external IP would.
	for _, dst := range []string{serviceCIDR, externalIP + "/32"} {
		if out, err := e.outside.Run(t.Context(), "ip", "route", "add", dst, "via", e.node1.IP.String()); err != nil {
			t.Fatalf("%v: %s", err, out)
		}
	}
	// And it is the nodes' default gateway, as real nodes have one: a
	// packet to a cluster IP that is not DNATed must be routable to reach
	// the forward hook that rejects it (kube-proxy's layout too).
	// Service traffic from outside to node-1 may leave node-1 through
	// eth0 again (to a backend on node-2), so node-1 would send ICMP
	// redirects; each one spends the per-host ICMP budget, and a reject
	// right after one is rate-limited into a SYN retransmit a second later.
	for _, n := range []*netnode.Node{e.node1, e.node2} {
		if out, err := n.Run(t.Context(), "ip", "route", "add", "default", "via", e.outside.IP.String()); err != nil {
			t.Fatalf("%v: %s", err, out)
		}
		for _, key := range []string{"net.ipv4.conf.all.send_redirects", "net.ipv4.conf.eth0.send_redirects"} {
			if err := n.Sysctl(key, "0"); err != nil {
				t.Fatal(err)
			}
		}
	}

	e.client = cnis["node-1"].AddPod(t, "client")
	for _, b := range []struct{ name, node string }{{"be-1", "node-1"}, {"be-2", "node-2"}, {"be-3", "node-2"}} {
		p := cnis[b.node].AddPod(t, b.name)
		serveTCP(t, p)
		serveUDP(t, p)
		e.backends[b.name] = p
	}
	return e
}

// serveTCP answers every connection to the pod's TCP port with its name
// and the source address it sees, then closes.
func serveTCP(t *testing.T, p *netnode.Pod) {
	t.Helper()
	l, err := p.Listen(backendTCPPort)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			src := c.RemoteAddr().(*net.TCPAddr).AddrPort().Addr().Unmap()
			_ = c.SetDeadline(time.Now().Add(probe))
			_, _ = fmt.Fprintf(c, "%s %s\n", p.Name, src)
			c.Close()
		}
	}()
}

// serveUDP answers every datagram to the pod's UDP port with its name.
func serveUDP(t *testing.T, p *netnode.Pod) {
	t.Helper()
	var conn *net.UDPConn
	err := p.Do(func() (err error) {
		conn, err = net.ListenUDP("udp4", &net.UDPAddr{Port: backendUDPPort})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	go func() {
		buf := make([]byte, 64)
		for {
			_, from, err := conn.ReadFromUDPAddrPort(buf)
			if err != nil {
				return
			}
			_, _ = conn.WriteToUDPAddrPort([]byte(p.Name), from)
		}
	}()
}

// answer is what a backend said over TCP.
type answer struct {
	// Backend is the pod that answered.
	Backend string
	// Source is the client address the backend saw.
	Source netip.Addr
}

// ask connects from ns to dst over TCP and reads the backend's answer.
func ask(ctx context.Context, from *netnode.NS, dst netip.AddrPort) (answer, error) {
	ctx, cancel := context.WithTimeout(ctx, probe)
	defer cancel()
	c, err := from.Dial(ctx, dst.Addr(), int(dst.Port()))
	if err != nil {
		return answer{}, err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(probe))
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		return answer{}, fmt.Errorf("%s -> %s: no answer: %w", from.Name, dst, err)
	}
	name, src, ok := strings.Cut(strings.TrimSpace(line), " ")
	addr, perr := netip.ParseAddr(src)
	if !ok || perr != nil {
		return answer{}, fmt.Errorf("%s -> %s: bad answer %q", from.Name, dst, line)
	}
	return answer{Backend: name, Source: addr}, nil
}

// eventuallyAsk retries ask until a backend answers: the first packets
// after a sync may race the kernel settling (ARP, new routes).
func eventuallyAsk(t *testing.T, from *netnode.NS, dst netip.AddrPort) answer {
	t.Helper()
	var a answer
	err := netnode.Eventually(t.Context(), converge, func(ctx context.Context) (err error) {
		a, err = ask(ctx, from, dst)
		return err
	})
	if err != nil {
		t.Fatalf("%s -> %s: %v", from.Name, dst, err)
	}
	return a
}

// udpClient is a connected UDP socket that always sends from one port.
type udpClient struct {
	conn *net.UDPConn
}

func dialUDP(t *testing.T, from *netnode.NS, dst netip.AddrPort) *udpClient {
	t.Helper()
	var conn *net.UDPConn
	err := from.Do(func() (err error) {
		conn, err = net.DialUDP("udp4", nil, net.UDPAddrFromAddrPort(dst))
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return &udpClient{conn: conn}
}

// ask sends one datagram and returns who answered.
func (c *udpClient) ask() (string, error) {
	if _, err := c.conn.Write([]byte("ping")); err != nil {
		return "", err
	}
	buf := make([]byte, 64)
	_ = c.conn.SetReadDeadline(time.Now().Add(probe / 4))
	n, err := c.conn.Read(buf)
	if err != nil {
		return "", fmt.Errorf("UDP %s -> %s: %w", c.conn.LocalAddr(), c.conn.RemoteAddr(), err)
	}
	return string(buf[:n]), nil
}

// Kubernetes objects.

// service is a Service of port 80 (targetPort 8080) or, for UDP, 53
// (targetPort 5353); opts adjust it.
func service(name, clusterIP string, proto v1.Protocol, opts ...func(*v1.Service)) *v1.Service {
	port, target := int32(80), backendTCPPort
	if proto == v1.ProtocolUDP {
		port, target = 53, backendUDPPort
	}
	s := &v1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name, ResourceVersion: "1"},
		Spec: v1.ServiceSpec{
			Type:       v1.ServiceTypeClusterIP,
			ClusterIP:  clusterIP,
			ClusterIPs: []string{clusterIP},
			IPFamilies: []v1.IPFamily{v1.IPv4Protocol},
			Ports: []v1.ServicePort{{
				Name: "p", Protocol: proto, Port: port, TargetPort: intstr.FromInt(target),
			}},
			SessionAffinity: v1.ServiceAffinityNone,
		},
	}
	for _, o := range opts {
		o(s)
	}
	return s
}

// nodePort makes s a NodePort service on port np with externalTrafficPolicy.
func nodePort(np int32, policy v1.ServiceExternalTrafficPolicy) func(*v1.Service) {
	return func(s *v1.Service) {
		s.Spec.Type = v1.ServiceTypeNodePort
		s.Spec.Ports[0].NodePort = np
		s.Spec.ExternalTrafficPolicy = policy
	}
}

func withExternalIP(ip string) func(*v1.Service) {
	return func(s *v1.Service) { s.Spec.ExternalIPs = append(s.Spec.ExternalIPs, ip) }
}

func withClientIPAffinity(s *v1.Service) {
	timeout := int32(600)
	s.Spec.SessionAffinity = v1.ServiceAffinityClientIP
	s.Spec.SessionAffinityConfig = &v1.SessionAffinityConfig{ClientIP: &v1.ClientIPConfig{TimeoutSeconds: &timeout}}
}

// slice is the EndpointSlice of s holding the pods as ready endpoints;
// version is its resourceVersion (bump it on every update).
func slice(s *v1.Service, version int, pods ...*netnode.Pod) *discoveryv1.EndpointSlice {
	sp := s.Spec.Ports[0]
	port := sp.TargetPort.IntVal
	es := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{
			Namespace:       s.Namespace,
			Name:            s.Name + "-abcde",
			Labels:          map[string]string{discoveryv1.LabelServiceName: s.Name},
			ResourceVersion: fmt.Sprint(version),
		},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: &sp.Name, Protocol: &sp.Protocol, Port: &port}},
	}
	for _, p := range pods {
		ready, node := true, p.Node.Name
		es.Endpoints = append(es.Endpoints, discoveryv1.Endpoint{
			Addresses:  []string{p.IP.String()},
			Conditions: discoveryv1.EndpointConditions{Ready: &ready},
			NodeName:   &node,
		})
	}
	return es
}

// nodeObject is the Node object of n, for the brain's topology.
func nodeObject(n *netnode.Node) *v1.Node {
	return &v1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: n.Name, Labels: map[string]string{v1.LabelHostname: n.Name}},
		Status:     v1.NodeStatus{Addresses: []v1.NodeAddress{{Type: v1.NodeInternalIP, Address: n.IP.String()}}},
	}
}

// serviceProxy is the service proxy of one node: a brain fed objects by
// the test and the nftables backend, with its conntrack cleaner, acting
// inside the node's namespace.
type serviceProxy struct {
	node    *netnode.Node
	brain   *brain.Brain
	backend *nftables.Backend
	nft     knftables.Interface
	synced  bool
}

// startProxy makes node n's proxy; nothing is programmed before sync.
func startProxy(t *testing.T, n *netnode.Node) *serviceProxy {
	t.Helper()
	log := ktesting.NewLogger(t, ktesting.NewConfig(ktesting.Verbosity(2))).WithValues("node", n.Name)
	var inner knftables.Interface
	err := n.Do(func() (err error) {
		inner, err = knftables.New(knftables.InetFamily, nftables.TableName)
		return err
	})
	if err != nil {
		t.Fatalf("knftables in %s: %v", n.Name, err)
	}
	nft := nsNFT{Interface: inner, ns: n.NS}
	backend, err := nftables.New(nftables.Options{
		NFT:               nft,
		Families:          []proxy.IPFamily{proxy.IPv4},
		LocalTrafficCIDRs: []netip.Prefix{netip.MustParsePrefix(clusterCIDR)},
		ServiceCIDRs:      []netip.Prefix{netip.MustParsePrefix(serviceCIDR)},
		Conntrack:         nsFlusher{inner: conntrack.New(conntrack.Options{Logger: log}), ns: n.NS},
		Logger:            log,
	})
	if err != nil {
		t.Fatal(err)
	}
	b := brain.New(brain.Options{NodeName: n.Name, Families: []proxy.IPFamily{proxy.IPv4}, Logger: log})
	b.OnNodeUpdate(nil, nodeObject(n))
	p := &serviceProxy{node: n, brain: b, backend: backend, nft: nft}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("nft list table inet %s in %s:\n%s", nftables.TableName, n.Name, p.dump(t))
		}
	})
	return p
}

// apply hands new objects to the brain; update hands it a changed slice.
func (p *serviceProxy) apply(objs ...any) {
	for _, o := range objs {
		switch o := o.(type) {
		case *v1.Service:
			p.brain.OnServiceUpdate(nil, o)
		case *discoveryv1.EndpointSlice:
			p.brain.OnEndpointSliceUpdate(nil, o)
		default:
			panic(fmt.Sprintf("apply %T", o))
		}
	}
}

// update hands the brain a changed EndpointSlice.
func (p *serviceProxy) update(old, new *discoveryv1.EndpointSlice) {
	p.brain.OnEndpointSliceUpdate(old, new)
}

// sync snapshots the brain and syncs the backend, as the runner does.
func (p *serviceProxy) sync(t *testing.T) {
	t.Helper()
	if !p.synced {
		p.brain.OnSynced()
	}
	update, _ := p.brain.Snapshot(!p.synced)
	err := p.node.Do(func() error { return p.backend.Sync(t.Context(), update) })
	if err != nil {
		t.Fatalf("sync %s: %v\n%s", p.node.Name, err, p.dump(t))
	}
	p.synced = true
}

// dump is `nft list table inet nodenet` in the node.
func (p *serviceProxy) dump(t *testing.T) string {
	out, err := p.node.Run(context.WithoutCancel(t.Context()), "nft", "list", "table", "inet", nftables.TableName)
	if err != nil {
		return fmt.Sprintf("%v: %s", err, out)
	}
	return out
}

// nsNFT runs every nft command inside ns, whichever goroutine asks.
type nsNFT struct {
	knftables.Interface
	ns *netnode.NS
}

func (n nsNFT) Run(ctx context.Context, tx *knftables.Transaction) error {
	return n.ns.Do(func() error { return n.Interface.Run(ctx, tx) })
}

func (n nsNFT) Check(ctx context.Context, tx *knftables.Transaction) error {
	return n.ns.Do(func() error { return n.Interface.Check(ctx, tx) })
}

func (n nsNFT) ListAll(ctx context.Context) (m map[string][]string, err error) {
	err = n.ns.Do(func() error { m, err = n.Interface.ListAll(ctx); return err })
	return m, err
}

func (n nsNFT) List(ctx context.Context, objectType string) (l []string, err error) {
	err = n.ns.Do(func() error { l, err = n.Interface.List(ctx, objectType); return err })
	return l, err
}

func (n nsNFT) ListRules(ctx context.Context, chain string) (r []*knftables.Rule, err error) {
	err = n.ns.Do(func() error { r, err = n.Interface.ListRules(ctx, chain); return err })
	return r, err
}

func (n nsNFT) ListElements(ctx context.Context, objectType, name string) (e []*knftables.Element, err error) {
	err = n.ns.Do(func() error { e, err = n.Interface.ListElements(ctx, objectType, name); return err })
	return e, err
}

func (n nsNFT) ListCounters(ctx context.Context) (c []*knftables.Counter, err error) {
	err = n.ns.Do(func() error { c, err = n.Interface.ListCounters(ctx); return err })
	return c, err
}

// nsFlusher flushes the conntrack table of ns.
type nsFlusher struct {
	inner conntrack.Flusher
	ns    *netnode.NS
}

func (f nsFlusher) Flush(prev, next *proxy.State, changed map[proxy.ServicePortKey]struct{}) error {
	return f.ns.Do(func() error { return f.inner.Flush(prev, next, changed) })
}
