package agent

import (
	"context"
	"crypto/sha256"
	"fmt"
	"net"
	"net/netip"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
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
	ips, err := waitForNodeIPs(ctx, in.client, in.cfg, in.logger)
	if err != nil {
		return nil, err
	}
	_, version := simulatorFeatures(in.cfg)
	adapter := simulatedAdapter(ips)
	hostAdapter := hns.HostAdapter{Name: adapter.Name, MAC: dashMAC(adapter.MAC)}
	for _, ip := range ips {
		hostAdapter.IPs = append(hostAdapter.IPs, ip.String())
	}
	sim := hns.NewSimulator(hns.SimulatorOptions{Version: version, HostAdapters: []hns.HostAdapter{hostAdapter}})
	dp, err := buildHNS(hnsParts{
		hns:       sim,
		simulated: true,
		routes:    hostroute.NewFake(),
		adapters:  func(context.Context) ([]hnsnet.Adapter, error) { return []hnsnet.Adapter{adapter}, nil },
	}, in)
	if err != nil {
		return nil, err
	}
	dp.healthCheckPorts = false
	dp.dump = func(context.Context) ([]status.Section, error) {
		return []status.Section{{Title: "HNS (simulated)", Text: sim.Dump()}}, nil
	}
	in.logger.Info("Running on the HNS simulator: this shows what a Windows node would program; pods are not wired for real", "hnsVersion", version, "nodeIPs", ips)
	return dp, nil
}

// simulatedAdapter is an adapter holding ips, with the prefix length this
// host gives the address when it has it (else a host prefix), and a MAC
// derived from the first IP so it is the same on every run.
func simulatedAdapter(ips []netip.Addr) hnsnet.Adapter {
	a := hnsnet.Adapter{Name: simAdapter, Index: 1, MTU: 1500}
	for _, ip := range ips {
		a.IPs = append(a.IPs, hostPrefixOf(ip))
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
func waitForNodeIPs(ctx context.Context, client kubernetes.Interface, cfg *config.AgentConfiguration, logger klog.Logger) ([]netip.Addr, error) {
	var ips []netip.Addr
	logged := false
	err := wait.PollUntilContextCancel(ctx, time.Second, true, func(ctx context.Context) (bool, error) {
		n, err := client.CoreV1().Nodes().Get(ctx, cfg.NodeName, metav1.GetOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			if !logged {
				logger.Info("Reading this Node for the simulated host's adapter; retrying", "node", cfg.NodeName, "err", err.Error())
				logged = true
			}
			return false, nil
		}
		ips = nodeIPs(cfg, n)
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

// nodeIPs are the node's IPv4 then IPv6 address: nodeIPOverride's, else
// the Node's InternalIP (n may be nil).
func nodeIPs(cfg *config.AgentConfiguration, n *v1.Node) []netip.Addr {
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
