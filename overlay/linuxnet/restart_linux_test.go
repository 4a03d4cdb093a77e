package linuxnet_test

// Address plan: see harness_linux_test.go (underlay 172.30.0.0/24, node i
// at 172.30.0.(10+i) with pod CIDR 10.244.i.0/24, pods from .11). The
// marker written after a restart to flush the netlink subscriptions is
// bridge "mk" with 10.99.99.1/32 and neighbour 10.99.99.2 in the node's
// namespace.

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/nodenet/nodenet/config"
	"github.com/nodenet/nodenet/overlay"
)

func TestRestartWritesNothing(t *testing.T) {
	for _, mode := range []config.NetworkMode{config.NetworkModeOverlay, config.NetworkModeL2Bridge} {
		t.Run(fmt.Sprintf("in %s mode a new agent adopts the network without a write and a TCP connection survives", mode), func(t *testing.T) {
			t.Parallel()
			u := newUnderlay(t)
			a, b := u.addNode(t, mode), u.addNode(t, mode)
			a.ensure(t)
			b.ensure(t)
			meshOf(t, a, b)
			pa, pb := a.addPod(t), b.addPod(t)

			addr := netip.AddrPortFrom(pb.ip, 9090)
			l := listen(t, pb.testNS, addr)
			go echo(l)
			conn := dial(t, pa.testNS, addr)
			traffic := startPingPong(t, conn)
			traffic.waitRounds(t, 3)

			for _, n := range []*node{a, b} {
				watch := watchNode(t, n)
				before := n.local
				n.nw.Close()
				n.nw = n.newNetwork(t)
				got := n.ensure(t)
				if got.Writes != 0 {
					t.Errorf("node %d: EnsureLocal after a restart made %d writes, want 0", n.idx, got.Writes)
				}
				got.Writes = before.Writes
				if diff := cmp.Diff(before, got, addrCmp); diff != "" {
					t.Errorf("node %d: adopted network differs (-before +after):\n%s", n.idx, diff)
				}
				var remotes []overlay.RemoteNode
				for _, o := range []*node{a, b} {
					if o != n {
						remotes = append(remotes, o.remote())
					}
				}
				res, err := n.nw.SyncRemotes(context.Background(), remotes)
				if err != nil {
					t.Fatal(err)
				}
				if res != (overlay.SyncResult{}) {
					t.Errorf("node %d: SyncRemotes after a restart = %+v, want nothing done", n.idx, res)
				}
				watch.expectQuiet(t)
			}

			traffic.waitRounds(t, traffic.rounds()+3)
			if err := traffic.stop(); err != nil {
				t.Errorf("the TCP connection broke across the restart: %v", err)
			}
		})
	}
}

func echo(l net.Listener) {
	for {
		c, err := l.Accept()
		if err != nil {
			return
		}
		go func() {
			defer c.Close()
			_, _ = io.Copy(c, c)
		}()
	}
}

// pingPong sends a numbered line and waits for its echo, over and over,
// until stopped; any error ends it.
type pingPong struct {
	mu     sync.Mutex
	n      int
	err    error
	done   chan struct{}
	exited chan struct{}
}

func startPingPong(t *testing.T, c net.Conn) *pingPong {
	p := &pingPong{done: make(chan struct{}), exited: make(chan struct{})}
	go func() {
		defer close(p.exited)
		r := bufio.NewReader(c)
		for i := 0; ; i++ {
			select {
			case <-p.done:
				return
			default:
			}
			_ = c.SetDeadline(time.Now().Add(10 * time.Second))
			want := fmt.Sprintf("line %d\n", i)
			_, err := io.WriteString(c, want)
			var got string
			if err == nil {
				got, err = r.ReadString('\n')
			}
			if err == nil && got != want {
				err = fmt.Errorf("echo %q, want %q", got, want)
			}
			p.mu.Lock()
			p.n, p.err = i+1, err
			p.mu.Unlock()
			if err != nil {
				return
			}
		}
	}()
	t.Cleanup(func() { _ = p.stop() })
	return p
}

func (p *pingPong) rounds() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.n
}

// waitRounds waits until at least n round trips completed.
func (p *pingPong) waitRounds(t *testing.T, n int) {
	t.Helper()
	deadline := time.After(20 * time.Second)
	for {
		p.mu.Lock()
		got, err := p.n, p.err
		p.mu.Unlock()
		if err != nil {
			t.Fatalf("TCP round trip %d failed: %v", got, err)
		}
		if got >= n {
			return
		}
		select {
		case <-deadline:
			t.Fatalf("only %d TCP round trips, waited for %d", got, n)
		case <-time.After(10 * time.Millisecond):
		}
	}
}

func (p *pingPong) stop() error {
	select {
	case <-p.done:
	default:
		close(p.done)
	}
	<-p.exited
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.err
}

