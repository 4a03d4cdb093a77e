package hnsendpoint

// Address plan: see fixture_test.go (pods 10.244.1.5-.7 on 10.244.1.0/24,
// node 192.168.1.11, services 10.96.0.0/12, outside 8.8.8.8).

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/containernetworking/cni/pkg/types"
	current "github.com/containernetworking/cni/pkg/types/100"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/nodenet/nodenet/cni"
	"github.com/nodenet/nodenet/config"
	"github.com/nodenet/nodenet/hns"
)

func TestAddCreatesAnEndpointAttachedToThePodNamespace(t *testing.T) {
	for _, mode := range modes {
		t.Run("in "+string(mode)+" mode the pod gets its address, derived MAC, gateway route, DNS and policies", func(t *testing.T) {
			h := newHost(t, mode, hostOptions{})
			nsID := h.namespace(t)
			p := pod(containerA, "eth0", nsID, "10.244.1.5")
			h.sim.ResetCalls()

			res, err := h.w.Add(bg, h.nw, p)
			if err != nil {
				t.Fatalf("Add: %v", err)
			}
			ep := h.endpoint(t, p)
			want := &hns.Endpoint{
				Name:                 "nodenet-pod:" + containerA + ":eth0",
				HostComputeNetwork:   h.net.ID,
				HostComputeNamespace: nsID,
				IpConfigurations:     []hns.IPConfig{{IpAddress: "10.244.1.5", PrefixLength: 24}},
				MacAddress:           "0E-2A-0A-F4-01-05",
				Routes:               []hns.Route{{NextHop: podGateway, DestinationPrefix: "0.0.0.0/0"}},
				DNS:                  hns.DNS{ServerList: []string{clusterDNS}, Domain: "cluster.local", Search: []string{"svc.cluster.local"}},
				Policies:             basePolicies(mode),
				SchemaVersion:        hns.V2,
			}
			if diff := cmp.Diff(want, ep, cmpopts.IgnoreFields(hns.Endpoint{}, "ID")); diff != "" {
				t.Errorf("endpoint (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff([]string{ep.ID}, h.attached(t, nsID)); diff != "" {
				t.Errorf("namespace endpoints (-want +got):\n%s", diff)
			}

			wantRes := &current.Result{
				CNIVersion: current.ImplementedSpecVersion,
				Interfaces: []*current.Interface{{Name: "eth0", Mac: "0e:2a:0a:f4:01:05", Sandbox: nsID}},
				IPs: []*current.IPConfig{{
					Interface: current.Int(0),
					Address:   net.IPNet{IP: net.ParseIP("10.244.1.5").To4(), Mask: net.CIDRMask(24, 32)},
					Gateway:   net.ParseIP(podGateway).To4(),
				}},
				Routes: []*types.Route{{Dst: net.IPNet{IP: net.IPv4zero.To4(), Mask: net.CIDRMask(0, 32)}, GW: net.ParseIP(podGateway).To4()}},
				DNS:    types.DNS{Nameservers: []string{clusterDNS}, Domain: "cluster.local", Search: []string{"svc.cluster.local"}},
			}
			if diff := cmp.Diff(wantRes, res); diff != "" {
				t.Errorf("result (-want +got):\n%s", diff)
			}
			if got := h.sim.CallCounts(); got[hns.OpCreateEndpoint] != 1 || got[hns.OpAddNamespaceEndpoint] != 1 || h.sim.Writes() != 2 {
				t.Errorf("want exactly one create and one attach, calls: %v", got)
			}
		})
	}
}

func TestAddPolicies(t *testing.T) {
	cases := []struct {
		name  string
		mode  config.NetworkMode
		edit  func(nw *cni.NodeNetwork, p *cni.Pod)
		host  hostOptions
		want  []hns.EndpointPolicy
		dual  bool
		wantE string
	}{
		{
			name: "overlay pods NAT everything but the cluster, services and node subnet, encap the service CIDR and carry the node's provider address",
			mode: config.NetworkModeOverlay,
			want: []hns.EndpointPolicy{outboundNAT("10.244.0.0/16", "10.96.0.0/12", "192.168.1.0/24"), encapRoute("10.96.0.0/12"), providerAddress(nodeIP)},
		},
		{
			name: "l2bridge pods encap the service CIDR and the node IP as /32 instead of a provider address",
			mode: config.NetworkModeL2Bridge,
			want: []hns.EndpointPolicy{outboundNAT("10.244.0.0/16", "10.96.0.0/12", "192.168.1.0/24"), encapRoute("10.96.0.0/12"), encapRoute(nodeIP + "/32")},
		},
		{
			name: "policies follow the node network's CIDRs, not built-in ones",
			mode: config.NetworkModeOverlay,
			edit: func(nw *cni.NodeNetwork, _ *cni.Pod) {
				nw.ClusterCIDRs = append(nw.ClusterCIDRs, mustPrefix("100.64.0.0/10"))
				nw.ServiceCIDRs = []netip.Prefix{mustPrefix("172.30.0.0/16"), mustPrefix("172.31.0.0/16")}
				nw.NodeSubnets = append(nw.NodeSubnets, mustPrefix("192.168.2.0/24"))
			},
			want: []hns.EndpointPolicy{
				outboundNAT("10.244.0.0/16", "100.64.0.0/10", "172.30.0.0/16", "172.31.0.0/16", "192.168.1.0/24", "192.168.2.0/24"),
				encapRoute("172.30.0.0/16"), encapRoute("172.31.0.0/16"), providerAddress(nodeIP),
			},
		},
		{
			name: "with DSR an overlay pod also gets loopback DSR for its own address",
			mode: config.NetworkModeOverlay,
			edit: func(nw *cni.NodeNetwork, _ *cni.Pod) { nw.EnableDSR = true },
			want: append(basePolicies(config.NetworkModeOverlay), loopbackDSR("10.244.1.5")),
		},
		{
			name: "with DSR an l2bridge pod also gets loopback DSR for its own address",
			mode: config.NetworkModeL2Bridge,
			edit: func(nw *cni.NodeNetwork, _ *cni.Pod) { nw.EnableDSR = true },
			want: append(basePolicies(config.NetworkModeL2Bridge), loopbackDSR("10.244.1.5")),
		},
		{
			name:  "DSR on a host whose HNS lacks DSR is refused",
			mode:  config.NetworkModeL2Bridge,
			host:  hostOptions{version: hns.Version{Major: 10, Minor: 0}},
			edit:  func(nw *cni.NodeNetwork, _ *cni.Pod) { nw.EnableDSR = true },
			wantE: "does not support DSR",
		},
		{
			name: "host ports become port mapping policies",
			mode: config.NetworkModeOverlay,
			edit: func(_ *cni.NodeNetwork, p *cni.Pod) {
				p.PortMappings = []cni.PortMapping{
					{HostPort: 8080, ContainerPort: 80, Protocol: "tcp"},
					{HostPort: 5353, ContainerPort: 53, Protocol: "udp", HostIP: nodeIP},
					{HostPort: 8443, ContainerPort: 443, Protocol: "TCP", HostIP: "0.0.0.0"},
				}
			},
			want: append(basePolicies(config.NetworkModeOverlay),
				portMapping(hns.ProtocolTCP, 80, 8080, ""),
				portMapping(hns.ProtocolUDP, 53, 5353, nodeIP),
				portMapping(hns.ProtocolTCP, 443, 8443, "")),
		},
		{
			name: "an sctp host port is refused",
			mode: config.NetworkModeL2Bridge,
			edit: func(_ *cni.NodeNetwork, p *cni.Pod) {
				p.PortMappings = []cni.PortMapping{{HostPort: 8080, ContainerPort: 80, Protocol: "tcp"}, {HostPort: 3868, ContainerPort: 3868, Protocol: "sctp"}}
			},
			wantE: "HNS has no SCTP port mappings",
		},
		{
			name: "a host port with an unknown protocol is refused",
			mode: config.NetworkModeL2Bridge,
			edit: func(_ *cni.NodeNetwork, p *cni.Pod) {
				p.PortMappings = []cni.PortMapping{{HostPort: 1, ContainerPort: 1, Protocol: "icmp"}}
			},
			wantE: `unknown protocol "icmp"`,
		},
		{
			name: "a host port out of range is refused",
			mode: config.NetworkModeL2Bridge,
			edit: func(_ *cni.NodeNetwork, p *cni.Pod) {
				p.PortMappings = []cni.PortMapping{{HostPort: 70000, ContainerPort: 80, Protocol: "tcp"}}
			},
			wantE: "ports must be 1-65535",
		},
		{
			name: "a host port with a malformed host IP is refused",
			mode: config.NetworkModeL2Bridge,
			edit: func(_ *cni.NodeNetwork, p *cni.Pod) {
				p.PortMappings = []cni.PortMapping{{HostPort: 80, ContainerPort: 80, Protocol: "tcp", HostIP: "node"}}
			},
			wantE: `host IP "node" is not an address`,
		},
		{
			name:  "an overlay node network without a node IPv4 address is refused",
			mode:  config.NetworkModeOverlay,
			edit:  func(nw *cni.NodeNetwork, _ *cni.Pod) { nw.NodeIPs = nil },
			wantE: "needs the node's IPv4 address",
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := newHost(t, tc.mode, tc.host)
			p := pod(containerA, "eth0", h.namespace(t), "10.244.1.5")
			if tc.edit != nil {
				tc.edit(h.nw, p)
			}
			h.sim.ResetCalls()
			_, err := h.w.Add(bg, h.nw, p)
			if tc.wantE != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantE) {
					t.Fatalf("Add error = %v, want one containing %q", err, tc.wantE)
				}
				if n := h.sim.Writes(); n != 0 {
					t.Errorf("a refused ADD made %d HNS writes: %v", n, h.sim.CallCounts())
				}
				return
			}
			if err != nil {
				t.Fatalf("Add: %v", err)
			}
			if diff := cmp.Diff(tc.want, h.endpoint(t, p).Policies); diff != "" {
				t.Errorf("policies (-want +got):\n%s", diff)
			}
		})
	}
}

