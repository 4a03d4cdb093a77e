package nftables

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os/exec"
	"syscall"
	"testing"
	"time"

	"github.com/vishvananda/netns"

	"github.com/nodenet/nodenet/internal/nsexec"
	"github.com/nodenet/nodenet/proxy"
)

// A smoke test of the rule shapes with real connections, all inside one
// namespace: the "endpoints" listen on addresses of lo, the service range
// is routed out of a veth (as to a default gateway: a reject of a packet
// routed to lo never reaches the socket), and connections come from the
// namespace itself (the output path). The full packet tests, with pods in
// namespaces of their own, live elsewhere.
func TestRealConnectionsFollowTheRules(t *testing.T) {
	ns := connectableNetns(t)
	local := eps(ep("10.244.1.5:8080", true), ep("10.244.1.6:8080", true))
	s := state(
		port("default/web:/TCP", "10.96.0.10", 80, local, nodePort(30080)),
		port("default/sticky:/TCP", "10.96.0.50", 80, local, affinity(time.Hour)),
		port("default/empty:/TCP", "10.96.0.60", 80, nil),
	)
	b, err := newKernelBackend(ns, testOptions)
	if err == nil {
		err = nsexec.Do(ns, func() error { return b.Sync(context.Background(), proxy.Update{State: s, Full: true}) })
	}
	if err != nil {
		t.Fatal(err)
	}

	seen := func(dst string, n int) map[string]int {
		t.Helper()
		got := map[string]int{}
		for range n {
			who, err := ask(ns, dst)
			if err != nil {
				t.Fatalf("%s: %v", dst, err)
			}
			got[who]++
		}
		return got
	}
	if got := seen("10.96.0.10:80", 40); len(got) != 2 {
		t.Errorf("40 connections to the cluster IP reached %v, want both endpoints", got)
	}
	if got := seen("192.168.0.10:30080", 40); len(got) != 2 {
		t.Errorf("40 connections to the node port reached %v, want both endpoints", got)
	}
	if got := seen("10.96.0.50:80", 20); len(got) != 1 {
		t.Errorf("20 connections to the ClientIP-affinity service reached %v, want one endpoint", got)
	}
	for dst, what := range map[string]string{
		"10.96.0.60:80": "a service without endpoints",
		"10.96.0.10:81": "an unknown port of a cluster IP",
	} {
		if _, err := ask(ns, dst); !errors.Is(err, syscall.ECONNREFUSED) {
			t.Errorf("%s: got %v, want connection refused (a reject)", what, err)
		}
	}
}

// connectableNetns returns a namespace where 10.244.1.5:8080 and
// 10.244.1.6:8080 answer connections with their address, 192.168.0.10 is
// the node's address, and 10.96.0.0/16 is routed out of a veth.
func connectableNetns(t *testing.T) netns.NsHandle {
	t.Helper()
	ns := newNetns(t)
	run := func(args ...string) {
		t.Helper()
		err := nsexec.Do(ns, func() error {
			if out, err := exec.Command(args[0], args[1:]...).CombinedOutput(); err != nil {
				return fmt.Errorf("%v: %w: %s", args, err, out)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	run("ip", "link", "set", "lo", "up")
	for _, a := range []string{"10.244.1.5/32", "10.244.1.6/32", "192.168.0.10/32"} {
		run("ip", "addr", "add", a, "dev", "lo")
	}
	run("ip", "link", "add", "v0", "type", "veth", "peer", "name", "v1")
	run("ip", "link", "set", "v0", "up")
	run("ip", "link", "set", "v1", "up")
	run("ip", "addr", "add", "192.168.5.1/24", "dev", "v0")
	run("ip", "neigh", "add", "192.168.5.2", "lladdr", "02:00:00:00:00:02", "dev", "v0")
	run("ip", "route", "add", "10.96.0.0/16", "via", "192.168.5.2", "dev", "v0")

	// Each endpoint answers with its own address.
	for _, addr := range []string{"10.244.1.5:8080", "10.244.1.6:8080"} {
		serve(t, ns, addr)
	}
	return ns
}

// serve answers every connection to addr in ns with addr.
func serve(t *testing.T, ns netns.NsHandle, addr string) {
	t.Helper()
	var l net.Listener
	if err := nsexec.Do(ns, func() (err error) { l, err = net.Listen("tcp", addr); return err }); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			_, _ = c.Write([]byte(addr))
			c.Close()
		}
	}()
}

// ask connects to dst from ns and returns what the server said.
func ask(ns netns.NsHandle, dst string) (string, error) {
	var reply string
	err := nsexec.Do(ns, func() error {
		c, err := net.DialTimeout("tcp", dst, 2*time.Second)
		if err != nil {
			return err
		}
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(2 * time.Second))
		buf := make([]byte, 64)
		n, err := c.Read(buf)
		if n == 0 {
			return err
		}
		reply = string(buf[:n])
		return nil
	})
	return reply, err
}
