package agent

// Address plan: service web has cluster IP 10.96.0.10 (and fd00:10:96::10),
// node port 30080, external IP 192.168.1.100; endpoints 10.244.1.10 on
// node-a (this node) and 10.244.2.10 on node-b.

import (
	"net/netip"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodenet/nodenet/agent/status"
	"github.com/nodenet/nodenet/proxy"
)

func TestServicesOf(t *testing.T) {
	web := proxy.ServicePortName{NamespacedName: types.NamespacedName{Namespace: "default", Name: "web"}, Port: "http", Protocol: proxy.TCP}
	local := proxy.Endpoint{IP: ip("10.244.1.10"), Port: 8080, NodeName: "node-a", Local: true, Ready: true, Serving: true}
	remote := proxy.Endpoint{IP: ip("10.244.2.10"), Port: 8080, NodeName: "node-b", Serving: true, Terminating: true}
	st := &proxy.State{ServicePorts: map[proxy.ServicePortKey]*proxy.ServicePort{
		{ServicePortName: web, Family: proxy.IPv6}: {
			Key:       proxy.ServicePortKey{ServicePortName: web, Family: proxy.IPv6},
			Type:      proxy.ClusterIP,
			ClusterIP: ip("fd00:10:96::10"),
			Port:      80,
		},
		{ServicePortName: web, Family: proxy.IPv4}: {
			Key:                 proxy.ServicePortKey{ServicePortName: web, Family: proxy.IPv4},
			Type:                proxy.NodePort,
			ClusterIP:           ip("10.96.0.10"),
			Port:                80,
			NodePort:            30080,
			ExternalIPs:         []netip.Addr{ip("192.168.1.100")},
			SessionAffinity:     3 * time.Hour,
			ExternalPolicyLocal: true,
			TrafficDistribution: "PreferClose",
			Topology:            "PreferSameZone",
			InternalEndpoints:   []proxy.Endpoint{local, remote},
			ExternalEndpoints:   []proxy.Endpoint{local},
			HasEndpoints:        true,
		},
	}}
	want := status.Services{Ports: []status.ServicePort{
		{
			Name: "default/web:http/TCP", Family: "IPv4", Type: "NodePort",
			ClusterIP: "10.96.0.10", Port: 80, NodePort: 30080,
			ExternalIPs:         []string{"192.168.1.100"},
			SessionAffinity:     "ClientIP 3h0m0s",
			ExternalPolicyLocal: true,
			TrafficDistribution: "PreferClose",
			Topology:            "PreferSameZone",
			InternalEndpoints: []status.Endpoint{
				{Address: "10.244.1.10:8080", Node: "node-a", Local: true, Ready: true},
				{Address: "10.244.2.10:8080", Node: "node-b", Terminating: true},
			},
			ExternalEndpoints: []status.Endpoint{{Address: "10.244.1.10:8080", Node: "node-a", Local: true, Ready: true}},
			HasEndpoints:      true,
		},
		{
			Name: "default/web:http/TCP", Family: "IPv6", Type: "ClusterIP",
			ClusterIP: "fd00:10:96::10", Port: 80,
			InternalEndpoints: []status.Endpoint{},
		},
	}}
	if diff := cmp.Diff(want, ServicesOf(st)); diff != "" {
		t.Errorf("ServicesOf (-want +got):\n%s", diff)
	}
	if got := ServicesOf(nil); got.Ports == nil || len(got.Ports) != 0 {
		t.Errorf("ServicesOf(nil) = %#v, want an empty, non-nil list (JSON [])", got)
	}
}
