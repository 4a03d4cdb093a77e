package main

import (
	"encoding/json"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	"sigs.k8s.io/yaml"

	"github.com/nodenet/nodenet/agent/status"
)

func local(addr string) status.Endpoint {
	return status.Endpoint{Address: addr, Node: "node-1", Local: true, Ready: true}
}

func remote(addr string) status.Endpoint {
	return status.Endpoint{Address: addr, Node: "node-2", Ready: true}
}

// testServices covers each way a port's backends print.
func testServices() *status.Services {
	web := []status.Endpoint{local("10.244.1.5:8080"), remote("10.244.2.7:8080")}
	return &status.Services{Ports: []status.ServicePort{
		{
			Name: "default/web:http/TCP", Family: "IPv4", Type: "ClusterIP", ClusterIP: "10.96.0.10", Port: 80,
			InternalEndpoints: web, HasEndpoints: true,
		},
		{
			Name: "default/web-np:TCP", Family: "IPv4", Type: "NodePort", ClusterIP: "10.96.0.11", Port: 80, NodePort: 30080,
			SessionAffinity:   "ClientIP 3h0m0s",
			InternalEndpoints: web, ExternalEndpoints: web, HasEndpoints: true,
		},
		{
			Name: "default/web-lb:TCP", Family: "IPv4", Type: "LoadBalancer", ClusterIP: "10.96.0.12", Port: 443, NodePort: 30443,
			ExternalIPs: []string{"203.0.113.7"}, LoadBalancerIPs: []string{"198.51.100.1"},
			ExternalPolicyLocal: true,
			InternalEndpoints:   web, ExternalEndpoints: []status.Endpoint{local("10.244.1.5:8080")}, HasEndpoints: true,
		},
		{
			Name: "default/web-lb:TCP", Family: "IPv6", Type: "LoadBalancer", ClusterIP: "fd00::12", Port: 443, NodePort: 30443,
			ExternalPolicyLocal: true,
			InternalEndpoints:   []status.Endpoint{remote("[fd00:10:244:2::7]:8080")}, HasEndpoints: true,
		},
		{
			Name: "kube-system/dns:dns/UDP", Family: "IPv4", Type: "ClusterIP", ClusterIP: "10.96.0.53", Port: 53,
			InternalPolicyLocal: true, HasEndpoints: true,
		},
		{
			Name: "default/empty:TCP", Family: "IPv4", Type: "ClusterIP", ClusterIP: "10.96.0.99", Port: 80,
		},
		{
			Name: "default/close:TCP", Family: "IPv4", Type: "ClusterIP", ClusterIP: "10.96.0.20", Port: 80,
			TrafficDistribution: "PreferClose", Topology: "PreferSameZone",
			InternalEndpoints: []status.Endpoint{local("10.244.1.5:8080")}, HasEndpoints: true,
		},
		{
			Name: "default/far:TCP", Family: "IPv4", Type: "ClusterIP", ClusterIP: "10.96.0.21", Port: 80,
			TrafficDistribution: "PreferSameNode",
			InternalEndpoints:   []status.Endpoint{remote("10.244.2.7:8080")}, HasEndpoints: true,
		},
		{
			Name: "default/draining:TCP", Family: "IPv4", Type: "ClusterIP", ClusterIP: "10.96.0.98", Port: 80,
			InternalEndpoints: []status.Endpoint{{Address: "10.244.1.9:80", Node: "node-1", Local: true, Terminating: true}},
			HasEndpoints:      true,
		},
	}}
}

