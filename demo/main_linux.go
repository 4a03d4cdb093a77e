// Command demo is `make demo`: a nodenet cluster on this machine, built
// from network namespaces, and a walk through what it does.
//
// Three Linux nodes and one simulated Windows node, a real kube-apiserver
// with their Node objects and pod CIDRs, one nodenet-agent process per
// node (--dataplane=linux; the Windows one --dataplane=sim), pods wired
// through the nodenet-cni plugin, a ClusterIP and a NodePort Service with
// their EndpointSlices; then HTTP from a pod on node-1 to backends on
// node-2 and node-3 through the cluster IP, HTTP from outside through the
// node port, nodenetctl status and services on node-1, and the HNS load
// balancers the Windows node would program. Everything is removed on
// exit, also on Ctrl-C; `demo -clean` (make demo-clean) removes what a
// killed run left.
//
// Address plan: see test/cluster (underlay 192.168.(77+k).0/24, pod CIDRs
// 10.244.1-4.0/24, services from 10.96.0.0/12). Backends serve HTTP on
// port 8080; the Services listen on port 80.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/netip"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/nodenet/nodenet/test/apiserver"
	"github.com/nodenet/nodenet/test/cluster"
	"github.com/nodenet/nodenet/test/netnode"
)

const (
	backendPort = 8080
	servicePort = 80
	// requests is how many GETs each traffic step prints.
	requests = 6
)

func main() {
	bin := flag.String("bin", "bin", "directory holding nodenet-agent, nodenet-cni and nodenetctl (make build)")
	clean := flag.Bool("clean", false, "remove what an interrupted demo left behind, then exit")
	verbosity := flag.Int("v", 2, "the agents' log verbosity (their logs are in the node directories)")
	flag.Parse()
	if *clean {
		os.Exit(runClean())
	}
	if err := preflight(*bin); err != nil {
		fmt.Fprintf(os.Stderr, "demo: %v\n", err)
		os.Exit(1)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	go func() {
		<-ctx.Done()
		stop() // a second Ctrl-C kills at once; make demo-clean then
		fmt.Fprintln(os.Stderr, "\ninterrupted: cleaning up (Ctrl-C again to skip, then make demo-clean)")
	}()
	d := &demo{start: time.Now(), bin: *bin, verbosity: *verbosity}
	err := cluster.RunProgram(ctx, quietOnceDone{ctx: ctx, w: os.Stderr}, d.run)
	switch {
	case ctx.Err() != nil:
		fmt.Fprintf(os.Stderr, "interrupted after %s; everything it made is gone\n", d.elapsed())
		os.Exit(130)
	case err != nil:
		fmt.Fprintf(os.Stderr, "demo failed after %s\n", d.elapsed())
		os.Exit(1)
	}
	fmt.Printf("\ndemo done in %s; everything it made is gone\n", d.elapsed())
}

// quietOnceDone drops what the demo logs after an interrupt: the steps
// it cut short fail, and saying so is noise.
type quietOnceDone struct {
	ctx context.Context
	w   io.Writer
}

func (q quietOnceDone) Write(p []byte) (int, error) {
	if q.ctx.Err() != nil {
		return len(p), nil
	}
	return q.w.Write(p)
}

// preflight checks what the demo needs before it makes anything.
func preflight(bin string) error {
	if os.Geteuid() != 0 {
		return errors.New("needs root (network namespaces, links, nftables): run it as root")
	}
	for _, tool := range []string{"ip", "nft"} {
		if _, err := exec.LookPath(tool); err != nil {
			return fmt.Errorf("%s not found: run make deps", tool)
		}
	}
	for _, b := range []string{cluster.AgentBinary, cluster.CNIBinary, cluster.CtlBinary} {
		if _, err := os.Stat(filepath.Join(bin, b)); err != nil {
			return fmt.Errorf("%v: run make build (or make demo)", err)
		}
	}
	return nil
}

func runClean() int {
	removed, err := cluster.Clean()
	for _, r := range removed {
		fmt.Println("removed", r)
	}
	if len(removed) == 0 && err == nil {
		fmt.Println("nothing left behind")
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "demo -clean: %v\n", err)
		return 1
	}
	return 0
}

type demo struct {
	start     time.Time
	bin       string
	verbosity int
}

func (d *demo) elapsed() time.Duration { return time.Since(d.start).Round(100 * time.Millisecond) }

// step prints one progress line.
func (d *demo) step(format string, args ...any) {
	fmt.Printf("[%6.1fs] %s\n", time.Since(d.start).Seconds(), fmt.Sprintf(format, args...))
}

// show prints a block of output, indented.
func show(title, text string) {
	fmt.Printf("\n  $ %s\n", title)
	for _, line := range strings.Split(strings.TrimRight(text, "\n"), "\n") {
		fmt.Printf("    %s\n", line)
	}
	fmt.Println()
}

