// Address plan (k is the slot New picks, 0 when nothing else runs):
//
//	underlay         192.168.(77+k).0/24; host (root netns) .1,
//	                 node-a .11, node-b .12
//	second env       the next free slot's /24, node-c .11
//	node-a pods      10.244.1.0/24 on bridge "nodenet" (made by hand here,
//	                 where the overlay dataplane would make it): gateway
//	                 10.244.1.1, source VIP 10.244.1.2 reserved, pods from .3
//	watched route    10.99.0.0/24 via node-b in node-a
package netnode_test

import (
	"net"
	"net/netip"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"

	"github.com/nodenet/nodenet/cni"
	"github.com/nodenet/nodenet/config"
	"github.com/nodenet/nodenet/test/netnode"
)

const converge = 10 * time.Second

func TestUnderlay(t *testing.T) {
	env := netnode.New(t, netnode.Options{Nodes: []string{"node-a", "node-b"}})
	a, b := env.Node("node-a"), env.Node("node-b")
	ctx := t.Context()

	t.Run("nodes get consecutive addresses from .11 in the slot's subnet", func(t *testing.T) {
		for i, n := range env.Nodes {
			if !env.Subnet.Contains(n.IP) || n.IP.As4()[3] != byte(11+i) {
				t.Errorf("%s has %s, want .%d in %s", n.Name, n.IP, 11+i, env.Subnet)
			}
		}
		if env.HostIP != env.Subnet.Addr().Next() {
			t.Errorf("host IP %s, want the first address of %s", env.HostIP, env.Subnet)
		}
	})

	t.Run("nodes ping each other and the host", func(t *testing.T) {
		for _, c := range []struct {
			from *netnode.Node
			to   netip.Addr
		}{{a, b.IP}, {b, a.IP}, {a, env.HostIP}} {
			if err := c.from.Ping(ctx, c.to); err != nil {
				t.Error(err)
			}
		}
	})

	t.Run("a node reaches a TCP server the host runs on its underlay address", func(t *testing.T) {
		l, err := net.Listen("tcp", net.JoinHostPort(env.HostIP.String(), "0"))
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		go func() {
			if c, err := l.Accept(); err == nil {
				_, _ = c.Write([]byte("hi"))
				c.Close()
			}
		}()
		port := l.Addr().(*net.TCPAddr).Port
		c, err := a.Dial(ctx, env.HostIP, port)
		if err != nil {
			t.Fatalf("node-a -> host %s:%d: %v", env.HostIP, port, err)
		}
		defer c.Close()
		buf := make([]byte, 2)
		if _, err := c.Read(buf); err != nil || string(buf) != "hi" {
			t.Errorf("read %q, %v; want hi", buf, err)
		}
	})

	t.Run("forwarding is on and IPv6 off in nodes", func(t *testing.T) {
		for key, want := range map[string]string{"net.ipv4.ip_forward": "1", "net.ipv6.conf.all.disable_ipv6": "1"} {
			out, err := a.Run(ctx, "sysctl", "-n", key)
			if err != nil || strings.TrimSpace(out) != want {
				t.Errorf("%s = %q (%v), want %s", key, strings.TrimSpace(out), err, want)
			}
		}
	})

	t.Run("Do runs fn inside the namespace and leaves the caller's alone", func(t *testing.T) {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		before, err := netns.Get()
		if err != nil {
			t.Fatal(err)
		}
		defer before.Close()
		var inside bool
		err = a.Do(func() error {
			cur, err := netns.Get()
			if err != nil {
				return err
			}
			defer cur.Close()
			inside = cur.Equal(a.Handle)
			return nil
		})
		if err != nil || !inside {
			t.Errorf("Do ran inside node-a: %v (%v)", inside, err)
		}
		after, err := netns.Get()
		if err != nil {
			t.Fatal(err)
		}
		defer after.Close()
		if !after.Equal(before) {
			t.Error("the caller's thread is in another namespace after Do")
		}
	})

	t.Run("the watch records a route and a permanent neighbour written in the node but not ARP", func(t *testing.T) {
		w := a.WatchNetlink(t)
		if _, err := a.Run(ctx, "ip", "neigh", "flush", "dev", "eth0"); err != nil {
			t.Fatal(err)
		}
		if err := a.Ping(ctx, b.IP); err != nil { // resolves b's MAC again
			t.Fatal(err)
		}
		if _, err := a.Run(ctx, "ip", "route", "add", "10.99.0.0/24", "via", b.IP.String()); err != nil {
			t.Fatal(err)
		}
		if _, err := a.Run(ctx, "ip", "neigh", "add", "10.99.0.1", "lladdr", "02:00:00:00:00:99", "dev", "eth0", "nud", "permanent"); err != nil {
			t.Fatal(err)
		}
		changes := w.Stop()
		all := strings.Join(changes, "\n")
		if len(changes) != 2 || !strings.Contains(all, "Dst: 10.99.0.0/24") ||
			!strings.Contains(all, "neigh add 10.99.0.1 lladdr 02:00:00:00:00:99") {
			t.Errorf("changes %q, want exactly the route to 10.99.0.0/24 and the neighbour 10.99.0.1", changes)
		}
	})
}

