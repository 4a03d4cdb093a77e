package main

// Address plan: as in main_test.go, plus node-b (192.168.1.12, pod CIDR
// 10.244.2.0/24) and node-c (192.168.1.13, 10.244.3.0/24).

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/nodenet/nodenet/agent/status"
)

const offlineNodes = `apiVersion: v1
kind: Node
metadata: {name: node-a}
spec: {podCIDRs: [10.244.1.0/24]}
status: {addresses: [{type: InternalIP, address: 192.168.1.11}]}
---
apiVersion: v1
kind: Node
metadata:
  name: node-b
  annotations:
    flannel.alpha.coreos.com/backend-type: vxlan
    flannel.alpha.coreos.com/backend-data: '{"VNI":4096,"VtepMAC":"5a:7f:1e:70:e8:54"}'
spec: {podCIDRs: [10.244.2.0/24]}
status: {addresses: [{type: InternalIP, address: 192.168.1.12}]}
`

const offlineNodeC = `apiVersion: v1
kind: Node
metadata:
  name: node-c
  annotations:
    flannel.alpha.coreos.com/backend-type: vxlan
    flannel.alpha.coreos.com/backend-data: '{"VNI":4096,"VtepMAC":"9e:21:4c:0b:7a:13"}'
spec: {podCIDRs: [10.244.3.0/24]}
status: {addresses: [{type: InternalIP, address: 192.168.1.13}]}
`

// TestAgentProcessOffline runs nodenet-agent as a process with a files
// source, --dataplane=sim and no kubeconfig, API server or service
// account: the folder supplies this Node and its peers too. It becomes
// ready, serves its status and dump over the local socket, follows a
// Node added to the folder, logs a bad manifest naming its file and
// object while using the rest, and exits 0 on SIGTERM.
func TestAgentProcessOffline(t *testing.T) {
	// A short directory: unix socket paths are limited to 107 bytes.
	dir, err := os.MkdirTemp("", "nn-offline")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	manifests := filepath.Join(dir, "manifests")
	if err := os.Mkdir(manifests, 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, manifests, "nodes.yaml", offlineNodes)
	writeFile(t, manifests, "web.yaml", simManifests)
	// An EndpointSlice on a Node no manifest declares: an error, and not used.
	writeFile(t, manifests, "stray.yaml", strings.NewReplacer("web-1", "stray-1", "node-b", "node-z").Replace(simManifests[strings.Index(simManifests, "apiVersion: discovery"):]))
	cfgFile, healthz, _ := writeSimAgentConfig(t, dir)

	// Nothing that could lead to an API server.
	for _, env := range []string{"KUBERNETES_SERVICE_HOST", "KUBERNETES_SERVICE_PORT", "KUBECONFIG", "NODENET_APISERVER"} {
		t.Setenv(env, "")
	}
	cmd := exec.Command(os.Args[0], "--config", cfgFile, "--dataplane=sim", "--source=files:"+manifests, "--v=2")
	logPath := filepath.Join(dir, "agent.log")
	agent := startAgent(t, cmd, logPath)
	agent.waitReady(t, fmt.Sprintf("http://127.0.0.1:%d/readyz", healthz))
	c := status.NewClient(filepath.Join(dir, "run", status.SocketName))
	ctx := t.Context()

	t.Run("status says the network is up with node-b as a peer and the proxy synced from the folder", func(t *testing.T) {
		st, err := c.Status(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if !st.Network.Ready || st.Network.NodeIP != "192.168.1.11" || st.Network.SourceVIP != "10.244.1.2" || st.Network.RemoteNodes != 1 {
			t.Errorf("status network %+v, want ready on 192.168.1.11, source VIP 10.244.1.2, 1 remote node", st.Network)
		}
		if st.Proxy.Source != "files:"+manifests || st.Proxy.Syncs < 1 || st.Proxy.ServicePorts != 1 {
			t.Errorf("status proxy %+v, want the files source, synced, 1 service port", st.Proxy)
		}
	})

	t.Run("the dump holds the route to node-b and web's load balancer", func(t *testing.T) {
		// The proxy may first sync before the network has node-b in its
		// table (its backend is left out until then): wait for the next.
		wants := []string{"RemoteSubnetRoute 10.244.2.0/24 -> PA 192.168.1.12", "10.96.0.10:80/TCP -> 8080", "(10.244.2.10 remote)"}
		if err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 20*time.Second, true, func(context.Context) (bool, error) {
			text := dumpText(t, c)
			for _, want := range wants {
				if !strings.Contains(text, want) {
					return false, nil
				}
			}
			return true, nil
		}); err != nil {
			t.Errorf("the dump never held %q:\n%s", wants, dumpText(t, c))
		}
	})

	t.Run("a Node added to the folder is routed to", func(t *testing.T) {
		writeFile(t, manifests, "node-c.yaml", offlineNodeC)
		if err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 20*time.Second, true, func(context.Context) (bool, error) {
			return strings.Contains(dumpText(t, c), "RemoteSubnetRoute 10.244.3.0/24 -> PA 192.168.1.13"), nil
		}); err != nil {
			t.Errorf("node-c never routed:\n%s", dumpText(t, c))
		}
	})

	t.Run("the bad manifest is logged with its file and object", func(t *testing.T) {
		log := readFile(t, logPath)
		if !strings.Contains(log, `stray.yaml:1: EndpointSlice default/stray-1: endpoint 10.244.2.10 is on Node \"node-z\", which no manifest declares`) {
			t.Errorf("the log does not name the stray EndpointSlice:\n%s", log)
		}
		if strings.Contains(dumpText(t, c), "stray") {
			t.Error("the stray EndpointSlice was programmed")
		}
	})

	agent.terminate(t)
}

func dumpText(t *testing.T, c *status.Client) string {
	t.Helper()
	d, err := c.Dump(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for _, s := range d.Sections {
		b.WriteString(s.Text)
	}
	return b.String()
}
