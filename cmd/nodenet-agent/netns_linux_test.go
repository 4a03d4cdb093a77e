package main

// Address plan: node-a is the first netnode node (eth0 192.168.(77+k).11
// on the underlay, the apiserver on .1) with pod CIDR 10.244.1.0/24
// (bridge nodenet holding gateway 10.244.1.1); service web 10.96.0.10:80
// has one endpoint 10.244.1.10:8080.

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/nodenet/nodenet/agent/status"
	"github.com/nodenet/nodenet/test/apiserver"
	"github.com/nodenet/nodenet/test/netnode"
)

// TestAgentProcessOnLinux runs nodenet-agent with --dataplane=linux in a
// node's network namespace against a real API server: it builds the bridge
// and the nftables table, becomes ready, and on SIGTERM exits 0 leaving
// both in place; a second run adopts them and becomes ready again.
func TestAgentProcessOnLinux(t *testing.T) {
	env := netnode.New(t, netnode.Options{Nodes: []string{"node-a"}})
	node := env.Nodes[0]
	srv := apiserver.StartForTest(t, apiserver.Options{BindAddress: env.HostIP.String()})
	ctx := t.Context()
	client := srv.Client()
	n, err := client.CoreV1().Nodes().Create(ctx, &v1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: node.Name, Annotations: map[string]string{"test": "true"}},
		Spec:       v1.NodeSpec{PodCIDR: "10.244.1.0/24", PodCIDRs: []string{"10.244.1.0/24"}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	n.Status.Addresses = []v1.NodeAddress{{Type: v1.NodeInternalIP, Address: node.IP.String()}}
	if _, err := client.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	createWebService(ctx, t, srv)

	dir, err := os.MkdirTemp("", "nn-agent")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	kubeconfig := filepath.Join(dir, "kubeconfig")
	if err := srv.WriteKubeconfig(kubeconfig); err != nil {
		t.Fatal(err)
	}
	cfgFile := writeFile(t, dir, "config.yaml", fmt.Sprintf(`apiVersion: nodenet.io/v1alpha1
kind: AgentConfiguration
clusterCIDRs: [10.244.0.0/16]
serviceCIDRs: [10.96.0.0/12]
nodeName: %s
minSyncPeriod: 100ms
network: {mode: overlay, name: nodenet}
proxy:
  healthzBindAddress: %s:10256
  metricsBindAddress: %s:10249
cni:
  socketPath: %s/run/cni.sock
  confDir: %s/net.d
  binDir: %s/bin
  dataDir: %s/data
`, node.Name, node.IP, node.IP, dir, dir, dir, dir))
	readyz := fmt.Sprintf("http://%s:10256/readyz", node.IP)
	logPath := filepath.Join(dir, "agent.log")
	start := func() *agentProcess {
		return startAgent(t, node.Command(context.Background(), os.Args[0],
			"--config", cfgFile, "--kubeconfig", kubeconfig, "--dataplane=linux", "--v=2"), logPath)
	}

	agent := start()
	agent.waitReady(t, readyz)
	c := status.NewClient(filepath.Join(dir, "run", status.SocketName))
	st, err := c.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// The service ports are web's and the apiserver's own (kubernetes).
	if !st.Network.Ready || st.Proxy.Backend != "nftables" || st.Proxy.ServicePorts != 2 {
		t.Errorf("status network %+v proxy %+v, want ready, nftables, 2 service ports", st.Network, st.Proxy)
	}
	dump, err := c.Dump(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(dump.Sections) == 0 || !strings.Contains(dump.Sections[0].Text, "10.96.0.10") {
		t.Errorf("dump does not show the service's cluster IP: %+v", dump)
	}
	agent.terminate(t)

	// Shutdown leaves the dataplane programmed.
	if out, err := node.Run(ctx, "ip", "-o", "addr", "show", "dev", "nodenet"); err != nil || !strings.Contains(out, "10.244.1.1/24") {
		t.Errorf("bridge after shutdown: %v\n%s", err, out)
	}
	if out, err := node.Run(ctx, "nft", "list", "table", "inet", "nodenet"); err != nil || !strings.Contains(out, "10.96.0.10") {
		t.Errorf("nftables table after shutdown: %v\n%s", err, out)
	}

	// A restart adopts the network: the controller reports no writes.
	if err := os.Truncate(logPath, 0); err != nil {
		t.Fatal(err)
	}
	agent = start()
	agent.waitReady(t, readyz)
	agent.terminate(t)
	data, err := os.ReadFile(logPath)
	if err != nil {
		t.Fatal(err)
	}
	for _, unwanted := range []string{"Node network programmed", "Wrote the CNI conflist"} {
		if strings.Contains(string(data), unwanted) {
			t.Errorf("restart logged %q: it wrote to a dataplane that was already right", unwanted)
		}
	}
}

// createWebService creates Service web (10.96.0.10:80) with one endpoint.
func createWebService(ctx context.Context, t *testing.T, srv *apiserver.Server) {
	t.Helper()
	client := srv.Client()
	if _, err := client.CoreV1().Services("default").Create(ctx, &v1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec: v1.ServiceSpec{ClusterIP: "10.96.0.10", Ports: []v1.ServicePort{{
			Name: "http", Port: 80, TargetPort: intstr.FromInt32(8080), Protocol: v1.ProtocolTCP,
		}}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := client.DiscoveryV1().EndpointSlices("default").Create(ctx, &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Name: "web-1", Labels: map[string]string{discoveryv1.LabelServiceName: "web"}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: ptr.To("http"), Port: ptr.To[int32](8080), Protocol: ptr.To(v1.ProtocolTCP)}},
		Endpoints: []discoveryv1.Endpoint{{
			Addresses: []string{"10.244.1.10"}, NodeName: ptr.To("node-a"),
			Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)},
		}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}
