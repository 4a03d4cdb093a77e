package cni_test

// Address plan: see node_linux_test.go (node 10.244.1.0/24, gateway
// 10.244.1.1, source VIP 10.244.1.2, pods from 10.244.1.3).

import (
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/containernetworking/cni/pkg/types"
	"github.com/vishvananda/netlink"

	"github.com/nodenet/nodenet/test/netnode"
)

func TestPodsOnOneNode(t *testing.T) {
	node := newTestNode(t, podCIDR)
	node.startCNI(t, netnode.NodenetCNIOptions{Network: node.nw})
	ctx := t.Context()
	podA, podB := node.AddPod(t, "a"), node.AddPod(t, "b")
	ipA, ipB := podA.IP, podB.IP
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
			from *netnode.NS
			to   netip.Addr
		}{{podA.NS, ipB}, {podB.NS, ipA}, {podA.NS, gw}, {node.NS, ipA}} {
			if err := c.from.Ping(ctx, c.to); err != nil {
				t.Error(err)
			}
		}
	})
	t.Run("pods connect over TCP to each other and to the node", func(t *testing.T) {
		if err := netnode.TCPExchange(ctx, podA.NS, podB.NS, ipB, 8080); err != nil {
			t.Errorf("pod a -> pod b: %v", err)
		}
		if err := netnode.TCPExchange(ctx, podB.NS, node.NS, gw, 10250); err != nil {
			t.Errorf("pod b -> node: %v", err)
		}
	})
	t.Run("the pod interface has the node network's MTU", func(t *testing.T) {
		l, err := eth0(podA)
		if err != nil {
			t.Fatal(err)
		}
		if l.Attrs().MTU != node.nw.MTU {
			t.Errorf("eth0 MTU %d, want %d", l.Attrs().MTU, node.nw.MTU)
		}
	})
	t.Run("CHECK passes on an intact pod", func(t *testing.T) {
		if err := node.Check(ctx, podA); err != nil {
			t.Errorf("CHECK: %v", err)
		}
	})
	t.Run("CHECK fails once the pod's default route is gone", func(t *testing.T) {
		deleted := false
		err := podB.Do(func() error {
			routes, err := netlink.RouteList(nil, netlink.FAMILY_V4)
			if err != nil {
				return err
			}
			for _, r := range routes {
				if r.Dst == nil || r.Dst.String() == "0.0.0.0/0" {
					deleted = true
					return netlink.RouteDel(&r)
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if !deleted {
			t.Fatal("pod b has no default route to delete")
		}
		err = node.Check(ctx, podB)
		if err == nil || !strings.Contains(err.Error(), "route") {
			t.Errorf("CHECK after deleting the route: %v, want an error about the route", err)
		}
	})
	t.Run("a hostPort from the runtime's portMappings reaches the pod through the node", func(t *testing.T) {
		podH := node.NewPod(t, "hostport")
		podH.Conf.CapabilityArgs = map[string]any{"portMappings": []map[string]any{{"hostPort": 30080, "containerPort": 8080, "protocol": "tcp"}}}
		if err := node.Add(ctx, podH); err != nil {
			t.Fatal(err)
		}
		if err := netnode.TCPExchangeVia(ctx, podA.NS, podH.NS, gw, 30080, 8080); err != nil {
			t.Errorf("pod a -> node %s:30080 -> pod: %v", gw, err)
		}
		if err := node.Check(ctx, podH); err != nil {
			t.Errorf("CHECK: %v", err)
		}
		if err := node.Del(ctx, podH); err != nil {
			t.Fatalf("DEL: %v", err)
		}
		if err := netnode.TCPExchangeVia(ctx, podA.NS, podH.NS, gw, 30080, 8080); err == nil {
			t.Error("the hostPort still answers after DEL")
		}
	})
	t.Run("a retried ADD returns the same address", func(t *testing.T) {
		if err := node.Add(ctx, podA); err != nil {
			t.Fatal(err)
		}
		if podA.IP != ipA {
			t.Errorf("retried ADD got %s, want %s", podA.IP, ipA)
		}
	})
	t.Run("DEL removes the interface and frees the address, and a second DEL succeeds", func(t *testing.T) {
		if err := node.Del(ctx, podB); err != nil {
			t.Fatalf("DEL: %v", err)
		}
		if err := node.Del(ctx, podB); err != nil {
			t.Errorf("second DEL: %v", err)
		}
		if got := node.allocations(); !slices.Equal(got, []string{ipA.String()}) {
			t.Errorf("allocations after DEL %v, want only %s", got, ipA)
		}
		if ports := node.bridgePorts(t); len(ports) != 1 {
			t.Errorf("bridge ports after DEL %v, want pod a's only", ports)
		}
		if _, err := eth0(podB); err == nil {
			t.Error("pod b still has eth0")
		}
	})
	t.Run("DEL of a container the agent never saw succeeds", func(t *testing.T) {
		if err := node.Del(ctx, node.NewPod(t, "never-added")); err != nil {
			t.Errorf("DEL: %v", err)
		}
	})
	t.Run("DEL succeeds after the pod's netns is gone", func(t *testing.T) {
		podC := node.AddPod(t, "c")
		if err := podC.Close(); err != nil { // the runtime tore the sandbox down first
			t.Fatal(err)
		}
		if err := node.Del(ctx, podC); err != nil {
			t.Fatalf("DEL with a stale netns path: %v", err)
		}
		if got := node.allocations(); len(got) != 1 {
			t.Errorf("allocations %v, want pod a's only", got)
		}
		if ports := node.bridgePorts(t); len(ports) != 1 {
			t.Errorf("bridge ports %v, want pod a's only", ports)
		}
	})
	t.Run("DEL succeeds without a netns", func(t *testing.T) {
		podD := node.AddPod(t, "d")
		conf := *podD.Conf
		conf.NetNS = ""
		noNetNS := *podD
		noNetNS.Conf = &conf
		if err := node.Del(ctx, &noNetNS); err != nil {
			t.Fatalf("DEL without netns: %v", err)
		}
		if got := node.allocations(); len(got) != 1 {
			t.Errorf("allocations %v, want pod a's only", got)
		}
	})
}

func TestGC(t *testing.T) {
	node := newTestNode(t, podCIDR)
	node.startCNI(t, netnode.NodenetCNIOptions{Network: node.nw})
	pods := []*netnode.Pod{node.AddPod(t, "keep"), node.AddPod(t, "gone-1"), node.AddPod(t, "gone-2")}
	// The server protects attachments added in the last minute from GC
	// (an ADD may race the runtime's list), so age them: a fresh server
	// over the same IPAM store has no memory of recent ADDs, like an agent
	// restart.
	node.Stop()
	node.Start(t)

	// A migrated node's leftovers, in host-local's format: the source VIP
	// reserved under a dummy ID by the old startup scripts, and an
	// old-format file (no ifname) of a pod host-local wired before the
	// migration, which the runtime still lists.
	poolDir := filepath.Join(node.IPAMDir, node.nw.Name)
	leftovers := map[string]string{"10.244.1.2": "source-vip\r\neth0", "10.244.1.200": "ctr-legacy"}
	for name, owner := range leftovers {
		if err := os.WriteFile(filepath.Join(poolDir, name), []byte(owner), 0o600); err != nil {
			t.Fatal(err)
		}
	}

	err := node.GC(t.Context(), []types.GCAttachment{{ContainerID: pods[0].Conf.ContainerID, IfName: "eth0"}, {ContainerID: "ctr-legacy", IfName: "eth0"}})
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
	if ports := node.bridgePorts(t); len(ports) != 1 {
		t.Errorf("bridge ports after GC %v, want the kept pod's only", ports)
	}
	if err := node.Check(t.Context(), pods[0]); err != nil {
		t.Errorf("the kept pod fails CHECK after GC: %v", err)
	}
}

func TestStatus(t *testing.T) {
	node := newTestNode(t, podCIDR)
	node.startCNI(t, netnode.NodenetCNIOptions{}) // no node network yet
	ctx := t.Context()
	t.Run("STATUS is not-available until the node network is set", func(t *testing.T) {
		err := node.Status(ctx)
		if cniCode(err) != types.ErrPluginNotAvailable {
			t.Errorf("STATUS: %v (code %d), want code %d", err, cniCode(err), types.ErrPluginNotAvailable)
		}
	})
	t.Run("ADD before the network is ready says try again later and leaves nothing", func(t *testing.T) {
		err := node.Add(ctx, node.NewPod(t, "early"))
		if cniCode(err) != types.ErrTryAgainLater {
			t.Errorf("ADD: %v (code %d), want code %d", err, cniCode(err), types.ErrTryAgainLater)
		}
		if got := node.allocations(); len(got) != 0 {
			t.Errorf("allocations %v, want none", got)
		}
	})
	if err := node.Server.SetNetwork(node.nw); err != nil {
		t.Fatal(err)
	}
	t.Run("STATUS succeeds once the network is set", func(t *testing.T) {
		if err := node.Status(ctx); err != nil {
			t.Errorf("STATUS: %v", err)
		}
	})
	t.Run("STATUS fails when the bridge disappears", func(t *testing.T) {
		if _, err := node.Run(ctx, "ip", "link", "del", bridgeName); err != nil {
			t.Fatal(err)
		}
		if err := node.Status(ctx); cniCode(err) != types.ErrPluginNotAvailable {
			t.Errorf("STATUS: %v, want code %d", err, types.ErrPluginNotAvailable)
		}
		err := node.Add(ctx, node.NewPod(t, "no-bridge"))
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
	node := newTestNode(t, podCIDR)
	node.startCNI(t, netnode.NodenetCNIOptions{Network: node.nw})
	confDir := t.TempDir()
	if err := os.WriteFile(filepath.Join(confDir, "10-nodenet.conflist"), node.Conflist(), 0o644); err != nil {
		t.Fatal(err)
	}
	pod := node.NewPod(t, "tool")
	cnitool := func(args ...string) (string, error) {
		cmd := exec.Command(filepath.Join(binaries(t), "cnitool"), args...)
		cmd.Env = append(os.Environ(), "NETCONFPATH="+confDir, "CNI_PATH="+binaries(t))
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	out, err := cnitool("add", node.nw.Name, pod.Path)
	if err != nil {
		t.Fatalf("cnitool add: %v\n%s", err, out)
	}
	if !strings.Contains(out, `"10.244.1.`) {
		t.Errorf("cnitool add printed no pod address:\n%s", out)
	}
	l, err := eth0(pod)
	if err != nil {
		t.Fatal(err)
	}
	var addrs []netlink.Addr
	err = pod.Do(func() (err error) {
		addrs, err = netlink.AddrList(l, netlink.FAMILY_V4)
		return err
	})
	if err != nil || len(addrs) != 1 {
		t.Fatalf("eth0 addresses %v (%v), want one", addrs, err)
	}
	ip, _ := netip.AddrFromSlice(addrs[0].IP.To4())
	if err := node.Ping(t.Context(), ip); err != nil {
		t.Error(err)
	}
	if out, err := cnitool("check", node.nw.Name, pod.Path); err != nil {
		t.Errorf("cnitool check: %v\n%s", err, out)
	}
	if out, err := cnitool("del", node.nw.Name, pod.Path); err != nil {
		t.Errorf("cnitool del: %v\n%s", err, out)
	}
	if got := node.allocations(); len(got) != 0 {
		t.Errorf("allocations after cnitool del %v, want none", got)
	}
}
