package agent

import (
	"context"
	"crypto/sha256"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/klog/v2"

	"github.com/nodenet/nodenet/agent/status"
	"github.com/nodenet/nodenet/config"
	"github.com/nodenet/nodenet/hns"
	"github.com/nodenet/nodenet/overlay"
	"github.com/nodenet/nodenet/overlay/hnsnet"
	"github.com/nodenet/nodenet/overlay/hostroute"
)

// simAdapter is the simulated host's one network adapter.
const simAdapter = "Ethernet"

// buildSim builds the Windows dataplane on an HNS simulator whose host has
// one adapter holding this node's IPs, so what it programs (node-port load
// balancers, outbound NAT) is what this node would get on Windows. It
// waits for this Node to have an IP.
func buildSim(ctx context.Context, in buildInputs) (*dataplane, error) {
	ips, err := waitForNodeIPs(ctx, in.nodeGetter(), in.cfg, in.logger)
	if err != nil {
		return nil, err
	}
	_, version := simulatorFeatures(in.cfg)
	_, _, dp, err := buildSimHost(simHost{version: version, ips: ips, prefix: hostPrefixOf}, in)
	if err != nil {
		return nil, err
	}
	in.logger.Info("Running on the HNS simulator: this shows what a Windows node would program; pods are not wired for real", "hnsVersion", version, "nodeIPs", ips)
	return dp, nil
}

// simHost describes a simulated Windows host.
type simHost struct {
	version hns.Version
	// build is the Windows build; zero: hns.BuildFor(version).
	build hns.OSBuild
	// ips are the node's addresses, on its one adapter, with the prefix
	// length prefix gives each.
	ips    []netip.Addr
	prefix func(netip.Addr) netip.Prefix
}

// buildSimHost builds the Windows dataplane (buildHNS: the agent's
// network, pod wiring and proxy backend) on a new simulator and host
// route table for h.
func buildSimHost(h simHost, in buildInputs) (*hns.Simulator, *hostroute.Fake, *dataplane, error) {
	adapter := simulatedAdapter(h.ips, h.prefix)
	hostAdapter := hns.HostAdapter{Name: adapter.Name, MAC: dashMAC(adapter.MAC)}
	for _, ip := range h.ips {
		hostAdapter.IPs = append(hostAdapter.IPs, ip.String())
	}
	sim := hns.NewSimulator(hns.SimulatorOptions{Version: h.version, OSBuild: h.build, HostAdapters: []hns.HostAdapter{hostAdapter}})
	routes := hostroute.NewFake()
	dp, err := buildHNS(hnsParts{
		hns:       sim,
		simulated: true,
		routes:    routes,
		adapters:  func(context.Context) ([]hnsnet.Adapter, error) { return []hnsnet.Adapter{adapter}, nil },
	}, in)
	if err != nil {
		return nil, nil, nil, err
	}
	dp.healthCheckPorts = false
	dp.dump = func(ctx context.Context) ([]status.Section, error) {
		sections := []status.Section{{Title: "HNS (simulated)", Text: sim.Dump()}}
		if text := DumpHostRoutes(ctx, routes); text != "" {
			sections = append(sections, status.Section{Title: "Host routes (simulated)", Text: text})
		}
		return sections, nil
	}
	return sim, routes, dp, nil
}

// DumpHostRoutes lists the routes of a simulated host's table, one a
// line ("" when it has none): the l2bridge routes to other nodes' pod
// CIDRs, which live there rather than in HNS.
func DumpHostRoutes(ctx context.Context, routes hostroute.Interface) string {
	list, err := routes.List(ctx)
	if err != nil {
		return fmt.Sprintf("(unreadable: %v)\n", err)
	}
	var b strings.Builder
	for _, r := range list {
		fmt.Fprintf(&b, "  %s\n", r)
	}
	return b.String()
}

