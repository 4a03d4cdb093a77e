//go:build linux

package main

import (
	"context"
	"fmt"
	"os/exec"
	"strings"
)

// The bench network lives in 198.18.0.0/15, which RFC 2544 reserves for
// benchmarks, so it clashes with nothing a test or the host uses. The host
// owns a bridge with hostAddr (the apiserver listens there); each proxy's
// namespace gets one veth on that bridge with nodeAddr, the Node's
// InternalIP, where its metrics are scraped from.
const (
	bridgeName = "nnbench0"
	hostAddr   = "198.18.0.1"
	nodeAddr   = "198.18.0.2"
	netPrefix  = "/24"
	nsPrefix   = "nnbench-"
)

// ip runs ip(8) and returns its error with its output.
func ip(ctx context.Context, args ...string) error {
	out, err := exec.CommandContext(ctx, "ip", args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("ip %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

// setupBridge makes the host side, replacing what a killed run left.
func setupBridge(ctx context.Context) error {
	deleteBridge(ctx)
	for _, args := range [][]string{
		{"link", "add", bridgeName, "type", "bridge"},
		{"addr", "add", hostAddr + netPrefix, "dev", bridgeName},
		{"link", "set", bridgeName, "up"},
	} {
		if err := ip(ctx, args...); err != nil {
			return err
		}
	}
	return nil
}

func deleteBridge(ctx context.Context) { _ = ip(ctx, "link", "del", bridgeName) }

// node is one proxy's network namespace.
type node struct {
	ns string
}

// newNode makes a fresh namespace nnbench-<name> with lo up and eth0
// (nodeAddr) on the bench bridge.
func newNode(ctx context.Context, name string) (*node, error) {
	n := &node{ns: nsPrefix + name}
	n.delete(ctx)
	hostVeth := "nnb-" + name
	if len(hostVeth) > 15 {
		hostVeth = hostVeth[:15]
	}
	for _, args := range [][]string{
		{"netns", "add", n.ns},
		{"link", "add", hostVeth, "type", "veth", "peer", "name", "eth0", "netns", n.ns},
		{"link", "set", hostVeth, "master", bridgeName, "up"},
		{"-n", n.ns, "addr", "add", nodeAddr + netPrefix, "dev", "eth0"},
		{"-n", n.ns, "link", "set", "eth0", "up"},
		{"-n", n.ns, "link", "set", "lo", "up"},
	} {
		if err := ip(ctx, args...); err != nil {
			n.delete(ctx)
			return nil, err
		}
	}
	return n, nil
}

// delete removes the namespace; its veth pair and nftables go with it.
func (n *node) delete(ctx context.Context) { _ = ip(ctx, "netns", "del", n.ns) }

// command returns argv run inside the namespace.
func (n *node) command(argv ...string) []string {
	return append([]string{"ip", "netns", "exec", n.ns}, argv...)
}
