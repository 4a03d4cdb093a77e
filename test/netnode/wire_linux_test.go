// Address plan: one node (underlay as in env_linux_test.go) with bridge
// "br-test" holding 10.250.0.1/24 and fd00:250::1/64; hand-wired pods at
// 10.250.0.10 and .11 (fd00:250::10 and ::11); 10.250.0.99 is nobody's.
package netnode_test

import (
	"net/netip"
	"os"
	"strings"
	"testing"

	"github.com/nodenet/nodenet/test/netnode"
)

func TestHandWiredPods(t *testing.T) {
	env := netnode.New(t, netnode.Options{Nodes: []string{"node-a"}, NoForwarding: true, EnableIPv6: true})
	node := env.Node("node-a")
	ctx := t.Context()
	gw4, gw6 := netip.MustParseAddr("10.250.0.1"), netip.MustParseAddr("fd00:250::1")
	node.AddBridge(t, "br-test", 1400, netip.PrefixFrom(gw4, 24), netip.PrefixFrom(gw6, 64))
	wire := func(name, v4, v6 string) *netnode.Pod {
		return node.WirePod(t, name, netnode.PodWiring{
			Bridge:   "br-test",
			Addrs:    []netip.Prefix{netip.MustParsePrefix(v4), netip.MustParsePrefix(v6)},
			Gateways: []netip.Addr{gw4, gw6},
			MTU:      1400,
		})
	}
	p1 := wire("p1", "10.250.0.10/24", "fd00:250::10/64")
	p2 := wire("p2", "10.250.0.11/24", "fd00:250::11/64")

	t.Run("NoForwarding leaves forwarding off in the node", func(t *testing.T) {
		out, err := node.Run(ctx, "sysctl", "-n", "net.ipv4.ip_forward")
		if err != nil || strings.TrimSpace(out) != "0" {
			t.Errorf("ip_forward = %q (%v), want 0", strings.TrimSpace(out), err)
		}
	})
	t.Run("a wired pod has its first address as IP, the MTU and both default routes", func(t *testing.T) {
		if p1.IP != netip.MustParseAddr("10.250.0.10") {
			t.Errorf("IP %s, want 10.250.0.10", p1.IP)
		}
		for _, c := range []struct{ args, want string }{
			{"-o link show eth0", "mtu 1400"},
			{"-4 route show default", "via 10.250.0.1"},
			{"-6 route show default", "via fd00:250::1"},
		} {
			out, err := p1.Run(ctx, "ip", strings.Fields(c.args)...)
			if err != nil || !strings.Contains(out, c.want) {
				t.Errorf("ip %s: %q (%v), want %q", c.args, out, err, c.want)
			}
		}
	})
	t.Run("wired pods reach each other and the bridge in both families", func(t *testing.T) {
		for _, dst := range []string{"10.250.0.11", "fd00:250::11", "10.250.0.1", "fd00:250::1"} {
			if err := p1.Ping(ctx, netip.MustParseAddr(dst)); err != nil {
				t.Error(err)
			}
		}
		if err := netnode.TCPExchange(ctx, p1.NS, p2.NS, p2.IP, 8080); err != nil {
			t.Error(err)
		}
	})
	t.Run("NoPing fails on an answer and passes on silence", func(t *testing.T) {
		if err := p1.NoPing(ctx, p2.IP); err == nil {
			t.Error("NoPing passed on a pod that answers")
		}
		if err := p1.NoPing(ctx, netip.MustParseAddr("10.250.0.99")); err != nil {
			t.Error(err)
		}
	})
	t.Run("Close removes the namespace at once, and again does nothing", func(t *testing.T) {
		for range 2 {
			if err := p2.Close(); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := os.Stat(p2.Path); err == nil {
			t.Errorf("%s still exists", p2.Path)
		}
		if err := p1.NoPing(ctx, netip.MustParseAddr("10.250.0.11")); err != nil {
			t.Error(err)
		}
	})
}
