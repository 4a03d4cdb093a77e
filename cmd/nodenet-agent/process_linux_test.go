package main

// Address plan: as in main_test.go.

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/nodenet/nodenet/agent/status"
	"github.com/nodenet/nodenet/test/apiserver"
)

const simManifests = `apiVersion: v1
kind: Service
metadata: {name: web, namespace: default}
spec:
  clusterIP: 10.96.0.10
  ports: [{name: http, port: 80, targetPort: 8080, protocol: TCP}]
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata:
  name: web-1
  namespace: default
  labels: {kubernetes.io/service-name: web}
addressType: IPv4
ports: [{name: http, port: 8080, protocol: TCP}]
endpoints:
- addresses: [10.244.1.10]
  nodeName: node-a
  conditions: {ready: true}
- addresses: [10.244.2.10]
  nodeName: node-b
  conditions: {ready: true}
`

// TestAgentProcessOnTheSimulator runs nodenet-agent as a process with
// --dataplane=sim and a files source against a real API server: it becomes
// ready, programs the simulated HNS from the one config, answers on its
// local API and exits 0 on SIGTERM.
func TestAgentProcessOnTheSimulator(t *testing.T) {
	srv := apiserver.StartForTest(t, apiserver.Options{})
	ctx := t.Context()
	client := srv.Client()
	if _, err := client.CoreV1().Nodes().Create(ctx, &v1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: "node-a", Annotations: map[string]string{"test": "true"}},
		Spec:       v1.NodeSpec{PodCIDR: "10.244.1.0/24", PodCIDRs: []string{"10.244.1.0/24"}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	node, err := client.CoreV1().Nodes().Get(ctx, "node-a", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	node.Status.Addresses = []v1.NodeAddress{{Type: v1.NodeInternalIP, Address: "192.168.1.11"}}
	if _, err := client.CoreV1().Nodes().UpdateStatus(ctx, node, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}

	// A short directory: unix socket paths are limited to 107 bytes.
	dir, err := os.MkdirTemp("", "nn-agent")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	kubeconfig := filepath.Join(dir, "kubeconfig")
	if err := srv.WriteKubeconfig(kubeconfig); err != nil {
		t.Fatal(err)
	}
	manifests := filepath.Join(dir, "manifests")
	if err := os.Mkdir(manifests, 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, manifests, "web.yaml", simManifests)
	cfgFile, healthz, metrics := writeSimAgentConfig(t, dir)

	t.Run("a bad config exits 1 naming the field and records an Event on the Node", func(t *testing.T) {
		bad := writeFile(t, dir, "bad.yaml", strings.Replace(readFile(t, cfgFile), "enableDSR: true", "enableDSR: true\n  nodePortAddresses: [nonsense]", 1))
		var out strings.Builder
		cmd := exec.Command(os.Args[0], "--config", bad, "--kubeconfig", kubeconfig, "--dataplane=sim")
		cmd.Env = append(os.Environ(), runAsAgentEnv+"=1")
		cmd.Stdout, cmd.Stderr = &out, &out
		err := cmd.Run()
		if exitErr, ok := err.(*exec.ExitError); !ok || exitErr.ExitCode() != exitFailed {
			t.Fatalf("agent ended with %v, want exit status 1; output:\n%s", err, out.String())
		}
		if !strings.Contains(out.String(), "proxy.nodePortAddresses[0]") {
			t.Errorf("output does not name proxy.nodePortAddresses[0]:\n%s", out.String())
		}
		events, err := client.CoreV1().Events(metav1.NamespaceDefault).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=node-a,reason=InvalidConfig"})
		if err != nil {
			t.Fatal(err)
		}
		if len(events.Items) != 1 || !strings.Contains(events.Items[0].Message, "proxy.nodePortAddresses[0]") {
			t.Errorf("InvalidConfig events on node-a: %+v, want one naming the field", events.Items)
		}
		if _, err := os.Stat(filepath.Join(dir, "run")); err == nil {
			t.Error("the agent created its socket directory before refusing the config")
		}
	})

	cmd := exec.Command(os.Args[0], "--config", cfgFile, "--kubeconfig", kubeconfig,
		"--dataplane=sim", "--source=files:"+manifests, "--v=2")
	agent := startAgent(t, cmd, filepath.Join(dir, "agent.log"))
	agent.waitReady(t, fmt.Sprintf("http://127.0.0.1:%d/readyz", healthz))

	t.Run("the local API reports the network and the proxy", func(t *testing.T) {
		c := status.NewClient(filepath.Join(dir, "run", status.SocketName))
		st, err := c.Status(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if !st.Network.Ready || st.Network.SourceVIP != "10.244.1.2" || st.Network.NodeIP != "192.168.1.11" || !st.CNI.Ready {
			t.Errorf("status network %+v cni %+v, want ready with source VIP 10.244.1.2 on 192.168.1.11", st.Network, st.CNI)
		}
		if st.Dataplane != "sim" || st.Proxy.Backend != "hns" || !st.Proxy.DSR || st.Proxy.Syncs < 1 || st.Proxy.ServicePorts != 1 {
			t.Errorf("status proxy %+v, want the hns backend with DSR, synced, 1 service port", st.Proxy)
		}
		// The simulator's default host: Windows Server 2025 with the
		// ModifyLoadBalancer fix (hns.VersionDefault).
		if h := st.HNS; h == nil || !h.Simulated || h.Version != "15.5" || h.WindowsBuild != "26100.0" || h.MaxBackendsPerLoadBalancer != 1024 || len(h.Features) != 7 {
			t.Errorf("status hns %+v, want the simulated HNS 15.5 on build 26100.0 with 1024 backends and 7 features", h)
		}
		svcs, err := c.Services(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(svcs.Ports) != 1 || svcs.Ports[0].ClusterIP != "10.96.0.10" || len(svcs.Ports[0].InternalEndpoints) != 2 {
			t.Errorf("services = %+v, want web with 2 endpoints", svcs)
		}
		dump, err := c.Dump(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var text strings.Builder
		for _, s := range dump.Sections {
			text.WriteString(s.Text)
		}
		for _, want := range []string{"10.96.0.10", "nodenet_sourcevip", "10.244.1.2"} {
			if !strings.Contains(text.String(), want) {
				t.Errorf("dump does not mention %s:\n%s", want, text.String())
			}
		}
	})

	t.Run("the conflist is written and the Node says the network is available", func(t *testing.T) {
		if _, err := os.Stat(filepath.Join(dir, "net.d", "10-nodenet.conflist")); err != nil {
			t.Error(err)
		}
		// The agent reports ready once the network is up (OnReady); the
		// condition's patch follows it, so wait for it rather than race it.
		var conds []v1.NodeCondition
		err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 20*time.Second, true, func(context.Context) (bool, error) {
			n, err := client.CoreV1().Nodes().Get(ctx, "node-a", metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			conds = n.Status.Conditions
			for _, c := range conds {
				if c.Type == v1.NodeNetworkUnavailable {
					return c.Status == v1.ConditionFalse, nil
				}
			}
			return false, nil
		})
		if err != nil {
			t.Errorf("Node conditions %+v, want NetworkUnavailable=False: %v", conds, err)
		}
	})

	t.Run("metrics are served", func(t *testing.T) {
		code, body := get(fmt.Sprintf("http://127.0.0.1:%d/metrics", metrics))
		if code != http.StatusOK || !strings.Contains(body, "kubeproxy_sync_proxy_rules_duration_seconds") {
			t.Errorf("/metrics: %d, want 200 with kubeproxy_sync_proxy_rules_duration_seconds", code)
		}
	})

	agent.terminate(t)
}

// agentProcess is one nodenet-agent process.
type agentProcess struct {
	cmd    *exec.Cmd
	exited chan error
	log    string
}

// startAgent starts cmd, this test binary (or something that execs it) as
// nodenet-agent, logging to logPath; the process is killed at the end of
// the test if still running, and its log shown if the test failed.
func startAgent(t *testing.T, cmd *exec.Cmd, logPath string) *agentProcess {
	t.Helper()
	cmd.Env = append(os.Environ(), runAsAgentEnv+"=1")
	logs, err := os.OpenFile(logPath, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer logs.Close()
	cmd.Stdout, cmd.Stderr = logs, logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &agentProcess{cmd: cmd, exited: make(chan error, 1), log: logPath}
	go func() { p.exited <- cmd.Wait() }()
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
			<-p.exited
		}
		if t.Failed() || os.Getenv("NODENET_TEST_AGENT_LOG") != "" {
			data, _ := os.ReadFile(logPath)
			t.Logf("agent log:\n%s", data)
		}
	})
	return p
}

// waitReady waits for /readyz at url to answer 200.
func (p *agentProcess) waitReady(t *testing.T, url string) {
	t.Helper()
	if err := wait.PollUntilContextTimeout(t.Context(), 100*time.Millisecond, 20*time.Second, true, func(context.Context) (bool, error) {
		select {
		case err := <-p.exited:
			p.exited <- err
			return false, fmt.Errorf("agent exited before it was ready: %v", err)
		default:
		}
		code, _ := get(url)
		return code == http.StatusOK, nil
	}); err != nil {
		code, body := get(url)
		t.Fatalf("%s never answered 200 (last: %d %s): %v", url, code, body, err)
	}
}

// terminate sends SIGTERM and expects exit status 0.
func (p *agentProcess) terminate(t *testing.T) {
	t.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-p.exited:
		if err != nil {
			t.Errorf("agent exited with %v after SIGTERM, want status 0", err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("agent still running 15s after SIGTERM")
	}
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

func get(url string) (int, string) {
	resp, err := http.Get(url)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

// freePort returns a loopback TCP port that was free a moment ago.
func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// writeSimAgentConfig writes the config the agent process tests run with
// (node-a, overlay, DSR, sockets and CNI dirs under dir, free healthz and
// metrics ports) and returns its path and the two ports.
func writeSimAgentConfig(t *testing.T, dir string) (cfgFile string, healthz, metrics int) {
	t.Helper()
	healthz, metrics = freePort(t), freePort(t)
	cfgFile = writeFile(t, dir, "config.yaml", fmt.Sprintf(`apiVersion: nodenet.io/v1alpha1
kind: AgentConfiguration
clusterCIDRs: [10.244.0.0/16]
serviceCIDRs: [10.96.0.0/12]
nodeName: node-a
minSyncPeriod: 100ms
network: {mode: overlay, name: nodenet}
proxy:
  enableDSR: true
  healthzBindAddress: 127.0.0.1:%d
  metricsBindAddress: 127.0.0.1:%d
cni:
  socketPath: %s/run/cni.sock
  confDir: %s/net.d
  binDir: %s/bin
  dataDir: %s/data
`, healthz, metrics, dir, dir, dir, dir))
	return cfgFile, healthz, metrics
}