// nodeWatch holds netlink subscriptions in a node's namespace, to prove
// with the kernel's own notifications that nothing was written.
type nodeWatch struct {
	n      *node
	links  chan netlink.LinkUpdate
	addrs  chan netlink.AddrUpdate
	routes chan netlink.RouteUpdate
	neighs chan netlink.NeighUpdate
}

func watchNode(t *testing.T, n *node) *nodeWatch {
	t.Helper()
	w := &nodeWatch{n: n,
		links:  make(chan netlink.LinkUpdate, 1024),
		addrs:  make(chan netlink.AddrUpdate, 1024),
		routes: make(chan netlink.RouteUpdate, 1024),
		neighs: make(chan netlink.NeighUpdate, 1024),
	}
	done := make(chan struct{})
	t.Cleanup(func() { close(done) })
	for _, err := range []error{
		netlink.LinkSubscribeAt(n.h, w.links, done),
		netlink.AddrSubscribeAt(n.h, w.addrs, done),
		netlink.RouteSubscribeAt(n.h, w.routes, done),
		netlink.NeighSubscribeAt(n.h, w.neighs, done),
	} {
		if err != nil {
			t.Fatalf("subscribe in node %d: %v", n.idx, err)
		}
	}
	return w
}

// expectQuiet writes a marker (a bridge, an address, a neighbour) and
// fails on any notification about the network that arrives before it.
// Only kernel-made churn is ignored: neighbours the kernel resolves on
// its own (not permanent, not on the vxlan device).
func (w *nodeWatch) expectQuiet(t *testing.T) {
	t.Helper()
	n := w.n
	mk := &netlink.Bridge{LinkAttrs: netlink.LinkAttrs{Name: "mk"}}
	if err := n.nl.LinkAdd(mk); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = n.nl.LinkDel(mk) }()
	n.setUp(t, "mk")
	n.addAddr(t, "mk", netip.MustParsePrefix("10.99.99.1/32"))
	mkIdx := n.link(t, "mk").Attrs().Index
	marker := &netlink.Neigh{LinkIndex: mkIdx, Family: netlink.FAMILY_V4, State: netlink.NUD_PERMANENT,
		IP: net.ParseIP("10.99.99.2"), HardwareAddr: net.HardwareAddr{2, 0, 0, 0, 0, 1}}
	if err := n.nl.NeighSet(marker); err != nil {
		t.Fatal(err)
	}
	vx, _ := n.nl.LinkByName(vxlanName)
	vxIdx := -1
	if vx != nil {
		vxIdx = vx.Attrs().Index
	}
	timeout := time.After(10 * time.Second)
	for got := false; !got; {
		select {
		case u := <-w.links:
			if got = u.Attrs().Index == mkIdx; !got {
				t.Errorf("node %d: link notification after a restart: %s %s", n.idx, msgType(u.Header.Type), u.Attrs().Name)
			}
		case <-timeout:
			t.Fatal("no link notification for the marker")
		}
	}
	for got := false; !got; {
		select {
		case u := <-w.addrs:
			if got = u.LinkIndex == mkIdx; !got {
				t.Errorf("node %d: address notification after a restart: new=%v %v", n.idx, u.NewAddr, u.LinkAddress.String())
			}
		case <-timeout:
			t.Fatal("no address notification for the marker")
		}
	}
	for got := false; !got; {
		select {
		case u := <-w.routes:
			if got = u.LinkIndex == mkIdx; !got {
				t.Errorf("node %d: route notification after a restart: %s %v", n.idx, msgType(u.Type), u.Route)
			}
		case <-timeout:
			t.Fatal("no route notification for the marker")
		}
	}
	for got := false; !got; {
		select {
		case u := <-w.neighs:
			if got = u.LinkIndex == mkIdx; got {
				break
			}
			if u.LinkIndex == vxIdx || u.State&netlink.NUD_PERMANENT != 0 || u.Family == unix.AF_BRIDGE && u.Flags&netlink.NTF_SELF != 0 {
				t.Errorf("node %d: neighbour notification after a restart: %s %+v", n.idx, msgType(u.Type), u.Neigh)
			}
		case <-timeout:
			t.Fatal("no neighbour notification for the marker")
		}
	}
}

func msgType[T ~uint16](t T) string {
	switch uint16(t) {
	case unix.RTM_NEWLINK, unix.RTM_NEWADDR, unix.RTM_NEWROUTE, unix.RTM_NEWNEIGH:
		return "new"
	case unix.RTM_DELLINK, unix.RTM_DELADDR, unix.RTM_DELROUTE, unix.RTM_DELNEIGH:
		return "del"
	}
	return fmt.Sprint(uint16(t))
}
