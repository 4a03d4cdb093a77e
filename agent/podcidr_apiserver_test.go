//go:build !windows

// Address plan: a real kube-apiserver on 127.0.0.1; cluster CIDR
// 10.244.0.0/16 cut into /26s; node-1's InternalIP 192.168.1.10; service
// CIDR 10.96.0.0/12.
package agent

import (
	"context"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/nodenet/nodenet/ipam/nodecidr"
	"github.com/nodenet/nodenet/test/apiserver"
)

// TestAnAgentWithAgentAllocationGivesItsOwnNodeAPodCIDR runs the whole
// agent (simulated HNS dataplane) against a real apiserver where nothing
// sets pod CIDRs: with network.podCIDRAllocation: agent it wins the Lease
// in POD_NAMESPACE, gives its own waiting Node a /26, and its network then
// comes up on that subnet.
func TestAnAgentWithAgentAllocationGivesItsOwnNodeAPodCIDR(t *testing.T) {
	apiserver.RequireBinaries(t, apiserver.Options{})
	srv := apiserver.StartForTest(t, apiserver.Options{})
	c := srv.Client()
	dir, err := os.MkdirTemp("", "nn-alloc") // short: the CNI socket path
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	kubeconfig := filepath.Join(dir, "kubeconfig")
	if err := srv.WriteKubeconfig(kubeconfig); err != nil {
		t.Fatal(err)
	}
	cfg := `apiVersion: nodenet.io/v1alpha1
kind: AgentConfiguration
clusterCIDRs: [10.244.0.0/16]
serviceCIDRs: [10.96.0.0/12]
nodeName: node-1
network: {podCIDRAllocation: agent, nodeCIDRMaskSizeIPv4: 26}
proxy: {healthzBindAddress: "127.0.0.1:0", metricsBindAddress: "127.0.0.1:0"}
cni: {socketPath: ` + dir + `/cni.sock, confDir: ` + dir + `/net.d, binDir: ` + dir + `/bin, dataDir: ` + dir + `/data}
`
	if err := os.WriteFile(filepath.Join(dir, "config.yaml"), []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	node := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-1", Annotations: map[string]string{"node.alpha.kubernetes.io/ttl": "0"}}}
	node, err = c.CoreV1().Nodes().Create(t.Context(), node, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	node.Status.Addresses = []v1.NodeAddress{{Type: v1.NodeInternalIP, Address: "192.168.1.10"}}
	if _, err := c.CoreV1().Nodes().UpdateStatus(t.Context(), node, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}

	env := map[string]string{PodNamespaceEnv: "default"}
	a, err := New(Options{
		ConfigFile: filepath.Join(dir, "config.yaml"), Kubeconfig: kubeconfig, Dataplane: DataplaneSim,
		Getenv: func(k string) string { return env[k] },
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})

	var got *v1.Node
	err = wait.PollUntilContextTimeout(t.Context(), 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		got, err = c.CoreV1().Nodes().Get(ctx, "node-1", metav1.GetOptions{})
		return err == nil && len(got.Spec.PodCIDRs) > 0, nil
	})
	if err != nil {
		t.Fatalf("node-1 never got pod CIDRs: %v", err)
	}
	if got.Spec.PodCIDR != "10.244.0.0/26" {
		t.Errorf("node-1 pod CIDR %q, want the first /26, 10.244.0.0/26", got.Spec.PodCIDR)
	}
	lease, err := c.CoordinationV1().Leases("default").Get(t.Context(), nodecidr.LeaseName, metav1.GetOptions{})
	if err != nil || lease.Spec.HolderIdentity == nil || !strings.HasPrefix(*lease.Spec.HolderIdentity, "node-1_") {
		t.Errorf("Lease default/%s: %v, %v; want it held by node-1's agent (node-1_<uuid>)", nodecidr.LeaseName, lease, err)
	}
	want := []netip.Prefix{netip.MustParsePrefix("10.244.0.0/26")}
	err = wait.PollUntilContextTimeout(t.Context(), 100*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
		a.mu.Lock()
		defer a.mu.Unlock()
		return a.rt.cniReady && a.rt.local != nil && slices.Equal(a.rt.local.PodCIDRs, want), nil
	})
	if err != nil {
		t.Fatalf("the network never came up on %v: %v", want, err)
	}
}
