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
// A dual-stack environment (serviceEnvOptions.DualStack) adds IPv6 to
// each of them, the IPv4 plan staying as it is:
//
//	underlay           fd00:77::/64: node-1 ::11, node-2 ::12, outside
//	                   ::13 (the underlay is private to its environment,
//	                   so every slot may use the same prefix)
//	pod CIDRs          node-1 fd00:10:244:1::/64, node-2 fd00:10:244:2::/64
//	services           cluster IPs from fd00:10:96::/112, routed to
//	                   node-1 by the outside host; node ports answer on
//	                   node-1's IPv6 address too
//	backend ports      the same ports answer over IPv6
//
// The proxy (brain + nftables backend) runs for node-1 only, inside its
// namespace, fed Service and EndpointSlice objects directly: no
// apiserver is needed to test the dataplane.

import (
	"bufio"
	"context"
	"fmt"
	"maps"
	"net"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/klog/v2/ktesting"

	"github.com/vishvananda/netlink"

	"github.com/nodenet/nodenet/config"
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

	// The IPv6 halves of a dual-stack environment.
	clusterCIDR6 = "fd00:10:244::/56"
	serviceCIDR6 = "fd00:10:96::/112"
	underlay6    = "fd00:77::"
)

// podCIDR6 is the i-th node's (from 1) IPv6 pod CIDR.
func podCIDR6(i int) netip.Prefix {
	return netip.MustParsePrefix(fmt.Sprintf("fd00:10:244:%d::/64", i))
}

// serviceEnvOptions configure newServiceEnv.
type serviceEnvOptions struct {
	// DualStack adds IPv6 everywhere: underlay addresses, pod CIDRs and
	// routes, the backends' servers, and a proxy of both families.
	DualStack bool
}

// serviceEnv is two nodenet nodes with pods, and a host outside them.
type serviceEnv struct {
	env     *netnode.Env
	node1   *netnode.Node
	node2   *netnode.Node
	outside *netnode.Node
	// client is a pod on node-1 that only connects; backends serve.
	client   *netnode.Pod
	backends map[string]*netnode.Pod

	dualStack bool
	cnis      map[string]*netnode.NodenetCNI
	// ip6 holds the IPv6 address of every node and pod, by name, in a
	// dual-stack environment (netnode knows only their IPv4 addresses).
	ip6 map[string]netip.Addr
}