func TestAddDNS(t *testing.T) {
	runtimeDNS := cni.DNS{
		Nameservers: []string{"10.96.0.53"},
		Search:      []string{"default.svc.cluster.local", "svc.cluster.local", "cluster.local"},
		Options:     []string{"ndots:5"},
	}
	cases := []struct {
		name    string
		podDNS  cni.DNS
		wantHNS hns.DNS
	}{
		{
			name:    "the runtime's DNS wins when it sent any",
			podDNS:  runtimeDNS,
			wantHNS: hns.DNS{ServerList: []string{"10.96.0.53"}, Search: runtimeDNS.Search, Options: []string{"ndots:5"}},
		},
		{
			name:    "the node network's DNS is the fallback when the runtime sent none",
			wantHNS: hns.DNS{ServerList: []string{clusterDNS}, Domain: "cluster.local", Search: []string{"svc.cluster.local"}},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := newHost(t, config.NetworkModeOverlay, hostOptions{})
			p := pod(containerA, "eth0", h.namespace(t), "10.244.1.5")
			p.DNS = tc.podDNS
			res, err := h.w.Add(bg, h.nw, p)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.wantHNS, h.endpoint(t, p).DNS); diff != "" {
				t.Errorf("endpoint DNS (-want +got):\n%s", diff)
			}
			wantRes := types.DNS{Nameservers: tc.wantHNS.ServerList, Domain: tc.wantHNS.Domain, Search: tc.wantHNS.Search, Options: tc.wantHNS.Options}
			if diff := cmp.Diff(wantRes, res.DNS); diff != "" {
				t.Errorf("result DNS (-want +got):\n%s", diff)
			}
		})
	}
}

