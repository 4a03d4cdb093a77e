package kubenode

// Address plan: see doc.go. Two nodes (node-0 .11, node-1 .12 on the
// underlay), pod CIDRs from Node IPAM in 10.244.0.0/16, services in
// 10.96.0.0/12.

import (
	"bytes"
	"context"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// NewInstalled brings up nodes with nothing but containerd and kubelet,
// builds the image as make image does and installs nodenet with kubectl
// apply -k, as a user would.
func NewInstalled(t *testing.T, nodes int, version string) *Cluster {
	t.Helper()
	bins := RequireBinaries(t)
	kubectl := RequireKubectl(t)
	ctx := t.Context()
	imgDir := t.TempDir()
	archive, ref, err := BuildImage(ctx, imgDir, version)
	if err != nil {
		t.Fatal(err)
	}
	deploy, err := DeployDir(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return New(t, Options{Nodes: nodes, Binaries: &bins, Progress: func(s string) { t.Log(s) },
		Install: &Install{ImageArchive: archive, Image: ref, DeployDir: deploy, Kubectl: kubectl}})
}

// TestInstall installs nodenet through deploy/'s DaemonSet on two real
// nodes: kubelet starts the agent pods, install-cni puts the plugin on
// each node, the agents write their conflists, the nodes go Ready, and
// pods on both nodes reach each other through a ClusterIP and from the
// underlay through a NodePort.
func TestInstall(t *testing.T) {
	if testing.Short() {
		t.Skip("brings up two real nodes: minutes")
	}
	const version = "v0.0.0-install-test"
	c := NewInstalled(t, 2, version)
	ctx := t.Context()

	t.Run("each node got the plugin from the image, its own conflist and an agent of the image's version", func(t *testing.T) {
		var first []byte
		for _, n := range c.Nodes {
			plugin, err := os.ReadFile(filepath.Join(n.CNIBinDir, "nodenet-cni"))
			if err != nil {
				t.Fatalf("%s: %v", n.Name, err)
			}
			if first == nil {
				first = plugin
			} else if !bytes.Equal(first, plugin) {
				t.Errorf("%s has another nodenet-cni than node-0", n.Name)
			}
			if st, _ := os.Stat(filepath.Join(n.CNIBinDir, "nodenet-cni")); st.Mode().Perm() != 0o755 {
				t.Errorf("%s: nodenet-cni mode %v, want 0755", n.Name, st.Mode().Perm())
			}
			if _, err := os.Stat(filepath.Join(n.CNIConfDir, "10-nodenet.conflist")); err != nil {
				t.Errorf("%s: %v", n.Name, err)
			}
			s, err := n.Status(ctx)
			if err != nil {
				t.Fatalf("%s: %v", n.Name, err)
			}
			if s.Version != version {
				t.Errorf("%s: agent reports version %q, want the image's %q", n.Name, s.Version, version)
			}
		}
	})

	labels := map[string]string{"app": "install"}
	server, err := c.RunPod(ctx, c.NetexecPod("server", c.Nodes[1].Name, labels))
	if err != nil {
		t.Fatal(err)
	}
	client, err := c.RunPod(ctx, c.NetexecPod("client", c.Nodes[0].Name, nil))
	if err != nil {
		t.Fatal(err)
	}
	for i, p := range []*corev1.Pod{client, server} {
		if ip := netip.MustParseAddr(p.Status.PodIP); !c.Nodes[i].PodCIDR.Contains(ip) {
			t.Errorf("pod %s got %s, outside %s's pod CIDR %s", p.Name, ip, c.Nodes[i].Name, c.Nodes[i].PodCIDR)
		}
	}
	cip, err := c.Client.CoreV1().Services("default").Create(ctx, HTTPService("install", corev1.ServiceTypeClusterIP, labels), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	np, err := c.Client.CoreV1().Services("default").Create(ctx, HTTPService("install-np", corev1.ServiceTypeNodePort, labels), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	clusterIP := netip.AddrPortFrom(netip.MustParseAddr(cip.Spec.ClusterIP), 80)
	nodePort := netip.AddrPortFrom(c.Nodes[0].IP, uint16(np.Spec.Ports[0].NodePort))
	clientIP := netip.MustParseAddr(client.Status.PodIP)
	checks := []struct {
		name string
		get  func(context.Context) (string, error)
	}{
		{"a pod on node-0 reaches a ClusterIP backed on node-1", func(ctx context.Context) (string, error) {
			return DialFromPod(ctx, c.Nodes[0].NS, clientIP, clusterIP)
		}},
		{"the underlay reaches a NodePort of node-0 backed on node-1", func(ctx context.Context) (string, error) {
			return HTTPGet(ctx, nil, nodePort, "/hostname")
		}},
	}
	for _, ch := range checks {
		t.Run(ch.name, func(t *testing.T) {
			var got string
			if err := Eventually(ctx, func(ctx context.Context) (err error) {
				got, err = ch.get(ctx)
				return err
			}); err != nil {
				t.Fatal(err)
			}
			if got != "server" {
				t.Errorf("answered by %q, want the server pod", got)
			}
		})
	}

	lifecycle(t, c)
}

// lifecycle runs the agent's lifecycle scenarios under traffic on an
// installed cluster (rollout restart, upgrade to another image, the
// agent pod deleted during a burst of pod creations), asserting the
// goals: no failed request, the long-lived connection survives, no
// application restart, unique IPs, nothing leaked. With
// NODENET_LIFECYCLE_REPORT set it writes the figures there
// (docs/lifecycle.md).
func lifecycle(t *testing.T, c *Cluster) {
	ctx := t.Context()
	labels := map[string]string{"app": "lifecycle"}
	if _, err := c.serverPods(ctx, labels); err != nil {
		t.Fatal(err)
	}
	client, err := c.RunPod(ctx, c.NetexecPod("lifecycle-client", c.Nodes[0].Name, nil))
	if err != nil {
		t.Fatal(err)
	}
	cip, err := c.Client.CoreV1().Services("default").Create(ctx, HTTPService("lifecycle", corev1.ServiceTypeClusterIP, labels), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	np, err := c.Client.CoreV1().Services("default").Create(ctx, HTTPService("lifecycle-np", corev1.ServiceTypeNodePort, labels), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	clusterIP := netip.AddrPortFrom(netip.MustParseAddr(cip.Spec.ClusterIP), 80)
	nodePort := netip.AddrPortFrom(c.Nodes[1].IP, uint16(np.Spec.Ports[0].NodePort))
	ns, err := c.Nodes[0].PodNS(ctx, client)
	if err != nil {
		t.Fatal(err)
	}
	defer ns.Close()
	// Both frontends answer before any scenario starts.
	for _, dst := range []netip.AddrPort{clusterIP, nodePort} {
		if err := Eventually(ctx, func(ctx context.Context) error { _, err := HTTPGet(ctx, ns, dst, "/hostname"); return err }); err != nil {
			t.Fatalf("%s before the scenarios: %v", dst, err)
		}
	}

	var results []LifecycleResult
	scenario := func(name string, action func(t *testing.T, r *LifecycleResult)) {
		t.Run(name, func(t *testing.T) {
			before, err := c.AppRestarts(ctx)
			if err != nil {
				t.Fatal(err)
			}
			tr, err := StartTraffic(ctx, ns, []netip.AddrPort{clusterIP, nodePort}, clusterIP)
			if err != nil {
				t.Fatal(err)
			}
			time.Sleep(time.Second)
			r := LifecycleResult{Scenario: name}
			start := time.Now()
			action(t, &r)
			r.AgentOutage = time.Since(start)
			time.Sleep(2 * time.Second)
			r.Traffic = tr.Stop()
			after, err := c.AppRestarts(ctx)
			if err != nil {
				t.Fatal(err)
			}
			r.AppRestarts = after - before
			results = append(results, r)
			t.Logf("%s: %d requests, %d failed, long-lived: %d requests, broken %q; app restarts %d; agents Ready after %s",
				name, r.Traffic.Requests, r.Traffic.Failed, r.Traffic.LongLivedRequests, r.Traffic.LongLivedBroken,
				r.AppRestarts, r.AgentOutage.Round(100*time.Millisecond))
			if r.Traffic.Failed > 0 {
				t.Errorf("%d of %d requests failed: %v", r.Traffic.Failed, r.Traffic.Requests, r.Traffic.Failures)
			}
			if r.Traffic.LongLivedBroken != "" {
				t.Errorf("the long-lived connection broke %s", r.Traffic.LongLivedBroken)
			}
			if r.AppRestarts != 0 {
				t.Errorf("application containers restarted %d times", r.AppRestarts)
			}
		})
	}

	scenario("kubectl rollout restart of the DaemonSet", func(t *testing.T, r *LifecycleResult) {
		if _, err := c.Kubectl(ctx, "-n", AgentNamespace, "rollout", "restart", "ds/"+AgentDaemonSet); err != nil {
			t.Fatal(err)
		}
		if err := c.RolloutStatus(ctx); err != nil {
			t.Fatal(err)
		}
	})

	const upgraded = "v0.0.0-upgrade-test"
	archive, ref, err := BuildImage(ctx, t.TempDir(), upgraded)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.ImportImage(ctx, archive); err != nil {
		t.Fatal(err)
	}
	scenario("upgrade to another image (kubectl set image)", func(t *testing.T, r *LifecycleResult) {
		if _, err := c.Kubectl(ctx, "-n", AgentNamespace, "set", "image", "ds/"+AgentDaemonSet, "agent="+ref, "install-cni="+ref); err != nil {
			t.Fatal(err)
		}
		if err := c.RolloutStatus(ctx); err != nil {
			t.Fatal(err)
		}
		for _, n := range c.Nodes {
			s, err := n.Status(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if s.Version != upgraded {
				t.Errorf("%s: agent reports %q after the upgrade, want %q", n.Name, s.Version, upgraded)
			}
		}
		r.Notes = append(r.Notes, "every agent reports version "+upgraded+" after the rollout (nodenetctl status)")
	})

	scenario("agent pod deleted during a burst of 20 pod creations", func(t *testing.T, r *LifecycleResult) {
		node := c.Nodes[0]
		const burst = 20
		var names []string
		for i := range burst {
			if i == 5 {
				agents, err := c.AgentPods(ctx)
				if err != nil {
					t.Fatal(err)
				}
				if _, err := c.Kubectl(ctx, "-n", AgentNamespace, "delete", "pod", agents[node.Name].Name, "--wait=false"); err != nil {
					t.Fatal(err)
				}
			}
			p := c.PausePod(fmt.Sprintf("burst-%d", i), node.Name)
			if _, err := c.Client.CoreV1().Pods("default").Create(ctx, p, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			names = append(names, p.Name)
		}
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
		}
		r.Pods, r.UniqueIPs = burst, len(seen)
		if err := c.WaitAgentsReady(ctx); err != nil {
			t.Fatal(err)
		}
		zero := int64(0)
		for _, name := range names {
			if err := c.Client.CoreV1().Pods("default").Delete(ctx, name, metav1.DeleteOptions{GracePeriodSeconds: &zero}); err != nil {
				t.Fatal(err)
			}
		}
		var leaked []netip.Addr
		err := Eventually(ctx, func(ctx context.Context) error {
			list, err := c.Client.CoreV1().Pods("default").List(ctx, metav1.ListOptions{})
			if err != nil {
				return err
			}
			for _, p := range list.Items {
				if strings.HasPrefix(p.Name, "burst-") {
					return fmt.Errorf("pod %s still there", p.Name)
				}
			}
			if leaked, err = c.LeakedIPs(ctx, node); err != nil {
				return err
			}
			if len(leaked) > 0 {
				return fmt.Errorf("%s holds %v that no pod has", node.Name, leaked)
			}
			return nil
		})
		r.Leaked = len(leaked)
		if err != nil {
			t.Error(err)
		}
	})

	scenario("a config the agent cannot read, then fixed (ConfigMap edit + rollout restart)", func(t *testing.T, r *LifecycleResult) {
		cms := c.Client.CoreV1().ConfigMaps(AgentNamespace)
		cm, err := cms.Get(ctx, "nodenet-config", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		good := cm.Data["config.yaml"]
		bad := strings.Replace(good, "enableDSR: false", "enableDSRR: false", 1)
		if bad == good {
			t.Fatal("deploy/base/config.yaml has no proxy.enableDSR to break")
		}
		cm.Data["config.yaml"] = bad
		if cm, err = cms.Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		// kubelet mounts a new pod's ConfigMap from its cache: restart
		// only once that cache has the edit, i.e. once kubelet has
		// refreshed a running agent's copy.
		if err := c.WaitAgentConfig(ctx, "enableDSRR: false"); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Kubectl(ctx, "-n", AgentNamespace, "rollout", "restart", "ds/"+AgentDaemonSet); err != nil {
			t.Fatal(err)
		}
		// The new agent exits naming the field, and says so on its Node;
		// the rollout stops at it (maxUnavailable 1), the old dataplane
		// keeps serving.
		var broken string
		if err := Eventually(ctx, func(ctx context.Context) error {
			for _, n := range c.Nodes {
				logs, _ := n.agentContainerLogs()
				if !strings.Contains(logs, "proxy.enableDSRR") {
					continue
				}
				evs, err := c.Client.CoreV1().Events("default").List(ctx, metav1.ListOptions{
					FieldSelector: "involvedObject.kind=Node,involvedObject.name=" + n.Name + ",reason=InvalidConfig"})
				if err != nil {
					return err
				}
				if len(evs.Items) == 0 {
					return fmt.Errorf("%s's agent logged the bad field but its Node has no InvalidConfig event", n.Name)
				}
				broken = n.Name + ": " + evs.Items[0].Message
				return nil
			}
			return fmt.Errorf("no agent logged proxy.enableDSRR yet")
		}); err != nil {
			t.Fatal(err)
		}
		// Let it crash-loop a while under traffic.
		time.Sleep(5 * time.Second)
		r.Notes = append(r.Notes, "the agent with the bad config exited and its Node got an InvalidConfig event: "+broken)
		cm.Data["config.yaml"] = good
		if _, err := cms.Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		if err := c.WaitAgentConfig(ctx, "enableDSR: false"); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Kubectl(ctx, "-n", AgentNamespace, "rollout", "restart", "ds/"+AgentDaemonSet); err != nil {
			t.Fatal(err)
		}
		if err := c.RolloutStatus(ctx); err != nil {
			t.Fatal(err)
		}
	})

	if path := os.Getenv("NODENET_LIFECYCLE_REPORT"); path != "" {
		md := LifecycleMarkdown(results, "make lifecycle   # = go test -run TestInstall -v ./test/kubenode/ with NODENET_LIFECYCLE_REPORT=docs/lifecycle.md", time.Now())
		if err := os.WriteFile(path, []byte(md), 0o644); err != nil {
			t.Error(err)
		}
	}
}
