package kubenode

// Address plan: see doc.go. One node (node-0, underlay .11, pod CIDR from
// Node IPAM in 10.244.0.0/16), services in 10.96.0.0/12.

import (
	"context"
	"net/netip"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestSmoke runs a real kubelet + containerd node with nodenet as its
// only CNI and service proxy: a pod backs a ClusterIP and a NodePort
// Service; another pod reaches the ClusterIP, the node reaches it too,
// and the underlay's outside reaches the NodePort.
func TestSmoke(t *testing.T) {
	bins := RequireBinaries(t)
	c := New(t, Options{Binaries: &bins, Progress: func(s string) { t.Log(s) }})
	ctx := t.Context()
	node := c.Nodes[0]
	labels := map[string]string{"app": "smoke"}

	server, err := c.RunPod(ctx, c.NetexecPod("server", node.Name, labels))
	if err != nil {
		t.Fatal(err)
	}
	client, err := c.RunPod(ctx, c.NetexecPod("client", node.Name, nil))
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []*corev1.Pod{server, client} {
		ip := netip.MustParseAddr(p.Status.PodIP)
		if !node.PodCIDR.Contains(ip) {
			t.Errorf("pod %s got %s, outside the node's pod CIDR %s", p.Name, ip, node.PodCIDR)
		}
	}

	cip, err := c.Client.CoreV1().Services("default").Create(ctx, HTTPService("smoke", corev1.ServiceTypeClusterIP, labels), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	np, err := c.Client.CoreV1().Services("default").Create(ctx, HTTPService("smoke-np", corev1.ServiceTypeNodePort, labels), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	clusterIP := netip.AddrPortFrom(netip.MustParseAddr(cip.Spec.ClusterIP), 80)
	nodePort := netip.AddrPortFrom(node.IP, uint16(np.Spec.Ports[0].NodePort))
	clientIP := netip.MustParseAddr(client.Status.PodIP)

	checks := []struct {
		name string
		get  func(context.Context) (string, error)
	}{
		{"pod to ClusterIP", func(ctx context.Context) (string, error) {
			return DialFromPod(ctx, node.NS, clientIP, clusterIP)
		}},
		{"node to ClusterIP", func(ctx context.Context) (string, error) {
			return HTTPGet(ctx, node.NS, clusterIP, "/hostname")
		}},
		{"underlay to NodePort", func(ctx context.Context) (string, error) {
			return HTTPGet(ctx, nil, nodePort, "/hostname")
		}},
	}
	for _, ch := range checks {
		var got string
		err := Eventually(ctx, func(ctx context.Context) (err error) {
			got, err = ch.get(ctx)
			return err
		})
		if err != nil {
			t.Errorf("%s: %v", ch.name, err)
			continue
		}
		if got != "server" {
			t.Errorf("%s answered by %q, want the server pod", ch.name, got)
		}
	}
	verbs, err := node.CNIVerbs()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("CNI requests containerd made to the agent: %v", verbs)
	if verbs["ADD"] < 2 {
		t.Errorf("the agent served %d CNI ADDs, want one per pod (2)", verbs["ADD"])
	}
}