func TestAddDualStackPodGetsBothFamilies(t *testing.T) {
	h := newHost(t, config.NetworkModeL2Bridge, hostOptions{dualStack: true})
	p := pod(containerA, "eth0", h.namespace(t), "10.244.1.5")
	p.Addresses = append(p.Addresses, cni.Address{IP: mustPrefix("fd00:10:244:1::5/64"), Gateway: mustAddr("fd00:10:244:1::1")})
	res, err := h.w.Add(bg, h.nw, p)
	if err != nil {
		t.Fatal(err)
	}
	ep := h.endpoint(t, p)
	if diff := cmp.Diff([]hns.IPConfig{{IpAddress: "10.244.1.5", PrefixLength: 24}, {IpAddress: "fd00:10:244:1::5", PrefixLength: 64}}, ep.IpConfigurations); diff != "" {
		t.Errorf("ip configurations (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]hns.Route{{NextHop: podGateway, DestinationPrefix: "0.0.0.0/0"}, {NextHop: "fd00:10:244:1::1", DestinationPrefix: "::/0"}}, ep.Routes); diff != "" {
		t.Errorf("routes (-want +got):\n%s", diff)
	}
	wantPolicies := []hns.EndpointPolicy{
		outboundNAT("10.244.0.0/16", "fd00:10:244::/48", "10.96.0.0/12", "fd00:10:96::/108", "192.168.1.0/24", "fd00:192:168:1::/64"),
		encapRoute("10.96.0.0/12"), encapRoute("fd00:10:96::/108"),
		encapRoute(nodeIP + "/32"), encapRoute("fd00:192:168:1::11/128"),
	}
	if diff := cmp.Diff(wantPolicies, ep.Policies); diff != "" {
		t.Errorf("policies (-want +got):\n%s", diff)
	}
	if ep.MacAddress != "0E-2A-0A-F4-01-05" {
		t.Errorf("MAC = %s, want the one derived from the IPv4 address", ep.MacAddress)
	}
	if len(res.IPs) != 2 || res.IPs[1].Address.String() != "fd00:10:244:1::5/64" || res.IPs[1].Gateway.String() != "fd00:10:244:1::1" {
		t.Errorf("result IPs = %v, want the IPv4 and IPv6 addresses", res.IPs)
	}
}

func TestAddPortMappingConflictLeavesNothingBehind(t *testing.T) {
	h := newHost(t, config.NetworkModeL2Bridge, hostOptions{})
	first := pod(containerA, "eth0", h.namespace(t), "10.244.1.5")
	first.PortMappings = []cni.PortMapping{{HostPort: 8080, ContainerPort: 80, Protocol: "tcp"}}
	h.mustAdd(t, first)

	second := pod(containerB, "eth0", h.namespace(t), "10.244.1.6")
	second.PortMappings = first.PortMappings
	_, err := h.w.Add(bg, h.nw, second)
	if !hns.IsPortAlreadyExists(err) {
		t.Fatalf("Add error = %v, want one hns.IsPortAlreadyExists recognizes", err)
	}
	if diff := cmp.Diff([]string{"nodenet-pod:" + containerA + ":eth0"}, h.endpointNames(t)); diff != "" {
		t.Errorf("endpoints (-want +got):\n%s", diff)
	}
}

func TestAddRetries(t *testing.T) {
	type step func(t *testing.T, h *host, p *cni.Pod)
	cases := []struct {
		name string
		mode config.NetworkMode
		// between runs after the first ADD and before the retry.
		between step
		// retry may change the pod or network before the second ADD.
		retry func(h *host, p *cni.Pod)
		// wantCalls are the write calls the retry makes.
		wantWrites map[hns.Op]int
		sameID     bool
	}{
		{
			name:       "a retried ADD returns the same endpoint without any HNS write",
			mode:       config.NetworkModeOverlay,
			wantWrites: map[hns.Op]int{},
			sameID:     true,
		},
		{
			name: "a retried ADD reattaches an endpoint that was detached",
			mode: config.NetworkModeOverlay,
			between: func(t *testing.T, h *host, p *cni.Pod) {
				if err := h.sim.RemoveNamespaceEndpoint(bg, p.Netns, h.endpoint(t, p).ID); err != nil {
					t.Fatal(err)
				}
			},
			wantWrites: map[hns.Op]int{hns.OpAddNamespaceEndpoint: 1},
			sameID:     true,
		},
		{
			name:       "a retried ADD with another address replaces the stale endpoint",
			mode:       config.NetworkModeL2Bridge,
			retry:      func(_ *host, p *cni.Pod) { p.Addresses[0].IP = mustPrefix("10.244.1.6/24") },
			wantWrites: map[hns.Op]int{hns.OpRemoveNamespaceEndpoint: 1, hns.OpDeleteEndpoint: 1, hns.OpCreateEndpoint: 1, hns.OpAddNamespaceEndpoint: 1},
		},
		{
			name:       "a retried ADD after DSR was turned on replaces the endpoint with the new policies",
			mode:       config.NetworkModeL2Bridge,
			retry:      func(h *host, _ *cni.Pod) { h.nw.EnableDSR = true },
			wantWrites: map[hns.Op]int{hns.OpRemoveNamespaceEndpoint: 1, hns.OpDeleteEndpoint: 1, hns.OpCreateEndpoint: 1, hns.OpAddNamespaceEndpoint: 1},
		},
		{
			name: "an ADD into a recreated sandbox namespace moves the endpoint there",
			mode: config.NetworkModeOverlay,
			retry: func(h *host, p *cni.Pod) {
				ns, _ := h.sim.CreateNamespace(bg, &hns.Namespace{})
				p.Netns = ns.ID
			},
			wantWrites: map[hns.Op]int{hns.OpRemoveNamespaceEndpoint: 1, hns.OpAddNamespaceEndpoint: 1},
			sameID:     true,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := newHost(t, tc.mode, hostOptions{})
			p := pod(containerA, "eth0", h.namespace(t), "10.244.1.5")
			oldNetns := p.Netns
			first, err := h.w.Add(bg, h.nw, p)
			if err != nil {
				t.Fatal(err)
			}
			before := h.endpoint(t, p)
			if tc.between != nil {
				tc.between(t, h, p)
			}
			if tc.retry != nil {
				tc.retry(h, p)
			}
			h.sim.ResetCalls()
			again, err := h.w.Add(bg, h.nw, p)
			if err != nil {
				t.Fatalf("retried Add: %v", err)
			}
			writes := map[hns.Op]int{}
			for op, n := range h.sim.CallCounts() {
				if op.IsWrite() {
					writes[op] = n
				}
			}
			if diff := cmp.Diff(tc.wantWrites, writes); diff != "" {
				t.Errorf("writes of the retry (-want +got):\n%s", diff)
			}
			after := h.endpoint(t, p)
			if got := after.ID == before.ID; got != tc.sameID {
				t.Errorf("endpoint kept its ID = %t, want %t (before %s, after %s)", got, tc.sameID, before.ID, after.ID)
			}
			if tc.sameID && tc.retry == nil {
				if diff := cmp.Diff(first, again); diff != "" {
					t.Errorf("the retry's result differs (-first +retry):\n%s", diff)
				}
			}
			if diff := cmp.Diff([]string{after.ID}, h.attached(t, p.Netns)); diff != "" {
				t.Errorf("namespace %s endpoints (-want +got):\n%s", p.Netns, diff)
			}
			if p.Netns != oldNetns {
				if ids := h.attached(t, oldNetns); len(ids) != 0 {
					t.Errorf("old namespace still lists %v", ids)
				}
			}
			if err := h.w.Check(bg, h.nw, p, again); err != nil {
				t.Errorf("Check after the retry: %v", err)
			}
			if n := strings.Count(strings.Join(h.endpointNames(t), "\n"), containerA); n != 1 {
				t.Errorf("%d endpoints for the attachment, want 1: %v", n, h.endpointNames(t))
			}
		})
	}
}

