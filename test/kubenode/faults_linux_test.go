package kubenode

// Address plan: see doc.go. One node (node-0, underlay .11), pod CIDR
// from Node IPAM in 10.244.0.0/16, services in 10.96.0.0/12.

import (
	"context"
	"fmt"
	"maps"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestFaults breaks a real node's runtime side while kubelet works: the
// agent killed mid-burst, containerd restarted, a pod's netns deleted
// behind kubelet's back. One cluster serves the three, in order.
func TestFaults(t *testing.T) {
	if testing.Short() {
		t.Skip("brings up a real node: minutes")
	}
	bins := RequireBinaries(t)
	c := New(t, Options{Binaries: &bins, Progress: func(s string) { t.Log(s) }})
	node := c.Nodes[0]

	t.Run("the agent killed while kubelet creates 20 pods: every pod runs with its own IP, none leaks", func(t *testing.T) {
		// An ADD in flight when the agent dies has allocated its address;
		// the runtime never sees the result, and containerd 2.2 neither
		// sends DEL for that sandbox later nor CNI GC at all. The new
		// agent releases such addresses once no sandbox the runtime lists
		// (CRI ListPodSandbox) holds them for OrphanGracePeriod: the
		// checks below wait for that (issue 28).
		ctx := t.Context()
		const pods = 20
		var names []string
		for i := range pods {
			p := c.PausePod(fmt.Sprintf("burst-%d", i), node.Name)
			if _, err := c.Client.CoreV1().Pods("default").Create(ctx, p, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			names = append(names, p.Name)
		}
		// Kill it once the burst reaches CNI, keep it down a moment so
		// ADDs fail, then start a new one, as its DaemonSet would.
		if err := Eventually(ctx, func(context.Context) error {
			if v, _ := node.CNIVerbs(); v["ADD"] == 0 {
				return fmt.Errorf("no ADD yet")
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		node.KillAgent()
		time.Sleep(3 * time.Second)
		node.StartAgent(t)

		seen := map[string]string{}
		for _, name := range names {
			p, err := c.WaitRunning(ctx, "default", name)
			if err != nil {
				t.Fatal(err)
			}
			if other, dup := seen[p.Status.PodIP]; dup {
				t.Errorf("pods %s and %s share %s", other, name, p.Status.PodIP)
			}
			seen[p.Status.PodIP] = name
			if !node.PodCIDR.Contains(netip.MustParseAddr(p.Status.PodIP)) {
				t.Errorf("pod %s has %s, outside %s", name, p.Status.PodIP, node.PodCIDR)
			}
		}
		if log, err := os.ReadFile(filepath.Join(node.Dir, "kubelet.log")); err == nil {
			t.Logf("sandbox creations kubelet saw fail while the agent was down: %d",
				strings.Count(string(log), "CreatePodSandbox for pod failed"))
		}
		// The store holds exactly the running pods' addresses: a failed
		// ADD left nothing behind.
		if err := Eventually(ctx, func(context.Context) error {
			return sameIPs(node, slices.Collect(maps.Keys(seen)))
		}); err != nil {
			t.Errorf("after the burst: %v", err)
		}
		deletePods(t, c, names)
		if err := Eventually(ctx, func(context.Context) error { return sameIPs(node, nil) }); err != nil {
			t.Errorf("after deleting every pod: %v", err)
		}
		st, err := node.Status(ctx)
		if err != nil {
			t.Fatal(err)
		}
		switch o := st.CNI.OrphanRelease; {
		case o == nil:
			t.Errorf("the agent's status has no orphan release")
		case o.LastRun.IsZero() || o.LastError != "":
			// Without the runtime's sandboxes a leak would go unnoticed.
			t.Errorf("the agent could not compare its allocations with containerd's sandboxes: last run %v, error %q", o.LastRun, o.LastError)
		default:
			t.Logf("addresses the new agent released for belonging to no sandbox: %d %+v", o.Released, o.LastReleased)
		}
	})

	t.Run("containerd restarted: pods keep their network", func(t *testing.T) {
		ctx := t.Context()
		server, err := c.RunPod(ctx, c.NetexecPod("restart-server", node.Name, map[string]string{"app": "restart"}))
		if err != nil {
			t.Fatal(err)
		}
		client, err := c.RunPod(ctx, c.NetexecPod("restart-client", node.Name, nil))
		if err != nil {
			t.Fatal(err)
		}
		dst := netip.AddrPortFrom(netip.MustParseAddr(server.Status.PodIP), NetexecPort)
		clientIP := netip.MustParseAddr(client.Status.PodIP)
		exchange := func(when string) {
			t.Helper()
			var got string
			err := Eventually(ctx, func(ctx context.Context) (err error) {
				got, err = DialFromPod(ctx, node.NS, clientIP, dst)
				return err
			})
			if err != nil || got != "restart-server" {
				t.Fatalf("%s: client pod to server pod: %q, %v", when, got, err)
			}
		}
		exchange("before the restart")
		before, err := node.Crictl(ctx, "pods", "-q")
		if err != nil {
			t.Fatal(err)
		}
		if err := node.RestartContainerd(ctx); err != nil {
			t.Fatal(err)
		}
		// Straight after: the pods' namespaces never went away.
		if got, err := DialFromPod(ctx, node.NS, clientIP, dst); err != nil || got != "restart-server" {
			t.Errorf("right after the restart: %q, %v", got, err)
		}
		exchange("after the restart")
		after, err := node.Crictl(ctx, "pods", "-q")
		if err != nil {
			t.Fatal(err)
		}
		if !sameLines(before, after) {
			t.Errorf("pod sandboxes changed across the restart:\nbefore %s\nafter %s", before, after)
		}
		deletePods(t, c, []string{"restart-server", "restart-client"})
	})

	t.Run("a pod's netns deleted behind kubelet's back: the pod still deletes and its IP is released", func(t *testing.T) {
		ctx := t.Context()
		pod, err := c.RunPod(ctx, c.PausePod("lost-netns", node.Name))
		if err != nil {
			t.Fatal(err)
		}
		path, err := node.SandboxNetns(ctx, pod)
		if err != nil {
			t.Fatal(err)
		}
		if err := unix.Unmount(path, unix.MNT_DETACH); err != nil {
			t.Fatalf("unmount %s: %v", path, err)
		}
		if err := os.Remove(path); err != nil {
			t.Fatal(err)
		}
		deletePods(t, c, []string{pod.Name})
		if err := Eventually(ctx, func(context.Context) error { return sameIPs(node, nil) }); err != nil {
			t.Errorf("%v", err)
		}
		// Stopped, not yet removed: kubelet's garbage collection removes
		// dead sandboxes later.
		if out, err := node.Crictl(ctx, "pods", "-q", "--state", "ready"); err != nil || strings.TrimSpace(out) != "" {
			t.Errorf("sandboxes still ready: %q, %v", out, err)
		}
	})

	verbs, _ := node.CNIVerbs()
	t.Logf("CNI requests containerd made to the agent: %v", verbs)
}

// sameIPs compares the agent's allocations with want.
func sameIPs(n *Node, want []string) error {
	got, err := n.AllocatedIPs()
	if err != nil {
		return err
	}
	var gs []string
	for _, ip := range got {
		gs = append(gs, ip.String())
	}
	slices.Sort(gs)
	want = slices.Clone(want)
	slices.Sort(want)
	if !slices.Equal(gs, want) {
		return fmt.Errorf("allocated %v, want %v (owners: %s)", gs, want, allocationOwners(n))
	}
	return nil
}

// allocationOwners says who holds each of the agent's allocations (the
// IPAM files' "<containerID>\r\n<ifname>"; empty when the file names
// nobody), for failure messages.
func allocationOwners(n *Node) string {
	var out []string
	_ = filepath.WalkDir(n.CNIDataDir, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		if _, perr := netip.ParseAddr(d.Name()); perr != nil {
			return nil
		}
		data, rerr := os.ReadFile(path)
		if rerr != nil {
			out = append(out, d.Name()+"=?"+rerr.Error())
			return nil
		}
		out = append(out, fmt.Sprintf("%s=%q", d.Name(), data))
		return nil
	})
	return strings.Join(out, " ")
}

func sameLines(a, b string) bool {
	as, bs := strings.Fields(a), strings.Fields(b)
	slices.Sort(as)
	slices.Sort(bs)
	return slices.Equal(as, bs)
}

// deletePods deletes the pods and waits until they are gone (kubelet has
// torn their sandboxes down).
func deletePods(t *testing.T, c *Cluster, names []string) {
	t.Helper()
	ctx := t.Context()
	for _, name := range names {
		if err := c.Client.CoreV1().Pods("default").Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for _, name := range names {
		err := c.poll(ctx, "pod "+name+" gone", func(ctx context.Context) error {
			_, err := c.Client.CoreV1().Pods("default").Get(ctx, name, metav1.GetOptions{})
			if apierrors.IsNotFound(err) {
				return nil
			}
			if err == nil {
				return fmt.Errorf("pod %s still there", name)
			}
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	}
}