func TestServicesPrintsOneRowPerServicePort(t *testing.T) {
	sock := fakeAgent{services: testServices()}.start(t)
	r := runCtl(nil, "services", "--socket", sock)
	if r.code != exitOK {
		t.Fatalf("exit code %d; stderr:\n%s", r.code, r.stderr)
	}
	got := lines(r.stdout)
	tests := []struct {
		name string
		line string
	}{
		{"the header names the columns", "NAME FAMILY TYPE FRONTENDS AFFINITY POLICY BACKENDS"},
		{"a ClusterIP port lists its backends and marks the local one",
			"default/web:http/TCP IPv4 ClusterIP 10.96.0.10:80 - iTP=Cluster 10.244.1.5:8080 (local), 10.244.2.7:8080"},
		{"a NodePort port shows its node port, affinity and external policy",
			"default/web-np:TCP IPv4 NodePort 10.96.0.11:80, nodePort 30080 ClientIP 3h0m0s iTP=Cluster eTP=Cluster 10.244.1.5:8080 (local), 10.244.2.7:8080"},
		{"eTP Local shows the external backends apart",
			"default/web-lb:TCP IPv4 LoadBalancer 10.96.0.12:443, nodePort 30443, external 203.0.113.7:443, lb 198.51.100.1:443 - iTP=Cluster eTP=Local 10.244.1.5:8080 (local), 10.244.2.7:8080; external: 10.244.1.5:8080 (local)"},
		{"eTP Local without local endpoints drops external traffic",
			"default/web-lb:TCP IPv6 LoadBalancer [fd00::12]:443, nodePort 30443 - iTP=Cluster eTP=Local [fd00:10:244:2::7]:8080; external: drop (none may serve this node's traffic)"},
		{"iTP Local without local endpoints drops",
			"kube-system/dns:dns/UDP IPv4 ClusterIP 10.96.0.53:53 - iTP=Local drop (none may serve this node's traffic)"},
		{"trafficDistribution shows what applies here",
			"default/close:TCP IPv4 ClusterIP 10.96.0.20:80 - iTP=Cluster PreferClose:zone 10.244.1.5:8080 (local)"},
		{"trafficDistribution that fell back to every endpoint says so",
			"default/far:TCP IPv4 ClusterIP 10.96.0.21:80 - iTP=Cluster PreferSameNode:all 10.244.2.7:8080"},
		{"a port without endpoints rejects",
			"default/empty:TCP IPv4 ClusterIP 10.96.0.99:80 - iTP=Cluster reject (no endpoints)"},
		{"a terminating endpoint is marked",
			"default/draining:TCP IPv4 ClusterIP 10.96.0.98:80 - iTP=Cluster 10.244.1.9:80 (local, not ready, terminating)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if !slices.Contains(got, tt.line) {
				t.Errorf("no line %q in:\n%s", tt.line, r.stdout)
			}
		})
	}
	if len(got) != 1+len(testServices().Ports) {
		t.Errorf("%d lines, want a header and one per port:\n%s", len(got), r.stdout)
	}
}

func TestServicesOnANodeWithoutServicesSaysSo(t *testing.T) {
	r := runCtl(nil, "services", "--socket", fakeAgent{services: &status.Services{}}.start(t))
	if r.code != exitOK || r.stdout != "No service ports are programmed on this node.\n" {
		t.Errorf("exit code %d, stdout %q", r.code, r.stdout)
	}
}

func TestServicesJSONAndYAMLRoundTrip(t *testing.T) {
	want := testServices()
	sock := fakeAgent{services: want}.start(t)
	for _, tt := range []struct {
		name      string
		format    string
		unmarshal func([]byte, any) error
	}{
		{"json decodes back to the agent's services", "json", json.Unmarshal},
		{"yaml decodes back to the agent's services", "yaml", func(b []byte, v any) error { return yaml.UnmarshalStrict(b, v) }},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := runCtl(nil, "services", "--socket", sock, "-o", tt.format)
			if r.code != exitOK {
				t.Fatalf("exit code %d; stderr:\n%s", r.code, r.stderr)
			}
			var got status.Services
			if err := tt.unmarshal([]byte(r.stdout), &got); err != nil {
				t.Fatalf("%v in:\n%s", err, r.stdout)
			}
			if diff := cmp.Diff(want, &got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}