func TestAddReplacesAnEndpointOfItsNameOnAnotherNetwork(t *testing.T) {
	h := newHost(t, config.NetworkModeL2Bridge, hostOptions{})
	other, err := h.sim.CreateNetwork(bg, &hns.Network{Name: "other", Type: hns.NetworkTypeL2Bridge,
		Ipams: []hns.IPAM{{Subnets: []hns.Subnet{{IpAddressPrefix: "10.245.0.0/24", Routes: []hns.Route{{NextHop: "10.245.0.1", DestinationPrefix: "0.0.0.0/0"}}}}}}})
	if err != nil {
		t.Fatal(err)
	}
	p := pod(containerA, "eth0", h.namespace(t), "10.244.1.5")
	name, _ := EndpointName(p.Attachment)
	stale, err := h.sim.CreateEndpoint(bg, &hns.Endpoint{Name: name, HostComputeNetwork: other.ID, IpConfigurations: []hns.IPConfig{{IpAddress: "10.245.0.5"}}})
	if err != nil {
		t.Fatal(err)
	}
	ep := h.mustAdd(t, p)
	if ep.HostComputeNetwork != h.net.ID {
		t.Errorf("endpoint is on network %s, want %s", ep.HostComputeNetwork, h.net.ID)
	}
	if _, err := h.sim.GetEndpointByID(bg, stale.ID); !hns.IsNotFound(err) {
		t.Errorf("the stale endpoint on network other survived: %v", err)
	}
}

