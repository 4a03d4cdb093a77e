package cni_test

// Address plan: see harness_linux_test.go (node 10.244.1.0/24, gateway
// 10.244.1.1, source VIP 10.244.1.2, pods from 10.244.1.3).

import (
	"context"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/containernetworking/cni/libcni"
	"github.com/containernetworking/cni/pkg/types"
	"github.com/containernetworking/plugins/pkg/ns"
	"github.com/vishvananda/netlink"
)

func TestPodsOnOneNode(t *testing.T) {
	node := newTestNode(t, nodeOptions{})
	node.startServer(node.linuxWiring(), true)
	podA, podB := node.newPod("a"), node.newPod("b")
	ipA, ipB := node.mustAdd(podA), node.mustAdd(podB)
	gw := node.nw.Gateways[0]

	t.Run("pods get distinct addresses past the gateway and the source VIP", func(t *testing.T) {
		for _, ip := range []netip.Addr{ipA, ipB} {
			if !node.nw.PodCIDRs[0].Contains(ip) || ip == gw || ip == node.nw.SourceVIP {
				t.Errorf("pod got %s: outside %s or a reserved address", ip, node.nw.PodCIDRs[0])
			}
		}
		if ipA == ipB {
			t.Errorf("both pods got %s", ipA)
		}
	})
	t.Run("pods ping each other and the node", func(t *testing.T) {
		for _, c := range []struct {
			from string
			to   netip.Addr
		}{{podA.nsName(), ipB}, {podB.nsName(), ipA}, {podA.nsName(), gw}, {filepath.Base(node.netns.Path()), ipA}} {
			if err := ping(c.from, c.to); err != nil {
				t.Error(err)
			}
		}
	})
	t.Run("pods connect over TCP to each other and to the node", func(t *testing.T) {
		if err := tcpConnect(podA.netns, podB.netns, ipB, 8080); err != nil {
			t.Errorf("pod a -> pod b: %v", err)
		}
		if err := tcpConnect(podB.netns, node.netns, gw, 10250); err != nil {
			t.Errorf("pod b -> node: %v", err)
		}
	})
	t.Run("the pod interface has the node network's MTU", func(t *testing.T) {
		err := podA.netns.Do(func(ns.NetNS) error {
			l, err := netlink.LinkByName("eth0")
			if err != nil {
				return err
			}
			if l.Attrs().MTU != node.nw.MTU {
				t.Errorf("eth0 MTU %d, want %d", l.Attrs().MTU, node.nw.MTU)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	})
	t.Run("CHECK passes on an intact pod", func(t *testing.T) {
		if err := node.check(podA); err != nil {
			t.Errorf("CHECK: %v", err)
		}
	})
	t.Run("CHECK fails once the pod's default route is gone", func(t *testing.T) {
		err := podB.netns.Do(func(ns.NetNS) error {
			routes, err := netlink.RouteList(nil, netlink.FAMILY_V4)
			if err != nil {
				return err
			}
			for _, r := range routes {
				if r.Dst == nil || r.Dst.String() == "0.0.0.0/0" {
					return netlink.RouteDel(&r)
				}
			}
			t.Fatal("pod b has no default route to delete")
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		err = node.check(podB)
		if err == nil || !strings.Contains(err.Error(), "route") {
			t.Errorf("CHECK after deleting the route: %v, want an error about the route", err)
		}
	})
	t.Run("a hostPort from the runtime's portMappings reaches the pod through the node", func(t *testing.T) {
		podH := node.newPod("hostport")
		podH.rt.CapabilityArgs = map[string]any{"portMappings": []map[string]any{{"hostPort": 30080, "containerPort": 8080, "protocol": "tcp"}}}
		node.mustAdd(podH)
		if err := tcpConnectVia(podA.netns, podH.netns, gw, 30080, 8080); err != nil {
			t.Errorf("pod a -> node %s:30080 -> pod: %v", gw, err)
		}
		if err := node.check(podH); err != nil {
			t.Errorf("CHECK: %v", err)
		}
		if err := node.del(podH); err != nil {
			t.Fatalf("DEL: %v", err)
		}
		if err := tcpConnectVia(podA.netns, podH.netns, gw, 30080, 8080); err == nil {
			t.Error("the hostPort still answers after DEL")
		}
	})
	t.Run("a retried ADD returns the same address", func(t *testing.T) {
		if again := node.mustAdd(podA); again != ipA {
			t.Errorf("retried ADD got %s, want %s", again, ipA)
		}
	})
	t.Run("DEL removes the interface and frees the address, and a second DEL succeeds", func(t *testing.T) {
		if err := node.del(podB); err != nil {
			t.Fatalf("DEL: %v", err)
		}
		if err := node.del(podB); err != nil {
			t.Errorf("second DEL: %v", err)
		}
		if got := node.allocations(); !slices.Equal(got, []string{ipA.String()}) {
			t.Errorf("allocations after DEL %v, want only %s", got, ipA)
		}
		if ports := node.bridgePorts(); len(ports) != 1 {
			t.Errorf("bridge ports after DEL %v, want pod a's only", ports)
		}
		err := podB.netns.Do(func(ns.NetNS) error {
			if _, err := netlink.LinkByName("eth0"); err == nil {
				t.Error("pod b still has eth0")
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	})
	t.Run("DEL of a container the agent never saw succeeds", func(t *testing.T) {
		if err := node.del(node.newPod("never-added")); err != nil {
			t.Errorf("DEL: %v", err)
		}
	})
	t.Run("DEL succeeds after the pod's netns is gone", func(t *testing.T) {
		podC := node.newPod("c")
		node.mustAdd(podC)
		podC.close() // the runtime tore the sandbox down first
		if err := node.del(podC); err != nil {
			t.Fatalf("DEL with a stale netns path: %v", err)
		}
		if got := node.allocations(); len(got) != 1 {
			t.Errorf("allocations %v, want pod a's only", got)
		}
		if ports := node.bridgePorts(); len(ports) != 1 {
			t.Errorf("bridge ports %v, want pod a's only", ports)
		}
	})
	t.Run("DEL succeeds without a netns", func(t *testing.T) {
		podD := node.newPod("d")
		node.mustAdd(podD)
		rt := *podD.rt
		rt.NetNS = ""
		if err := node.client.DelNetworkList(context.Background(), node.list, &rt); err != nil {
			t.Fatalf("DEL without netns: %v", err)
		}
		if got := node.allocations(); len(got) != 1 {
			t.Errorf("allocations %v, want pod a's only", got)
		}
	})
}

func TestGC(t *testing.T) {
	node := newTestNode(t, nodeOptions{})
	node.startServer(node.linuxWiring(), true)
	pods := []*testPod{node.newPod("keep"), node.newPod("gone-1"), node.newPod("gone-2")}
	for _, p := range pods {
		node.mustAdd(p)
	}
	// The server protects attachments added in the last minute from GC
	// (an ADD may race the runtime's list), so age them: a fresh server
	// over the same IPAM store has no memory of recent ADDs, like an agent
	// restart.
	node.stop()
	node.stop = nil
	node.startServer(node.linuxWiring(), true)

	// A migrated node's leftovers, in host-local's format: the source VIP
	// reserved under a dummy ID by the old startup scripts, and an
	// old-format file (no ifname) of a pod host-local wired before the
	// migration, which the runtime still lists.
	poolDir := filepath.Join(node.ipamDir, node.nw.Name)
	leftovers := map[string]string{"10.244.1.2": "source-vip\r\neth0", "10.244.1.200": "ctr-legacy"}
	for name, owner := range leftovers {
		if err := os.WriteFile(filepath.Join(poolDir, name), []byte(owner), 0o600); err != nil {
			t.Fatal(err)
		}
	}

	err := node.client.GCNetworkList(context.Background(), node.list, &libcni.GCArgs{
		ValidAttachments: []types.GCAttachment{{ContainerID: pods[0].rt.ContainerID, IfName: "eth0"}, {ContainerID: "ctr-legacy", IfName: "eth0"}},
	})
	if err != nil {
		t.Fatalf("GC: %v", err)
	}
	if got := node.allocations(); len(got) != 3 {
		t.Errorf("allocations after GC %v, want the kept pod's, the source VIP's and the old-format one", got)
	}
	for name := range leftovers {
		if _, err := os.Stat(filepath.Join(poolDir, name)); err != nil {
			t.Errorf("GC removed %s: %v", name, err)
		}
	}
	if ports := node.bridgePorts(); len(ports) != 1 {
		t.Errorf("bridge ports after GC %v, want the kept pod's only", ports)
	}
	if err := node.check(pods[0]); err != nil {
		t.Errorf("the kept pod fails CHECK after GC: %v", err)
	}
}

func TestStatus(t *testing.T) {
	node := newTestNode(t, nodeOptions{})
	node.startServer(node.linuxWiring(), false)
	ctx := context.Background()
	t.Run("STATUS is not-available until the node network is set", func(t *testing.T) {
		err := node.client.GetStatusNetworkList(ctx, node.list)
		if cniCode(err) != types.ErrPluginNotAvailable {
			t.Errorf("STATUS: %v (code %d), want code %d", err, cniCode(err), types.ErrPluginNotAvailable)
		}
	})
	t.Run("ADD before the network is ready says try again later and leaves nothing", func(t *testing.T) {
		_, err := node.add(node.newPod("early"))
		if cniCode(err) != types.ErrTryAgainLater {
			t.Errorf("ADD: %v (code %d), want code %d", err, cniCode(err), types.ErrTryAgainLater)
		}
		if got := node.allocations(); len(got) != 0 {
			t.Errorf("allocations %v, want none", got)
		}
	})
	node.setNetwork()
	t.Run("STATUS succeeds once the network is set", func(t *testing.T) {
		if err := node.client.GetStatusNetworkList(ctx, node.list); err != nil {
			t.Errorf("STATUS: %v", err)
		}
	})
	t.Run("STATUS fails when the bridge disappears", func(t *testing.T) {
		err := node.netns.Do(func(ns.NetNS) error {
			l, err := netlink.LinkByName(bridgeName)
			if err != nil {
				return err
			}
			return netlink.LinkDel(l)
		})
		if err != nil {
			t.Fatal(err)
		}
		if err := node.client.GetStatusNetworkList(ctx, node.list); cniCode(err) != types.ErrPluginNotAvailable {
			t.Errorf("STATUS: %v, want code %d", err, types.ErrPluginNotAvailable)
		}
		_, err = node.add(node.newPod("no-bridge"))
		if cniCode(err) != types.ErrTryAgainLater {
			t.Errorf("ADD without the bridge: %v (code %d), want code %d", err, cniCode(err), types.ErrTryAgainLater)
		}
		if got := node.allocations(); len(got) != 0 {
			t.Errorf("allocations %v after a failed ADD, want none", got)
		}
	})
}

// TestCNITool drives the plugin with cnitool, a second real CNI client.
func TestCNITool(t *testing.T) {
	node := newTestNode(t, nodeOptions{})
	node.startServer(node.linuxWiring(), true)
	confDir := filepath.Join(node.dir, "net.d")
	if err := os.MkdirAll(confDir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(confDir, "10-nodenet.conflist"), node.list.Bytes, 0o644); err != nil {
		t.Fatal(err)
	}
	pod := node.newPod("tool")
	cnitool := func(args ...string) (string, error) {
		cmd := exec.Command(filepath.Join(binaries(t), "cnitool"), args...)
		cmd.Env = append(os.Environ(), "NETCONFPATH="+confDir, "CNI_PATH="+binaries(t))
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	out, err := cnitool("add", node.nw.Name, pod.netns.Path())
	if err != nil {
		t.Fatalf("cnitool add: %v\n%s", err, out)
	}
	if !strings.Contains(out, `"10.244.1.`) {
		t.Errorf("cnitool add printed no pod address:\n%s", out)
	}
	var ip netip.Addr
	err = pod.netns.Do(func(ns.NetNS) error {
		l, err := netlink.LinkByName("eth0")
		if err != nil {
			return err
		}
		addrs, err := netlink.AddrList(l, netlink.FAMILY_V4)
		if err != nil || len(addrs) != 1 {
			t.Fatalf("eth0 addresses %v (%v), want one", addrs, err)
		}
		ip, _ = netip.AddrFromSlice(addrs[0].IP.To4())
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := ping(filepath.Base(node.netns.Path()), ip); err != nil {
		t.Error(err)
	}
	if out, err := cnitool("check", node.nw.Name, pod.netns.Path()); err != nil {
		t.Errorf("cnitool check: %v\n%s", err, out)
	}
	if out, err := cnitool("del", node.nw.Name, pod.netns.Path()); err != nil {
		t.Errorf("cnitool del: %v\n%s", err, out)
	}
	if got := node.allocations(); len(got) != 0 {
		t.Errorf("allocations after cnitool del %v, want none", got)
	}
}
