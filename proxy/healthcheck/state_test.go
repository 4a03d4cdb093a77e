package healthcheck

import (
	"net/netip"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodenet/nodenet/proxy"
)

func ep(ip string, port uint16, ready bool) proxy.Endpoint {
	return proxy.Endpoint{IP: netip.MustParseAddr(ip), Port: port, Local: true, Ready: ready, Serving: true, Terminating: !ready}
}

type spec struct {
	svc        types.NamespacedName
	port       string
	family     proxy.IPFamily
	hcPort     uint16
	local      []proxy.Endpoint
	localReady int
}

func stateOf(specs ...spec) *proxy.State {
	st := &proxy.State{ServicePorts: map[proxy.ServicePortKey]*proxy.ServicePort{}}
	for _, s := range specs {
		key := proxy.ServicePortKey{
			ServicePortName: proxy.ServicePortName{NamespacedName: s.svc, Port: s.port, Protocol: proxy.TCP},
			Family:          s.family,
		}
		st.ServicePorts[key] = &proxy.ServicePort{
			Key:                 key,
			Type:                proxy.LoadBalancer,
			HealthCheckNodePort: s.hcPort,
			ExternalPolicyLocal: s.hcPort != 0,
			LocalEndpoints:      s.local,
			LocalReadyEndpoints: s.localReady,
		}
	}
	return st
}

func TestHealthCheckMapsFromState(t *testing.T) {
	tests := []struct {
		name       string
		state      *proxy.State
		family     proxy.IPFamily
		wantPorts  map[types.NamespacedName]uint16
		wantCounts map[types.NamespacedName]int
	}{
		{
			name:       "a nil state has no health checks",
			wantPorts:  map[types.NamespacedName]uint16{},
			wantCounts: map[types.NamespacedName]int{},
		},
		{
			name: "services without a health-check port are left out",
			state: stateOf(
				spec{svc: svcA, port: "http", family: proxy.IPv4, local: []proxy.Endpoint{ep("10.0.0.1", 80, true)}},
				spec{svc: svcB, port: "http", family: proxy.IPv4, hcPort: 30001},
			),
			wantPorts:  map[types.NamespacedName]uint16{svcB: 30001},
			wantCounts: map[types.NamespacedName]int{svcB: 0},
		},
		{
			name: "a pod serving several ports of a service counts once",
			state: stateOf(
				spec{svc: svcA, port: "http", family: proxy.IPv4, hcPort: 30001, local: []proxy.Endpoint{ep("10.0.0.1", 80, true), ep("10.0.0.2", 80, true)}},
				spec{svc: svcA, port: "https", family: proxy.IPv4, hcPort: 30001, local: []proxy.Endpoint{ep("10.0.0.1", 443, true), ep("10.0.0.3", 443, true)}},
			),
			wantPorts:  map[types.NamespacedName]uint16{svcA: 30001},
			wantCounts: map[types.NamespacedName]int{svcA: 3},
		},
		{
			name: "terminating fallback endpoints are not ready and don't count",
			state: stateOf(
				spec{svc: svcA, port: "http", family: proxy.IPv4, hcPort: 30001, local: []proxy.Endpoint{ep("10.0.0.1", 80, false)}},
			),
			wantPorts:  map[types.NamespacedName]uint16{svcA: 30001},
			wantCounts: map[types.NamespacedName]int{svcA: 0},
		},
		{
			name: "a port's LocalReadyEndpoints is a floor when its lists are shorter",
			state: stateOf(
				spec{svc: svcA, port: "http", family: proxy.IPv4, hcPort: 30001, local: []proxy.Endpoint{ep("10.0.0.1", 80, true)}, localReady: 4},
			),
			wantPorts:  map[types.NamespacedName]uint16{svcA: 30001},
			wantCounts: map[types.NamespacedName]int{svcA: 4},
		},
		{
			name: "both families together give a dual-stack pod one count",
			state: stateOf(
				spec{svc: svcA, port: "http", family: proxy.IPv4, hcPort: 30001, local: []proxy.Endpoint{ep("10.0.0.1", 80, true)}},
				spec{svc: svcA, port: "http", family: proxy.IPv6, hcPort: 30001, local: []proxy.Endpoint{ep("fd00::1", 80, true), ep("fd00::2", 80, true)}},
			),
			wantPorts:  map[types.NamespacedName]uint16{svcA: 30001},
			wantCounts: map[types.NamespacedName]int{svcA: 2},
		},
		{
			name: "one family counts only its own endpoints",
			state: stateOf(
				spec{svc: svcA, port: "http", family: proxy.IPv4, hcPort: 30001, local: []proxy.Endpoint{ep("10.0.0.1", 80, true)}},
				spec{svc: svcA, port: "http", family: proxy.IPv6, hcPort: 30001, local: []proxy.Endpoint{ep("fd00::1", 80, true), ep("fd00::2", 80, true)}},
				spec{svc: svcB, port: "http", family: proxy.IPv6, hcPort: 30002},
			),
			family:     proxy.IPv4,
			wantPorts:  map[types.NamespacedName]uint16{svcA: 30001},
			wantCounts: map[types.NamespacedName]int{svcA: 1},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.wantPorts, HealthCheckNodePorts(tt.state, tt.family)); diff != "" {
				t.Errorf("HealthCheckNodePorts (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.wantCounts, LocalReadyEndpoints(tt.state, tt.family)); diff != "" {
				t.Errorf("LocalReadyEndpoints (-want +got):\n%s", diff)
			}
		})
	}
}