func TestAddNamespaceValidation(t *testing.T) {
	cases := []struct {
		name     string
		netns    func(h *host) string
		wantMsg  string
		notFound bool // the error also says HNS has no such namespace
	}{
		{name: "an empty netns is refused", netns: func(*host) string { return "" }, wantMsg: "CNI_NETNS is empty"},
		{name: "a Linux netns path is refused", netns: func(*host) string { return "/var/run/netns/cni-1234" }, wantMsg: "is not an HCN namespace GUID"},
		{name: "dockershim's none is refused", netns: func(*host) string { return "none" }, wantMsg: "is not an HCN namespace GUID"},
		{name: "a GUID with a bad digit is refused", netns: func(*host) string { return "5a3c1e26-0b7f-4c2d-9e1a-2f6b8d4c7e1g" }, wantMsg: "is not an HCN namespace GUID"},
		{
			name: "a GUID of a namespace HNS does not have is refused", netns: func(*host) string { return "5a3c1e26-0b7f-4c2d-9e1a-2f6b8d4c7e10" },
			wantMsg: "no such namespace", notFound: true,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := newHost(t, config.NetworkModeOverlay, hostOptions{})
			p := pod(containerA, "eth0", tc.netns(h), "10.244.1.5")
			_, err := h.w.Add(bg, h.nw, p)
			if err == nil || !strings.Contains(err.Error(), tc.wantMsg) {
				t.Fatalf("Add error = %v, want one containing %q", err, tc.wantMsg)
			}
			if !errors.Is(err, cni.ErrNetnsNotFound) {
				t.Errorf("error %v does not wrap cni.ErrNetnsNotFound (the server's invalid-netns answer)", err)
			}
			if got := hns.IsNotFound(err); got != tc.notFound {
				t.Errorf("hns.IsNotFound = %t, want %t", got, tc.notFound)
			}
			if n := h.sim.Writes(); n != 0 {
				t.Errorf("a refused ADD made %d writes: %v", n, h.sim.CallCounts())
			}
		})
	}
	t.Run("a GUID in braces is accepted", func(t *testing.T) {
		h := newHost(t, config.NetworkModeOverlay, hostOptions{})
		nsID := h.namespace(t)
		p := pod(containerA, "eth0", "{"+strings.ToLower(nsID)+"}", "10.244.1.5")
		ep := h.mustAdd(t, p)
		if !strings.EqualFold(ep.HostComputeNamespace, nsID) {
			t.Errorf("attached to %q, want %s", ep.HostComputeNamespace, nsID)
		}
	})
}