// simulatedAdapter is an adapter holding ips, each with the prefix length
// prefix gives it (the agent: this host's, where it has the address), and
// a MAC derived from the first IP so it is the same on every run.
func simulatedAdapter(ips []netip.Addr, prefix func(netip.Addr) netip.Prefix) hnsnet.Adapter {
	a := hnsnet.Adapter{Name: simAdapter, Index: 1, MTU: 1500}
	for _, ip := range ips {
		a.IPs = append(a.IPs, prefix(ip))
	}
	sum := sha256.Sum256(ips[0].AsSlice())
	a.MAC = net.HardwareAddr{0x00, 0x15, 0x5d, sum[0], sum[1], sum[2]} // Hyper-V's OUI
	return a
}

// hostPrefixOf returns ip with the prefix length of the host interface
// address that equals it, or as a single-address prefix.
func hostPrefixOf(ip netip.Addr) netip.Prefix {
	addrs, _ := net.InterfaceAddrs()
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok {
			if have, ok := netip.AddrFromSlice(n.IP); ok && have.Unmap() == ip {
				ones, _ := n.Mask.Size()
				return netip.PrefixFrom(ip, ones)
			}
		}
	}
	return netip.PrefixFrom(ip, ip.BitLen())
}

// dashMAC is HNS's spelling of a MAC: 00-15-5D-...
func dashMAC(mac net.HardwareAddr) string {
	s := ""
	for i, b := range mac {
		if i > 0 {
			s += "-"
		}
		s += fmt.Sprintf("%02X", b)
	}
	return s
}

// waitForNodeIPs returns this node's IPv4 (and IPv6) address as the
// network part will choose them (nodeIPOverride, else the Node's
// InternalIP), waiting for the Node and its IPv4 address.
func waitForNodeIPs(ctx context.Context, nodes func(context.Context, string) (*v1.Node, error), cfg *config.AgentConfiguration, logger klog.Logger) ([]netip.Addr, error) {
	var ips []netip.Addr
	logged := false
	err := wait.PollUntilContextCancel(ctx, time.Second, true, func(ctx context.Context) (bool, error) {
		n, err := nodes(ctx, cfg.NodeName)
		if err != nil && !apierrors.IsNotFound(err) {
			if !logged {
				logger.Info("Reading this Node for the simulated host's adapter; retrying", "node", cfg.NodeName, "err", err.Error())
				logged = true
			}
			return false, nil
		}
		ips = NodeIPs(cfg, n)
		if len(ips) == 0 || !ips[0].Is4() {
			if !logged {
				logger.Info("Waiting for this Node and its IPv4 InternalIP (or nodeIPOverride)", "node", cfg.NodeName)
				logged = true
			}
			return false, nil
		}
		return true, nil
	})
	if err != nil {
		return nil, fmt.Errorf("waiting for Node %s's IP: %w", cfg.NodeName, err)
	}
	return ips, nil
}

// nodeGetter reads a Node: from the folder offline, else the API server.
func (in buildInputs) nodeGetter() func(context.Context, string) (*v1.Node, error) {
	if in.nodes != nil {
		return func(_ context.Context, name string) (*v1.Node, error) { return in.nodes.Get(name) }
	}
	return func(ctx context.Context, name string) (*v1.Node, error) {
		return in.client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
	}
}

// NodeIPs are the node's IPv4 then IPv6 address: nodeIPOverride's, else
// the Node's InternalIP (n may be nil).
func NodeIPs(cfg *config.AgentConfiguration, n *v1.Node) []netip.Addr {
	var out []netip.Addr
	for _, v6 := range []bool{false, true} {
		ip := netip.Addr{}
		for _, s := range cfg.NodeIPOverride {
			if o, err := netip.ParseAddr(s); err == nil && o.Is6() == v6 {
				ip = o
				break
			}
		}
		if !ip.IsValid() && n != nil {
			ip = overlay.NodeInternalIP(n, v6)
		}
		if ip.IsValid() {
			out = append(out, ip)
		}
	}
	return out
}