// TestWatchStaticLinks: deleting a permanent neighbour notifies it as
// FAILED, like the kernel's own failed resolutions; only a watch that
// names the link as static records it.
func TestWatchStaticLinks(t *testing.T) {
	env := netnode.New(t, netnode.Options{Nodes: []string{"node-a"}})
	a := env.Node("node-a")
	ctx := t.Context()
	for _, cmd := range [][]string{
		{"link", "add", "st0", "type", "veth", "peer", "name", "st1"},
		{"link", "set", "st0", "up"},
		{"neigh", "add", "10.98.0.1", "lladdr", "02:00:00:00:00:98", "dev", "st0", "nud", "permanent"},
	} {
		if _, err := a.Run(ctx, "ip", cmd...); err != nil {
			t.Fatal(err)
		}
	}
	plain, static := a.WatchNetlink(t), a.WatchNetlink(t, "st0", "no-such-link")
	if _, err := a.Run(ctx, "ip", "neigh", "del", "10.98.0.1", "dev", "st0"); err != nil {
		t.Fatal(err)
	}
	if got := plain.Stop(); len(got) != 0 {
		t.Errorf("the plain watch recorded %q, want nothing", got)
	}
	if got := strings.Join(static.Stop(), "\n"); !strings.Contains(got, "neigh del 10.98.0.1") {
		t.Errorf("the static watch recorded %q, want the deletion of 10.98.0.1", got)
	}
}

func TestEnvironmentsAreIsolatedAndCleanedUp(t *testing.T) {
	var first *netnode.Env
	var names []string
	t.Run("two environments at once get different subnets and cannot reach each other", func(t *testing.T) {
		first = netnode.New(t, netnode.Options{Nodes: []string{"node-a"}})
		second := netnode.New(t, netnode.Options{Nodes: []string{"node-c"}})
		if first.Subnet.Overlaps(second.Subnet) {
			t.Fatalf("subnets %s and %s overlap", first.Subnet, second.Subnet)
		}
		a, c := first.Node("node-a"), second.Node("node-c")
		if err := a.Ping(t.Context(), second.HostIP); err == nil {
			t.Errorf("node-a reached the other environment's host address %s", second.HostIP)
		}
		if err := c.Ping(t.Context(), second.HostIP); err != nil {
			t.Error(err)
		}
		names = []string{first.Underlay.Name, a.NS.Name, second.Underlay.Name, c.NS.Name}
	})
	t.Run("cleanup removes every namespace and the host's link", func(t *testing.T) {
		for _, name := range names {
			if _, err := os.Stat("/var/run/netns/" + name); err == nil {
				t.Errorf("namespace %s still exists", name)
			}
		}
		links, err := netlink.LinkList()
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range links {
			if strings.HasPrefix(l.Attrs().Name, "nnu") {
				for _, n := range names {
					if strings.HasPrefix(n, l.Attrs().Name+"-") {
						t.Errorf("host link %s still exists", l.Attrs().Name)
					}
				}
			}
		}
	})
}

// TestPodsThroughNodenetCNI wires pods with the real nodenet-cni binary
// into a bridge made by hand (the overlay dataplane's job in e2e tests).
func TestPodsThroughNodenetCNI(t *testing.T) {
	env := netnode.New(t, netnode.Options{Nodes: []string{"node-a"}})
	node := env.Node("node-a")
	ctx := t.Context()
	podCIDR := netip.MustParsePrefix("10.244.1.0/24")
	gw := netip.MustParseAddr("10.244.1.1")
	node.AddBridge(t, "nodenet", 0, netip.MustParsePrefix("10.244.1.1/24"))
	podNet := node.StartNodenetCNI(t, netnode.NodenetCNIOptions{})
	err := podNet.Server.SetNetwork(&cni.NodeNetwork{
		Mode:         config.NetworkModeOverlay,
		Name:         "nodenet",
		PodCIDRs:     []netip.Prefix{podCIDR},
		Gateways:     []netip.Addr{gw},
		SourceVIP:    netip.MustParseAddr("10.244.1.2"),
		MTU:          1450,
		ClusterCIDRs: []netip.Prefix{netip.MustParsePrefix("10.244.0.0/16")},
		ServiceCIDRs: []netip.Prefix{netip.MustParsePrefix("10.96.0.0/12")},
	})
	if err != nil {
		t.Fatal(err)
	}
	p1, p2 := podNet.AddPod(t, "web"), podNet.AddPod(t, "client")

	t.Run("pods get addresses in the pod CIDR", func(t *testing.T) {
		for _, p := range []*netnode.Pod{p1, p2} {
			if !podCIDR.Contains(p.IP) || p.IP == gw {
				t.Errorf("pod %s got %s", p.Name, p.IP)
			}
		}
	})
	t.Run("pods ping each other and the node", func(t *testing.T) {
		for _, err := range []error{p1.Ping(ctx, p2.IP), p2.Ping(ctx, gw), node.Ping(ctx, p1.IP)} {
			if err != nil {
				t.Error(err)
			}
		}
	})
	t.Run("a TCP exchange between pods succeeds", func(t *testing.T) {
		if err := netnode.TCPExchange(ctx, p2.NS, p1.NS, p1.IP, 8080); err != nil {
			t.Error(err)
		}
	})
	t.Run("a stream passes data until the path breaks", func(t *testing.T) {
		s := netnode.StartStream(t, netnode.StreamOptions{Server: p1.NS, Client: p2.NS, Addr: p1.IP, Port: 9000, Stall: time.Second})
		if err := s.WaitPassing(ctx, 5, converge); err != nil {
			t.Fatal(err)
		}
		// Cut the server pod off: the stream must notice.
		if _, err := p1.Run(ctx, "ip", "link", "set", "eth0", "down"); err != nil {
			t.Fatal(err)
		}
		if err := s.WaitPassing(ctx, 5, converge); err == nil {
			t.Error("the stream kept passing data with the server's link down")
		}
	})
	t.Run("DEL removes the pod's interface", func(t *testing.T) {
		if err := podNet.Del(ctx, p2); err != nil {
			t.Fatal(err)
		}
		if out, err := p2.Run(ctx, "ip", "-o", "link", "show", "eth0"); err == nil {
			t.Errorf("eth0 still in pod after DEL: %s", out)
		}
	})
}