// newServiceEnv builds the nodes' network, the pods and their servers.
func newServiceEnv(t *testing.T, opts serviceEnvOptions) *serviceEnv {
	t.Helper()
	env := netnode.New(t, netnode.Options{Nodes: []string{"node-1", "node-2", "outside"}, EnableIPv6: opts.DualStack})
	e := &serviceEnv{
		env: env, node1: env.Node("node-1"), node2: env.Node("node-2"), outside: env.Node("outside"),
		backends: map[string]*netnode.Pod{}, dualStack: opts.DualStack,
		cnis: map[string]*netnode.NodenetCNI{}, ip6: map[string]netip.Addr{},
	}
	if e.dualStack {
		// netnode's underlay is IPv4; the nodes get their IPv6 addresses
		// here, without DAD so they work at once.
		for i, n := range env.Nodes {
			ip := netip.MustParseAddr(underlay6 + strconv.Itoa(11+i))
			if out, err := n.Run(t.Context(), "ip", "-6", "addr", "add", ip.String()+"/64", "dev", "eth0", "nodad"); err != nil {
				t.Fatalf("%v: %s", err, out)
			}
			e.ip6[n.Name] = ip
		}
	}

	var remotes []overlay.RemoteNode
	var dps []*linuxnet.Network
	for i, n := range []*netnode.Node{e.node1, e.node2} {
		cidrs := []netip.Prefix{podCIDR(i + 1)}
		if e.dualStack {
			cidrs = append(cidrs, podCIDR6(i+1))
		}
		var gws []netip.Addr
		for _, c := range cidrs {
			gw, _ := netaddr.AtOffset(c, config.GatewayOffset)
			gws = append(gws, gw)
		}
		cfg := agentConfig(t, config.NetworkModeL2Bridge, n.Name)
		dp, err := linuxnet.New(linuxnet.Options{NetNS: n.Handle, Logger: ktesting.NewLogger(t, ktesting.NewConfig()).WithValues("node", n.Name)})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { dp.Close() })
		local, err := dp.EnsureLocal(t.Context(), overlay.LocalSpec{
			Mode:     config.NetworkModeL2Bridge,
			Name:     cfg.Network.Name,
			PodCIDRs: cidrs,
			Gateways: gws,
			NodeIP:   n.IP,
			NodeIPv6: e.ip6[n.Name],
		})
		if err != nil {
			t.Fatalf("node network of %s: %v", n.Name, err)
		}
		cni := n.StartNodenetCNI(t, netnode.NodenetCNIOptions{NetworkName: cfg.Network.Name})
		if err := cni.Server.SetNetwork(nodeNetwork(cfg, local)); err != nil {
			t.Fatal(err)
		}
		e.cnis[n.Name] = cni
		remotes = append(remotes, overlay.RemoteNode{Name: n.Name, PodCIDRs: cidrs, NodeIP: n.IP, NodeIPv6: e.ip6[n.Name]})
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
	if e.dualStack {
		if out, err := e.outside.Run(t.Context(), "ip", "-6", "route", "add", serviceCIDR6, "via", e.ip6[e.node1.Name].String()); err != nil {
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

	e.client = e.addPod(t, e.node1, "client")
	for _, b := range []struct {
		name string
		node *netnode.Node
	}{{"be-1", e.node1}, {"be-2", e.node2}, {"be-3", e.node2}} {
		p := e.addPod(t, b.node, b.name)
		serveTCP(t, p, "tcp4")
		serveUDP(t, p, "udp4")
		if e.dualStack {
			serveTCP(t, p, "tcp6")
			serveUDP(t, p, "udp6")
		}
		e.backends[b.name] = p
	}
	if e.dualStack {
		e.waitDAD(t)
	}
	return e
}

// waitDAD waits until no address in the nodes is tentative. A node sends
// the neighbor solicitations for packets it forwards from its link-local
// address, and only once that passed duplicate address detection: until
// then the first forwarded IPv6 packets wait, and dials time out.
func (e *serviceEnv) waitDAD(t *testing.T) {
	t.Helper()
	err := netnode.Eventually(t.Context(), converge, func(ctx context.Context) error {
		for _, n := range e.env.Nodes {
			out, err := n.Run(ctx, "ip", "-6", "addr", "show", "tentative")
			if err != nil {
				return err
			}
			if strings.TrimSpace(out) != "" {
				return fmt.Errorf("%s has tentative addresses:\n%s", n.Name, out)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// addPod adds pod name on n through the CNI, and records its IPv6
// address in a dual-stack environment.
func (e *serviceEnv) addPod(t *testing.T, n *netnode.Node, name string) *netnode.Pod {
	t.Helper()
	p := e.cnis[n.Name].AddPod(t, name)
	if !e.dualStack {
		return p
	}
	cidr := podCIDR6(1)
	if n == e.node2 {
		cidr = podCIDR6(2)
	}
	var addrs []netlink.Addr
	err := p.Do(func() error {
		l, err := netlink.LinkByName("eth0")
		if err != nil {
			return err
		}
		addrs, err = netlink.AddrList(l, netlink.FAMILY_V6)
		return err
	})
	if err != nil {
		t.Fatalf("addresses of pod %s: %v", name, err)
	}
	for _, a := range addrs {
		if ip, ok := netip.AddrFromSlice(a.IP); ok && cidr.Contains(ip) {
			e.ip6[name] = ip
			return p
		}
	}
	t.Fatalf("pod %s has no address in %s: %v", name, cidr, addrs)
	return nil
}

// backendAt returns the name of the backend with address addr, or "".
func (e *serviceEnv) backendAt(addr string) string {
	for name, p := range e.backends {
		if p.IP.String() == addr || e.ip6[name].String() == addr {
			return name
		}
	}
	return ""
}

// serveTCP answers every connection to the pod's TCP port over network
// ("tcp4" or "tcp6") with its name and the source address it sees, then
// closes.
func serveTCP(t *testing.T, p *netnode.Pod, network string) {
	t.Helper()
	var l net.Listener
	err := p.Do(func() (err error) {
		l, err = net.Listen(network, ":"+strconv.Itoa(backendTCPPort))
		return err
	})
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

// serveUDP answers every datagram to the pod's UDP port over network
// ("udp4" or "udp6") with its name.
func serveUDP(t *testing.T, p *netnode.Pod, network string) {
	t.Helper()
	netnode.AnswerUDP(t, p.Do, network, &net.UDPAddr{Port: backendUDPPort}, p.Name)
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
	network := "udp4"
	if dst.Addr().Is6() {
		network = "udp6"
	}
	var conn *net.UDPConn
	err := from.Do(func() (err error) {
		conn, err = net.DialUDP(network, nil, net.UDPAddrFromAddrPort(dst))
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

// first waits until a backend answers c and returns it.
func (c *udpClient) first(t *testing.T) string {
	t.Helper()
	var got string
	err := netnode.Eventually(t.Context(), converge, func(context.Context) (err error) {
		got, err = c.ask()
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return got
}

// checkUDPMove checks that a UDP client keeping its port stays with the
// backend that first answers it, and moves to a remaining backend once
// that backend leaves the service's slices. The backend keeps running and
// answering: only the conntrack flush of p's sync can move the client.
func (e *serviceEnv) checkUDPMove(t *testing.T, p *serviceProxy, u *udpClient, from ...*discoveryv1.EndpointSlice) {
	t.Helper()
	first := u.first(t)
	// The same source port keeps the same conntrack entry, so the same
	// backend, whatever the random pick would do for a new flow.
	for range 5 {
		if got, err := u.ask(); got != first {
			t.Fatalf("a client keeping its port moved from %s to %q (%v) with nothing changed", first, got, err)
		}
	}
	remaining := map[string]bool{}
	for _, es := range from {
		next := es.DeepCopy()
		v, _ := strconv.Atoi(es.ResourceVersion)
		next.ResourceVersion = strconv.Itoa(v + 1)
		next.Endpoints = nil
		for _, ep := range es.Endpoints {
			if name := e.backendAt(ep.Addresses[0]); name != first {
				next.Endpoints = append(next.Endpoints, ep)
				remaining[name] = true
			}
		}
		p.update(es, next)
	}
	p.sync(t)
	err := netnode.Eventually(t.Context(), converge, func(context.Context) error {
		got, err := u.ask()
		if err == nil && !remaining[got] {
			err = fmt.Errorf("answered by %s, want one of %v", got, remaining)
		}
		return err
	})
	if err != nil {
		t.Errorf("after %s left the service: %v", first, err)
	}
}

// Kubernetes objects.

// service is a Service of port 80 (targetPort 8080) or, for UDP, 53
// (targetPort 5353), named "p"; opts adjust it.
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

// samePorts makes the service port and its target port both port: a
// netnode stream listens on the port its client dials.
func samePorts(port int32) func(*v1.Service) {
	return func(s *v1.Service) {
		s.Spec.Ports[0].Port, s.Spec.Ports[0].TargetPort = port, intstr.FromInt32(port)
	}
}

// withPort adds a service port; nodePort 0 means none.
func withPort(name string, proto v1.Protocol, port, target, nodePort int32) func(*v1.Service) {
	return func(s *v1.Service) {
		s.Spec.Ports = append(s.Spec.Ports, v1.ServicePort{
			Name: name, Protocol: proto, Port: port, TargetPort: intstr.FromInt32(target), NodePort: nodePort,
		})
	}
}

// dualStack makes s require dual-stack, with clusterIP6 as its IPv6
// cluster IP after the IPv4 one.
func dualStack(clusterIP6 string) func(*v1.Service) {
	return func(s *v1.Service) {
		policy := v1.IPFamilyPolicyRequireDualStack
		s.Spec.IPFamilyPolicy = &policy
		s.Spec.ClusterIPs = append(s.Spec.ClusterIPs, clusterIP6)
		s.Spec.IPFamilies = append(s.Spec.IPFamilies, v1.IPv6Protocol)
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

// slice is the IPv4 EndpointSlice of s holding the pods as ready
// endpoints of every port; version is its resourceVersion (bump it on
// every update).
func slice(s *v1.Service, version int, pods ...*netnode.Pod) *discoveryv1.EndpointSlice {
	return familySlice(s, version, discoveryv1.AddressTypeIPv4, func(p *netnode.Pod) netip.Addr { return p.IP }, pods...)
}

// slice6 is slice for the pods' IPv6 addresses.
func (e *serviceEnv) slice6(s *v1.Service, version int, pods ...*netnode.Pod) *discoveryv1.EndpointSlice {
	return familySlice(s, version, discoveryv1.AddressTypeIPv6, func(p *netnode.Pod) netip.Addr { return e.ip6[p.Name] }, pods...)
}

func familySlice(s *v1.Service, version int, family discoveryv1.AddressType, addr func(*netnode.Pod) netip.Addr, pods ...*netnode.Pod) *discoveryv1.EndpointSlice {
	es := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{
			Namespace:       s.Namespace,
			Name:            s.Name + "-" + strings.ToLower(string(family)),
			Labels:          map[string]string{discoveryv1.LabelServiceName: s.Name},
			ResourceVersion: fmt.Sprint(version),
		},
		AddressType: family,
	}
	for _, sp := range s.Spec.Ports {
		es.Ports = append(es.Ports, discoveryv1.EndpointPort{Name: &sp.Name, Protocol: &sp.Protocol, Port: &sp.TargetPort.IntVal})
	}
	for _, p := range pods {
		ready, node := true, p.Node.Name
		es.Endpoints = append(es.Endpoints, discoveryv1.Endpoint{
			Addresses:  []string{addr(p).String()},
			Conditions: discoveryv1.EndpointConditions{Ready: &ready},
			NodeName:   &node,
		})
	}
	return es
}

// nodeObject is the Node object of n, for the brain's topology.
func (e *serviceEnv) nodeObject(n *netnode.Node) *v1.Node {
	addrs := []v1.NodeAddress{{Type: v1.NodeInternalIP, Address: n.IP.String()}}
	if ip, ok := e.ip6[n.Name]; ok {
		addrs = append(addrs, v1.NodeAddress{Type: v1.NodeInternalIP, Address: ip.String()})
	}
	return &v1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: n.Name, Labels: map[string]string{v1.LabelHostname: n.Name}},
		Status:     v1.NodeStatus{Addresses: addrs},
	}
}

// serviceProxy is the service proxy of one node: a brain fed objects by
// the test and the nftables backend, with its conntrack cleaner, acting
// inside the node's namespace.
type serviceProxy struct {
	// owner is the test that outlives the proxy, for its logs.
	owner   *testing.T
	node    *netnode.Node
	opts    proxyOptions
	brain   *brain.Brain
	backend *nftables.Backend
	synced  bool
	// objects are the objects the brain saw last, by kind and name: what
	// a restarted agent reads from the apiserver.
	objects map[string]any
}

// proxyOptions are what the agent's config tells its proxy.
type proxyOptions struct {
	families     []proxy.IPFamily
	localTraffic []netip.Prefix
	serviceCIDRs []netip.Prefix
}

// startProxy makes node-1's proxy; nothing is programmed before sync.
// When the test fails it logs the table and conntrack.
func (e *serviceEnv) startProxy(t *testing.T) *serviceProxy {
	t.Helper()
	opts := proxyOptions{
		families:     []proxy.IPFamily{proxy.IPv4},
		localTraffic: []netip.Prefix{netip.MustParsePrefix(clusterCIDR)},
		serviceCIDRs: []netip.Prefix{netip.MustParsePrefix(serviceCIDR)},
	}
	if e.dualStack {
		opts.families = append(opts.families, proxy.IPv6)
		opts.localTraffic = append(opts.localTraffic, netip.MustParsePrefix(clusterCIDR6))
		opts.serviceCIDRs = append(opts.serviceCIDRs, netip.MustParsePrefix(serviceCIDR6))
	}
	p := newServiceProxy(t, e.node1, opts)
	p.apply(e.nodeObject(e.node1))
	n := e.node1
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		ctx := context.WithoutCancel(t.Context())
		t.Logf("nft list table inet %s in %s:\n%s", nftables.TableName, n.Name, dump(ctx, n, "nft", "list", "table", "inet", nftables.TableName))
		for _, fam := range []string{"ipv4", "ipv6"} {
			t.Logf("conntrack -L -f %s in %s:\n%s", fam, n.Name, dump(ctx, n, "conntrack", "-L", "-f", fam))
		}
	})
	return p
}

// newServiceProxy makes a proxy for n that has seen no object yet.
func newServiceProxy(t *testing.T, n *netnode.Node, opts proxyOptions) *serviceProxy {
	t.Helper()
	log := ktesting.NewLogger(t, ktesting.NewConfig(ktesting.Verbosity(2))).WithValues("node", n.Name)
	// As the agent's: New opens the backend's netlink socket, here inside
	// the node's namespace, and every sync goes through it.
	var backend *nftables.Backend
	err := n.Do(func() (err error) {
		backend, err = nftables.New(nftables.Options{
			Families:          opts.families,
			LocalTrafficCIDRs: opts.localTraffic,
			ServiceCIDRs:      opts.serviceCIDRs,
			Conntrack:         nsFlusher{inner: conntrack.New(conntrack.Options{Logger: log}), ns: n.NS},
			Logger:            log,
		})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return &serviceProxy{
		owner: t, node: n, opts: opts, backend: backend, objects: map[string]any{},
		brain: brain.New(brain.Options{NodeName: n.Name, Families: opts.families, Logger: log}),
	}
}

// restart throws this proxy away and starts another for the node, as a
// new agent process would: only the kernel's table and conntrack carry
// over. The new brain gets the objects this one saw last, changed ones
// (changed while the agent was down) in their place, and the new
// backend's first sync replaces the table.
func (p *serviceProxy) restart(t *testing.T, changed ...any) *serviceProxy {
	t.Helper()
	objects := maps.Clone(p.objects)
	for _, o := range changed {
		objects[objectKey(o)] = o
	}
	q := newServiceProxy(p.owner, p.node, p.opts)
	for _, k := range slices.Sorted(maps.Keys(objects)) {
		q.apply(objects[k])
	}
	q.sync(t)
	return q
}

// objectKey names o among the objects a proxy saw.
func objectKey(o any) string {
	m := o.(metav1.Object)
	return fmt.Sprintf("%T %s/%s", o, m.GetNamespace(), m.GetName())
}

// apply hands new objects (Services, EndpointSlices, Nodes) to the brain.
func (p *serviceProxy) apply(objs ...any) {
	for _, o := range objs {
		switch o := o.(type) {
		case *v1.Service:
			p.brain.OnServiceUpdate(nil, o)
		case *discoveryv1.EndpointSlice:
			p.brain.OnEndpointSliceUpdate(nil, o)
		case *v1.Node:
			p.brain.OnNodeUpdate(nil, o)
		default:
			panic(fmt.Sprintf("apply %T", o))
		}
		p.objects[objectKey(o)] = o
	}
}

// update hands the brain a changed EndpointSlice.
func (p *serviceProxy) update(old, new *discoveryv1.EndpointSlice) {
	p.brain.OnEndpointSliceUpdate(old, new)
	p.objects[objectKey(new)] = new
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
		t.Fatalf("sync %s: %v\n%s", p.node.Name, err, dump(context.WithoutCancel(t.Context()), p.node, "nft", "list", "table", "inet", nftables.TableName))
	}
	p.synced = true
}

// dump is a command's output in n, for failure messages.
func dump(ctx context.Context, n *netnode.Node, cmd string, args ...string) string {
	out, err := n.Run(ctx, cmd, args...)
	if err != nil {
		return fmt.Sprintf("%v: %s", err, out)
	}
	return out
}

// nsFlusher flushes the conntrack table of ns.
type nsFlusher struct {
	inner conntrack.Flusher
	ns    *netnode.NS
}

func (f nsFlusher) Flush(prev, next *proxy.State, changed map[proxy.ServicePortKey]struct{}) error {
	return f.ns.Do(func() error { return f.inner.Flush(prev, next, changed) })
}