func (d *demo) run(p *cluster.Program) {
	ctx := p.Context()
	fmt.Println("nodenet demo: 3 Linux nodes and 1 simulated Windows node on this machine, a real kube-apiserver,")
	fmt.Println("one nodenet-agent process per node: node network, CNI server and service proxy from one config")
	fmt.Println()
	if _, err := os.Stat(filepath.Join(d.bin, cluster.AgentBinary)); err != nil {
		p.Fatalf("%v", err)
	}
	root, err := apiserver.CacheRoot()
	if err == nil {
		d.step("kube-apiserver %s and etcd %s from %s", apiserver.KubeVersion, apiserver.EtcdVersion, root)
	}
	c := cluster.New(p, cluster.Options{
		Nodes: []cluster.NodeOptions{
			{Name: "node-1"}, {Name: "node-2"}, {Name: "node-3"},
			{Name: "win-1", Dataplane: cluster.DataplaneSim},
		},
		BinDir:    d.bin,
		AgentArgs: []string{fmt.Sprintf("--v=%d", d.verbosity)},
		Progress:  func(s string) { d.step("%s", s) },
	})
	for _, n := range c.Nodes {
		d.step("  %-7s %-5s InternalIP %-15s pod CIDR %s  agent log %s", n.Name, n.Dataplane, n.IP, n.PodCIDR, n.Agent.LogPath)
	}

	node1, node2, node3 := c.Node("node-1"), c.Node("node-2"), c.Node("node-3")
	client := node1.AddPod(p, "client")
	d.step("pod client on node-1: CNI ADD through nodenet-cni → the agent's socket → %s", client.IP)
	var backends []*netnode.Pod
	where := map[string]string{}
	for _, b := range []struct {
		name string
		node *cluster.Node
	}{{"web-a", node2}, {"web-b", node3}} {
		pod := b.node.AddPod(p, b.name)
		cluster.ServeHTTP(p, pod, backendPort)
		backends = append(backends, pod)
		where[b.name] = b.node.Name
		d.step("pod %s on %s: %s, serving HTTP on :%d (answers with its name and the client address it sees)", b.name, b.node.Name, pod.IP, backendPort)
	}

	web, err := c.Expose(ctx, cluster.HTTPService("web", servicePort, backendPort), backends...)
	if err != nil {
		p.Fatalf("%v", err)
	}
	d.step("Service web (ClusterIP %s:%d) with an EndpointSlice: web-a on node-2, web-b on node-3", web.Spec.ClusterIP, servicePort)
	webNP, err := c.Expose(ctx, cluster.HTTPService("web-nodeport", servicePort, backendPort, cluster.NodePort(corev1.ServiceExternalTrafficPolicyCluster)), backends...)
	if err != nil {
		p.Fatalf("%v", err)
	}
	d.step("Service web-nodeport (NodePort %d on every node) with the same backends", webNP.Spec.Ports[0].NodePort)

	d.step("HTTP GET from pod client (node-1) to the cluster IP, one new connection each:")
	d.traffic(p, client.NS, "client", cluster.ClusterIP(web), where)
	d.step("HTTP GET from outside (the host, %s) to node-1's node port:", c.Env.HostIP)
	d.traffic(p, nil, "host", cluster.NodePortOn(node1, webNP), where)

	for _, args := range [][]string{{"status"}, {"services"}} {
		out, err := node1.Ctl(ctx, args...)
		if err != nil {
			p.Fatalf("nodenetctl %s on node-1: %v\n%s", args[0], err, out)
		}
		show(fmt.Sprintf("nodenetctl %s --socket %s   # in node-1", args[0], node1.StatusSocket), out)
	}
	win := c.Node("win-1")
	out, err := win.Ctl(ctx, "dump", "hns")
	if err != nil {
		p.Fatalf("nodenetctl dump hns on win-1: %v\n%s", err, out)
	}
	show(fmt.Sprintf("nodenetctl dump hns --socket %s   # win-1, --dataplane=sim: what HNS on a Windows node would hold", win.StatusSocket), out)
	d.step("cleaning up: agents, apiserver, namespaces, files")
}

// traffic sends GETs from from (nil: the host) to dst, prints who
// answered the first few, and goes on until every wanted backend did.
func (d *demo) traffic(p *cluster.Program, from *netnode.NS, fromName string, dst netip.AddrPort, where map[string]string) {
	seen := map[string]bool{}
	for i := 0; i < requests || len(seen) < len(where); i++ {
		if i == 100 {
			p.Fatalf("backends answering %s after %d requests: %v, want all of %v", dst, i, seen, where)
		}
		a, err := cluster.GetEventually(p.Context(), from, dst)
		if err != nil {
			p.Fatalf("%v", err)
		}
		if _, ok := where[a.Backend]; !ok {
			p.Fatalf("%s answered as %q, want one of %v", dst, a.Backend, where)
		}
		seen[a.Backend] = true
		if i < requests {
			d.step("  GET http://%s/ from %s → %s on %s, which saw the client as %s", dst, fromName, a.Backend, where[a.Backend], a.Client)
		}
	}
}
