package hnsendpoint

// Address plan: see fixture_test.go (pods 10.244.1.5-.7 on 10.244.1.0/24,
// cluster IP 10.96.0.10 for the load balancer, the "other" network
// 10.245.0.0/24).

import (
	"errors"
	"net/netip"
	"strings"
	"testing"

	current "github.com/containernetworking/cni/pkg/types/100"
	"github.com/google/go-cmp/cmp"

	"github.com/nodenet/nodenet/cni"
	"github.com/nodenet/nodenet/config"
	"github.com/nodenet/nodenet/hns"
)

func TestDel(t *testing.T) {
	t.Run("DEL detaches and deletes the endpoint", func(t *testing.T) {
		h := newHost(t, config.NetworkModeOverlay, hostOptions{})
		p := pod(containerA, "eth0", h.namespace(t), "10.244.1.5")
		h.mustAdd(t, p)
		if err := h.w.Del(bg, h.nw, p); err != nil {
			t.Fatalf("Del: %v", err)
		}
		name, _ := EndpointName(p.Attachment)
		if _, err := h.sim.GetEndpointByName(bg, name); !hns.IsNotFound(err) {
			t.Errorf("endpoint still exists: %v", err)
		}
		if ids := h.attached(t, p.Netns); len(ids) != 0 {
			t.Errorf("namespace still lists %v", ids)
		}
		if got := h.sim.CallCounts(); got[hns.OpRemoveNamespaceEndpoint] != 1 || got[hns.OpDeleteEndpoint] != 1 {
			t.Errorf("want one detach and one delete, calls %v", got)
		}
	})
	t.Run("a second DEL succeeds without writing", func(t *testing.T) {
		h := newHost(t, config.NetworkModeOverlay, hostOptions{})
		p := pod(containerA, "eth0", h.namespace(t), "10.244.1.5")
		h.mustAdd(t, p)
		if err := h.w.Del(bg, h.nw, p); err != nil {
			t.Fatal(err)
		}
		h.sim.ResetCalls()
		if err := h.w.Del(bg, h.nw, p); err != nil {
			t.Fatalf("second Del: %v", err)
		}
		if n := h.sim.Writes(); n != 0 {
			t.Errorf("second Del made %d writes: %v", n, h.sim.CallCounts())
		}
	})
	t.Run("DEL of an attachment never added succeeds", func(t *testing.T) {
		h := newHost(t, config.NetworkModeL2Bridge, hostOptions{})
		if err := h.w.Del(bg, h.nw, pod(containerB, "eth0", "", "10.244.1.6")); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("DEL without a netns still deletes the endpoint by name", func(t *testing.T) {
		h := newHost(t, config.NetworkModeL2Bridge, hostOptions{})
		p := pod(containerA, "eth0", h.namespace(t), "10.244.1.5")
		ep := h.mustAdd(t, p)
		if err := h.w.Del(bg, h.nw, &cni.Pod{Attachment: p.Attachment}); err != nil {
			t.Fatal(err)
		}
		if _, err := h.sim.GetEndpointByID(bg, ep.ID); !hns.IsNotFound(err) {
			t.Errorf("endpoint still exists: %v", err)
		}
		if ids := h.attached(t, p.Netns); len(ids) != 0 {
			t.Errorf("namespace still lists %v", ids)
		}
	})
	t.Run("DEL after the runtime removed the namespace deletes the endpoint", func(t *testing.T) {
		h := newHost(t, config.NetworkModeOverlay, hostOptions{})
		p := pod(containerA, "eth0", h.namespace(t), "10.244.1.5")
		ep := h.mustAdd(t, p)
		if err := h.sim.DeleteNamespace(bg, p.Netns); err != nil {
			t.Fatal(err)
		}
		if err := h.w.Del(bg, h.nw, p); err != nil {
			t.Fatal(err)
		}
		if _, err := h.sim.GetEndpointByID(bg, ep.ID); !hns.IsNotFound(err) {
			t.Errorf("endpoint still exists: %v", err)
		}
	})
	t.Run("DEL removes every endpoint of the attachment's name", func(t *testing.T) {
		h := newHost(t, config.NetworkModeL2Bridge, hostOptions{})
		p := pod(containerA, "eth0", "", "10.244.1.5")
		name, _ := EndpointName(p.Attachment)
		for _, ip := range []string{"10.244.1.5", "10.244.1.6"} {
			if _, err := h.sim.CreateEndpoint(bg, &hns.Endpoint{Name: name, HostComputeNetwork: h.net.ID, IpConfigurations: []hns.IPConfig{{IpAddress: ip}}}); err != nil {
				t.Fatal(err)
			}
		}
		if err := h.w.Del(bg, h.nw, p); err != nil {
			t.Fatal(err)
		}
		if names := h.endpointNames(t); len(names) != 0 {
			t.Errorf("endpoints left: %v", names)
		}
	})
	t.Run("DEL of an endpoint a load balancer uses deletes it, as HNS does, and the load balancer loses that backend", func(t *testing.T) {
		h := newHost(t, config.NetworkModeOverlay, hostOptions{})
		p := pod(containerA, "eth0", h.namespace(t), "10.244.1.5")
		ep := h.mustAdd(t, p)
		lb, err := h.sim.CreateLoadBalancer(bg, &hns.LoadBalancer{
			HostComputeEndpoints: []string{ep.ID}, SourceVIP: sourceVIP, FrontendVIPs: []string{clusterDNS},
			PortMappings: []hns.PortMapping{{Protocol: hns.ProtocolTCP, InternalPort: 53, ExternalPort: 53}},
		})
		if err != nil {
			t.Fatal(err)
		}
		if err := h.w.Del(bg, h.nw, p); err != nil {
			t.Fatalf("Del: %v", err)
		}
		if _, err := h.sim.GetEndpointByID(bg, ep.ID); !hns.IsNotFound(err) {
			t.Errorf("endpoint still exists: %v", err)
		}
		got, err := h.sim.GetLoadBalancer(bg, lb.ID)
		if err != nil {
			t.Fatalf("the load balancer went with the endpoint: %v", err)
		}
		if len(got.HostComputeEndpoints) != 1 || got.HostComputeEndpoints[0] != ep.ID {
			t.Errorf("load balancer backends = %v, want the deleted endpoint still listed", got.HostComputeEndpoints)
		}
		tr, err := h.sim.Trace(hns.FromHost, hns.Packet{Protocol: hns.ProtocolTCP, Src: "192.168.0.11", SrcPort: 40000, Dst: clusterDNS, DstPort: 53})
		if err != nil {
			t.Fatal(err)
		}
		if tr.Dropped == "" {
			t.Errorf("traffic to the degraded load balancer was delivered: %v", tr.Backends())
		}
	})
	t.Run("DEL refused with HCN_E_ENTITY_HAS_REFERENCES says why and stays recognizable as in use", func(t *testing.T) {
		h := newHost(t, config.NetworkModeOverlay, hostOptions{})
		p := pod(containerA, "eth0", h.namespace(t), "10.244.1.5")
		ep := h.mustAdd(t, p)
		h.sim.InjectFault(hns.Fault{Op: hns.OpDeleteEndpoint, Every: 1, Err: &hns.Error{Op: hns.OpDeleteEndpoint, Kind: hns.KindInUse, Code: 0x803B002C}})
		err := h.w.Del(bg, h.nw, p)
		if !hns.IsInUse(err) {
			t.Fatalf("Del error = %v, want one hns.IsInUse recognizes", err)
		}
		if !strings.Contains(err.Error(), "a load balancer still uses it") {
			t.Errorf("error %q does not say why", err)
		}
		if _, err := h.sim.GetEndpointByID(bg, ep.ID); err != nil {
			t.Errorf("endpoint is gone: %v", err)
		}
	})
	t.Run("DEL keeps a transient HNS error recognizable", func(t *testing.T) {
		h := newHost(t, config.NetworkModeOverlay, hostOptions{})
		p := pod(containerA, "eth0", h.namespace(t), "10.244.1.5")
		h.mustAdd(t, p)
		h.sim.InjectFault(hns.Fault{Op: hns.OpDeleteEndpoint, Every: 1})
		if err := h.w.Del(bg, h.nw, p); !hns.IsTransient(err) {
			t.Errorf("Del error = %v, want one hns.IsTransient recognizes", err)
		}
	})
}

func TestCheck(t *testing.T) {
	cases := []struct {
		name string
		// breakIt changes the host, the pod or prev after a successful ADD.
		breakIt func(t *testing.T, h *host, p *cni.Pod, prev *current.Result)
		// want is "" when Check must pass, else a substring of its error.
		want string
		is   func(error) bool
	}{
		{name: "CHECK passes right after ADD"},
		{
			name: "CHECK fails once the endpoint left the namespace",
			breakIt: func(t *testing.T, h *host, p *cni.Pod, _ *current.Result) {
				if err := h.sim.RemoveNamespaceEndpoint(bg, p.Netns, h.endpoint(t, p).ID); err != nil {
					t.Fatal(err)
				}
			},
			want: "not attached to any namespace",
		},
		{
			name: "CHECK fails once the endpoint is deleted",
			breakIt: func(t *testing.T, h *host, p *cni.Pod, _ *current.Result) {
				if err := h.sim.DeleteEndpoint(bg, h.endpoint(t, p).ID); err != nil {
					t.Fatal(err)
				}
			},
			want: "does not exist", is: hns.IsNotFound,
		},
		{
			name: "CHECK fails once the namespace is gone",
			breakIt: func(t *testing.T, h *host, p *cni.Pod, _ *current.Result) {
				if err := h.sim.DeleteNamespace(bg, p.Netns); err != nil {
					t.Fatal(err)
				}
			},
			want: "no such namespace", is: func(err error) bool { return errors.Is(err, cni.ErrNetnsNotFound) },
		},
		{
			name: "CHECK names the policies that differ once the service CIDR changed",
			breakIt: func(_ *testing.T, h *host, _ *cni.Pod, _ *current.Result) {
				h.nw.ServiceCIDRs = []netip.Prefix{mustPrefix("172.30.0.0/16")}
			},
			want: `missing policies OutBoundNAT{"Exceptions":["10.244.0.0/16","172.30.0.0/16","192.168.1.0/24"]}, SDNRoute{"DestinationPrefix":"172.30.0.0/16","NeedEncap":true}; unexpected policies OutBoundNAT{"Exceptions":["10.244.0.0/16","10.96.0.0/12","192.168.1.0/24"]}, SDNRoute{"DestinationPrefix":"10.96.0.0/12","NeedEncap":true}`,
		},
		{
			name:    "CHECK fails when DSR was turned on since ADD",
			breakIt: func(_ *testing.T, h *host, _ *cni.Pod, _ *current.Result) { h.nw.EnableDSR = true },
			want:    `missing policies OutBoundNAT{"Destinations":["10.244.1.5"]}`,
		},
		{
			name: "CHECK fails when the pod's allocated address is not the endpoint's",
			breakIt: func(_ *testing.T, _ *host, p *cni.Pod, _ *current.Result) {
				p.Addresses[0].IP = mustPrefix("10.244.1.6/24")
			},
			want: "addresses are [10.244.1.5/24], want [10.244.1.6/24]",
		},
		{
			name: "CHECK fails when prevResult has another MAC",
			breakIt: func(_ *testing.T, _ *host, _ *cni.Pod, prev *current.Result) {
				prev.Interfaces[0].Mac = "0e:2a:0a:f4:01:63"
			},
			want: "prevResult MAC is 0e:2a:0a:f4:01:63, endpoint has 0E-2A-0A-F4-01-05",
		},
		{
			name:    "CHECK fails when prevResult lacks the interface",
			breakIt: func(_ *testing.T, _ *host, _ *cni.Pod, prev *current.Result) { prev.Interfaces[0].Name = "eth1" },
			want:    "prevResult has no interface eth0",
		},
		{
			name: "CHECK fails when the endpoint sits in another namespace",
			breakIt: func(t *testing.T, h *host, p *cni.Pod, _ *current.Result) {
				ep := h.endpoint(t, p)
				other := h.namespace(t)
				if err := h.sim.RemoveNamespaceEndpoint(bg, p.Netns, ep.ID); err != nil {
					t.Fatal(err)
				}
				if err := h.sim.AddNamespaceEndpoint(bg, other, ep.ID); err != nil {
					t.Fatal(err)
				}
			},
			want: "attached to namespace",
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := newHost(t, config.NetworkModeOverlay, hostOptions{})
			p := pod(containerA, "eth0", h.namespace(t), "10.244.1.5")
			prev, err := h.w.Add(bg, h.nw, p)
			if err != nil {
				t.Fatal(err)
			}
			if tc.breakIt != nil {
				tc.breakIt(t, h, p, prev)
			}
			h.sim.ResetCalls()
			err = h.w.Check(bg, h.nw, p, prev)
			if n := h.sim.Writes(); n != 0 {
				t.Errorf("Check made %d writes", n)
			}
			if tc.want == "" {
				if err != nil {
					t.Fatalf("Check: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Check error = %v\nwant one containing %q", err, tc.want)
			}
			if tc.is != nil && !tc.is(err) {
				t.Errorf("Check error %v lost its kind", err)
			}
		})
	}
}

// TestOnlyManagedPoliciesCount: an endpoint with our policies in another
// order plus a policy another agent added (an ACL) is what Add would make.
func TestOnlyManagedPoliciesCount(t *testing.T) {
	h := newHost(t, config.NetworkModeOverlay, hostOptions{})
	p := pod(containerA, "eth0", h.namespace(t), "10.244.1.5")
	name, _ := EndpointName(p.Attachment)
	policies := basePolicies(config.NetworkModeOverlay)
	policies[0], policies[2] = policies[2], policies[0]
	policies = append(policies, hns.EndpointPolicy{Type: hns.EndpointPolicyACL,
		ACL: &hns.ACLPolicy{Action: hns.ACLActionAllow, Direction: hns.ACLDirectionIn, Priority: 100}})
	ep, err := h.sim.CreateEndpoint(bg, &hns.Endpoint{
		Name: name, HostComputeNetwork: h.net.ID,
		IpConfigurations: []hns.IPConfig{{IpAddress: "10.244.1.5", PrefixLength: 24}},
		MacAddress:       "0e-2a-0a-f4-01-05",
		Routes:           []hns.Route{{NextHop: podGateway, DestinationPrefix: "0.0.0.0/0"}},
		DNS:              hns.DNS{ServerList: []string{clusterDNS}, Domain: "cluster.local", Search: []string{"svc.cluster.local"}},
		Policies:         policies,
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := h.sim.AddNamespaceEndpoint(bg, p.Netns, ep.ID); err != nil {
		t.Fatal(err)
	}
	h.sim.ResetCalls()
	res, err := h.w.Add(bg, h.nw, p)
	if err != nil {
		t.Fatal(err)
	}
	if n := h.sim.Writes(); n != 0 {
		t.Errorf("Add rewrote an endpoint that only differs in policy order and foreign policies: %v", h.sim.CallCounts())
	}
	if err := h.w.Check(bg, h.nw, p, res); err != nil {
		t.Errorf("Check: %v", err)
	}
}

func TestList(t *testing.T) {
	h := newHost(t, config.NetworkModeOverlay, hostOptions{})
	nsA, nsB := h.namespace(t), h.namespace(t)
	h.mustAdd(t, pod(containerA, "eth0", nsA, "10.244.1.5"))
	h.mustAdd(t, pod(containerA, "net1", nsA, "10.244.1.6"))
	h.mustAdd(t, pod(containerB, "eth0", nsB, "10.244.1.7"))
	// Endpoints that are not ours, or not on this network.
	other, err := h.sim.CreateNetwork(bg, &hns.Network{Name: "other", Type: hns.NetworkTypeL2Bridge,
		Ipams: []hns.IPAM{{Subnets: []hns.Subnet{{IpAddressPrefix: "10.245.0.0/24", Routes: []hns.Route{{NextHop: "10.245.0.1", DestinationPrefix: "0.0.0.0/0"}}}}}}})
	if err != nil {
		t.Fatal(err)
	}
	for _, ep := range []*hns.Endpoint{
		{Name: containerB + "_cbr0", HostComputeNetwork: h.net.ID, IpConfigurations: []hns.IPConfig{{IpAddress: "10.244.1.8"}}},
		{Name: "nodenet-pod:" + containerB, HostComputeNetwork: h.net.ID, IpConfigurations: []hns.IPConfig{{IpAddress: "10.244.1.9"}}},
		{Name: "nodenet-pod:c0ffee:eth0", HostComputeNetwork: other.ID, IpConfigurations: []hns.IPConfig{{IpAddress: "10.245.0.5"}}},
		{HostComputeNetwork: h.net.ID, IpConfigurations: []hns.IPConfig{{IpAddress: "10.244.2.9"}}, Flags: hns.EndpointFlagsRemoteEndpoint},
	} {
		if _, err := h.sim.CreateEndpoint(bg, ep); err != nil {
			t.Fatal(err)
		}
	}
	h.sim.ResetCalls()
	got, err := h.w.List(bg, h.nw)
	if err != nil {
		t.Fatal(err)
	}
	want := []cni.Attachment{{ContainerID: containerA, IfName: "eth0"}, {ContainerID: containerA, IfName: "net1"}, {ContainerID: containerB, IfName: "eth0"}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("List (-want +got):\n%s", diff)
	}
	if n := h.sim.Writes(); n != 0 {
		t.Errorf("List made %d writes", n)
	}

	t.Run("by name when the node network has no ID", func(t *testing.T) {
		nw := *h.nw
		nw.ID = ""
		got, err := h.w.List(bg, &nw)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("List (-want +got):\n%s", diff)
		}
	})
	t.Run("a missing network has no attachments", func(t *testing.T) {
		nw := *h.nw
		nw.ID, nw.Name = "", "gone"
		got, err := h.w.List(bg, &nw)
		if err != nil || len(got) != 0 {
			t.Errorf("List = %v, %v; want nothing and no error", got, err)
		}
	})
}

func TestReady(t *testing.T) {
	cases := []struct {
		name string
		mode config.NetworkMode
		edit func(nw *cni.NodeNetwork)
		want string // "" means ready
		is   func(error) bool
	}{
		{name: "an overlay node network is ready", mode: config.NetworkModeOverlay},
		{name: "an l2bridge node network is ready", mode: config.NetworkModeL2Bridge},
		{name: "a network found by name is ready", mode: config.NetworkModeOverlay, edit: func(nw *cni.NodeNetwork) { nw.ID = "" }},
		{
			name: "a missing network is not ready", mode: config.NetworkModeOverlay,
			edit: func(nw *cni.NodeNetwork) { nw.ID, nw.Name = "", "vxlan0" },
			want: `hns network "vxlan0"`, is: hns.IsNotFound,
		},
		{
			name: "an unknown network ID is not ready", mode: config.NetworkModeOverlay,
			edit: func(nw *cni.NodeNetwork) { nw.ID = "5A3C1E26-0B7F-4C2D-9E1A-2F6B8D4C7E10" },
			want: "no such network", is: hns.IsNotFound,
		},
		{
			name: "a network ID whose network has another name is not ready", mode: config.NetworkModeOverlay,
			edit: func(nw *cni.NodeNetwork) { nw.Name = "vxlan0" },
			want: `is named "nodenet", want "vxlan0"`,
		},
		{
			name: "an L2Bridge network is not ready for overlay mode", mode: config.NetworkModeL2Bridge,
			edit: func(nw *cni.NodeNetwork) { nw.Mode = config.NetworkModeOverlay },
			want: "is of type L2Bridge, but network mode overlay needs Overlay",
		},
		{
			name: "an Overlay network is not ready for l2bridge mode", mode: config.NetworkModeOverlay,
			edit: func(nw *cni.NodeNetwork) { nw.Mode = config.NetworkModeL2Bridge },
			want: "is of type Overlay, but network mode l2bridge needs L2Bridge",
		},
		{
			name: "a network whose subnets miss the pod CIDR is not ready", mode: config.NetworkModeOverlay,
			edit: func(nw *cni.NodeNetwork) { nw.PodCIDRs = []netip.Prefix{mustPrefix("10.244.7.0/24")} },
			want: "no subnet covering pod CIDR 10.244.7.0/24",
		},
		{
			name: "a pod CIDR larger than the network's subnet is not covered", mode: config.NetworkModeOverlay,
			edit: func(nw *cni.NodeNetwork) { nw.PodCIDRs = []netip.Prefix{mustPrefix("10.244.0.0/23")} },
			want: "no subnet covering pod CIDR 10.244.0.0/23",
		},
		{
			name: "an unknown mode is not ready", mode: config.NetworkModeOverlay,
			edit: func(nw *cni.NodeNetwork) { nw.Mode = "host-gw" },
			want: `network mode "host-gw" has no HNS network type`,
		},
		{
			name: "a node network without name or ID is not ready", mode: config.NetworkModeOverlay,
			edit: func(nw *cni.NodeNetwork) { nw.ID, nw.Name = "", "" },
			want: "neither an HNS network name nor an id",
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := newHost(t, tc.mode, hostOptions{})
			if tc.edit != nil {
				tc.edit(h.nw)
			}
			err := h.w.Ready(bg, h.nw)
			if tc.want == "" {
				if err != nil {
					t.Fatalf("Ready: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Ready error = %v, want one containing %q", err, tc.want)
			}
			if tc.is != nil && !tc.is(err) {
				t.Errorf("Ready error %v lost its kind", err)
			}
			// ADD refuses the same way.
			p := pod(containerA, "eth0", h.namespace(t), "10.244.1.5")
			if _, err := h.w.Add(bg, h.nw, p); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Add error = %v, want one containing %q", err, tc.want)
			}
		})
	}
}

func TestNew(t *testing.T) {
	sim := hns.NewSimulator(hns.SimulatorOptions{})
	for _, tc := range []struct {
		name string
		opts Options
		want string
	}{
		{name: "HNS is required", opts: Options{}, want: "Options.HNS is required"},
		{name: "a MAC prefix must be two bytes", opts: Options{HNS: sim, MACPrefix: "0E-2A-01"}, want: "MAC prefix"},
		{name: "a MAC prefix must be hex", opts: Options{HNS: sim, MACPrefix: "0G-2A"}, want: "MAC prefix"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := New(tc.opts); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("New error = %v, want one containing %q", err, tc.want)
			}
		})
	}
	t.Run("a custom MAC prefix starts every derived MAC", func(t *testing.T) {
		h := newHost(t, config.NetworkModeOverlay, hostOptions{})
		w, err := New(Options{HNS: h.sim, MACPrefix: "0a-2b"})
		if err != nil {
			t.Fatal(err)
		}
		h.w = w
		if ep := h.mustAdd(t, pod(containerA, "eth0", h.namespace(t), "10.244.1.5")); ep.MacAddress != "0A-2B-0A-F4-01-05" {
			t.Errorf("MAC = %s, want 0A-2B-0A-F4-01-05", ep.MacAddress)
		}
	})
}
