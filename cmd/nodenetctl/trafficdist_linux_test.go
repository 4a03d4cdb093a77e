package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestProxyRenderShowsTrafficDistribution renders manifests with
// trafficDistribution for node-a (zone-a; node-c is in zone-b): the state
// view names the Service's value and what applies here: zone, node or
// every endpoint.
func TestProxyRenderShowsTrafficDistribution(t *testing.T) {
	dir := t.TempDir()
	files := map[string]string{
		"node.yaml": "apiVersion: v1\nkind: Node\nmetadata: {name: node-a, labels: {topology.kubernetes.io/zone: zone-a}}\n" +
			"status: {addresses: [{type: InternalIP, address: 192.168.1.10}]}\n---\n" +
			"apiVersion: v1\nkind: Node\nmetadata: {name: node-c, labels: {topology.kubernetes.io/zone: zone-b}}\n" +
			"status: {addresses: [{type: InternalIP, address: 192.168.1.12}]}\n",
		"svc.yaml": zonedManifests("close", "10.96.30.1", "zone-a") + "---\n" + zonedManifests("far", "10.96.30.2", "zone-b"),
	}
	for name, text := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got := runArgs("proxy", "render", "--config", testdata+"agent-minimal.yaml", "--manifests", dir, "--node", "node-a", "--node-ip", "192.168.1.10", "-o", "state")
	if got.code != exitOK {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", got.code, got.stdout, got.stderr)
	}
	for _, want := range []string{
		"shop/close:TCP/IPv4  ClusterIP 10.96.30.1:80\n  traffic distribution   PreferClose, applied here: PreferSameZone\n  internal traffic       Cluster: 10.244.1.5:8080 (local)\n",
		"shop/far:TCP/IPv4  ClusterIP 10.96.30.2:80\n  traffic distribution   PreferClose, applied here: every endpoint\n  internal traffic       Cluster: 10.244.3.5:8080\n",
	} {
		if !strings.Contains(got.stdout, want) {
			t.Errorf("stdout lacks %q:\n%s", want, got.stdout)
		}
	}
}

// zonedManifests is a PreferClose Service and its slice: one endpoint on
// node-a when zone is zone-a, else one on node-c; hinted for its zone.
func zonedManifests(name, clusterIP, zone string) string {
	ip, node := "10.244.1.5", "node-a"
	if zone != "zone-a" {
		ip, node = "10.244.3.5", "node-c"
	}
	return "apiVersion: v1\nkind: Service\nmetadata: {name: " + name + ", namespace: shop}\n" +
		"spec: {clusterIP: " + clusterIP + ", trafficDistribution: PreferClose, ports: [{port: 80, targetPort: 8080}]}\n---\n" +
		"apiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\n" +
		"metadata: {name: " + name + "-1, namespace: shop, labels: {kubernetes.io/service-name: " + name + "}}\n" +
		"addressType: IPv4\nports: [{port: 8080}]\n" +
		"endpoints: [{addresses: [" + ip + "], nodeName: " + node + ", zone: " + zone + ", hints: {forZones: [{name: " + zone + "}]}}]\n"
}