func TestAddRollsBackOnFailure(t *testing.T) {
	cases := []struct {
		name  string
		fault hns.Fault
		// stale creates an outdated endpoint of the attachment first.
		stale bool
	}{
		{name: "a failed attach deletes the endpoint it created", fault: hns.Fault{Op: hns.OpAddNamespaceEndpoint, Every: 1}},
		{name: "an attach that HNS committed but reported failed is undone", fault: hns.Fault{Op: hns.OpAddNamespaceEndpoint, Every: 1, AfterApply: true}},
		{name: "a failed create leaves no endpoint", fault: hns.Fault{Op: hns.OpCreateEndpoint, Every: 1}},
		{name: "a create that HNS committed but reported failed is undone", fault: hns.Fault{Op: hns.OpCreateEndpoint, Every: 1, AfterApply: true}},
		{name: "a failed create after replacing a stale endpoint leaves nothing", fault: hns.Fault{Op: hns.OpCreateEndpoint, Every: 1}, stale: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := newHost(t, config.NetworkModeOverlay, hostOptions{})
			p := pod(containerA, "eth0", h.namespace(t), "10.244.1.5")
			if tc.stale {
				old := *p
				old.Addresses = []cni.Address{{IP: mustPrefix("10.244.1.7/24"), Gateway: mustAddr(podGateway)}}
				h.mustAdd(t, &old)
			}
			infra := []string{"nodenet-source-vip"}
			remove := h.sim.InjectFault(tc.fault)
			_, err := h.w.Add(bg, h.nw, p)
			remove()
			if !hns.IsTransient(err) {
				t.Fatalf("Add error = %v, want the injected transient fault to show through", err)
			}
			if diff := cmp.Diff(infra, h.endpointNames(t)); diff != "" {
				t.Errorf("endpoints after the failed ADD (-want +got):\n%s\n%s", diff, h.sim.Dump())
			}
			if ids := h.attached(t, p.Netns); len(ids) != 0 {
				t.Errorf("namespace still lists %v", ids)
			}
			if _, err := h.w.Add(bg, h.nw, p); err != nil {
				t.Errorf("ADD retried after the fault cleared: %v", err)
			}
		})
	}
}

func TestAddCancelledDuringAttachStillRollsBack(t *testing.T) {
	h := newHost(t, config.NetworkModeOverlay, hostOptions{})
	p := pod(containerA, "eth0", h.namespace(t), "10.244.1.5")
	h.sim.SetLatency(hns.OpAddNamespaceEndpoint, time.Minute)
	ctx, cancel := context.WithTimeout(bg, 200*time.Millisecond)
	defer cancel()
	_, err := h.w.Add(ctx, h.nw, p)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Add error = %v, want the deadline", err)
	}
	if h.sim.Calls(hns.OpCreateEndpoint) != 1 {
		t.Fatalf("the endpoint was never created, the test proves nothing: %v", h.sim.CallCounts())
	}
	if diff := cmp.Diff([]string{"nodenet-source-vip"}, h.endpointNames(t)); diff != "" {
		t.Errorf("endpoints (-want +got):\n%s", diff)
	}
}
