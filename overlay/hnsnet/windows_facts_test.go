// Address plan: see fixture_test.go. The l2bridge host endpoint's own
// interface, when listed, is "vEthernet (nodenet_ep)" (index 15) holding
// 10.244.1.2.
package hnsnet

import (
	"context"
	"errors"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nodenet/nodenet/hns"
)

// The l2bridge host endpoint joins the host's default namespace (every
// Windows host has one) and never a namespace of its own: not on the
// first ensure, not on repeated ensures, not after restarts, not after
// the endpoint was detached out of band.
func TestL2BridgeHostEndpointJoinsTheHostsDefaultNamespace(t *testing.T) {
	for _, tc := range []struct {
		name string
		// then runs after the first ensure; it returns the agent to
		// ensure with again.
		then      func(t *testing.T, h *host, first *Network) *Network
		wantWrite int // writes of the second ensure
	}{
		{name: "a repeated ensure", then: func(t *testing.T, h *host, first *Network) *Network { return first }},
		{name: "an agent restart", then: func(t *testing.T, h *host, _ *Network) *Network { return h.agent(t) }},
		{name: "a restart after the endpoint was detached", wantWrite: 1, then: func(t *testing.T, h *host, _ *Network) *Network {
			ep, err := h.sim.GetEndpointByName(ctx, HostEndpointName(netName))
			if err != nil {
				t.Fatal(err)
			}
			if err := h.sim.RemoveNamespaceEndpoint(ctx, ep.HostComputeNamespace, ep.ID); err != nil {
				t.Fatal(err)
			}
			return h.agent(t)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHost(hns.Version{})
			h.ads.attached = true
			first := h.agent(t)
			mustEnsure(t, first, l2bridgeSpec())
			again := mustEnsure(t, tc.then(t, h, first), l2bridgeSpec())
			if again.Writes != tc.wantWrite {
				t.Errorf("second ensure made %d writes, want %d", again.Writes, tc.wantWrite)
			}
			nss, err := h.sim.ListNamespaces(ctx)
			if err != nil {
				t.Fatal(err)
			}
			def := hns.HostDefaultNamespace(nss)
			if len(nss) != 1 || def == nil {
				t.Fatalf("namespaces %+v, want only the host's default one", nss)
			}
			ep, err := h.sim.GetEndpointByName(ctx, HostEndpointName(netName))
			if err != nil {
				t.Fatal(err)
			}
			if ep.HostComputeNamespace != def.ID || !slices.Equal(def.EndpointIDs, []string{ep.ID}) {
				t.Errorf("host endpoint in namespace %q, default namespace holds %v; want %s in %s", ep.HostComputeNamespace, def.EndpointIDs, ep.ID, def.ID)
			}
			if n := h.sim.Calls(hns.OpCreateNamespace); n != 0 {
				t.Errorf("%d CreateNamespace calls, want 0", n)
			}
		})
	}
}

// flakyAdapters lists no adapter holding the node IP for its first
// `missing` calls, as while HNS moves the adapter to its vSwitch.
type flakyAdapters struct {
	mu      sync.Mutex
	calls   int
	missing int
	inner   func(context.Context) ([]Adapter, error)
}

func (f *flakyAdapters) list(ctx context.Context) ([]Adapter, error) {
	f.mu.Lock()
	f.calls++
	gone := f.calls > 1 && f.calls <= 1+f.missing // the first call is findUplink's
	f.mu.Unlock()
	ads, err := f.inner(ctx)
	if gone {
		for i := range ads {
			ads[i].IPs = nil
		}
	}
	return ads, err
}

// HNS answers CreateNetwork before the network is usable; EnsureLocal
// waits, bounded, for the provider address (overlay) and for the host
// interface holding the node IP (both modes), and fails with a
// NotReadyError when the wait runs out.
func TestEnsureLocalWaitsForTheNetworkToBeReady(t *testing.T) {
	for _, tc := range []struct {
		name       string
		l2bridge   bool
		paDelay    time.Duration
		ifMissing  int // adapter listings without the node IP
		timeout    time.Duration
		wantErr    string // "" = ready
		wantGetsGE int    // GetNetworkByID calls, at least
	}{
		{name: "overlay, provider address at once: no polling", timeout: time.Second},
		{name: "overlay, provider address after 60 ms: polled until it shows", paDelay: 60 * time.Millisecond, timeout: 5 * time.Second, wantGetsGE: 2},
		{name: "overlay, provider address later than the timeout", paDelay: time.Hour, timeout: 50 * time.Millisecond, wantErr: "no provider address"},
		{name: "l2bridge, host interface back after 3 looks", l2bridge: true, ifMissing: 3, timeout: 5 * time.Second},
		{name: "l2bridge, host interface never back", l2bridge: true, ifMissing: 1 << 20, timeout: 50 * time.Millisecond, wantErr: "no host interface holds the management IP"},
		{name: "overlay, host interface back after 2 looks", ifMissing: 2, timeout: 5 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sim := hns.NewSimulator(hns.SimulatorOptions{NetworkReadyDelay: tc.paDelay,
				HostAdapters: []hns.HostAdapter{{Name: "Ethernet", IPs: []string{nodeIP}, MAC: hostMAC}}})
			h := newHost(hns.Version{})
			h.sim, h.ads.attached = sim, true
			ads := &flakyAdapters{missing: tc.ifMissing, inner: h.ads.list}
			n, err := New(Options{HNS: sim, HostRoutes: h.routes, Adapters: ads.list, ReadyTimeout: tc.timeout, ReadyPollInterval: 10 * time.Millisecond})
			if err != nil {
				t.Fatal(err)
			}
			spec := overlaySpec()
			if tc.l2bridge {
				spec = l2bridgeSpec()
			}
			ln, err := n.EnsureLocal(ctx, spec)
			if tc.wantErr != "" {
				var nre *NotReadyError
				if !errors.As(err, &nre) || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("EnsureLocal = %v, want a NotReadyError saying %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("EnsureLocal: %v", err)
			}
			if got := sim.Calls(hns.OpGetNetworkByID); got < tc.wantGetsGE {
				t.Errorf("%d GetNetworkByID calls, want at least %d", got, tc.wantGetsGE)
			}
			if !tc.l2bridge {
				nw, _ := sim.GetNetworkByID(ctx, ln.ID)
				if pa := providerAddress(nw); pa.String() != nodeIP {
					t.Errorf("provider address %v, want %s", pa, nodeIP)
				}
			}
		})
	}
}

// recordingForwarding records EnableForwarding calls; fail makes them fail.
type recordingForwarding struct {
	calls []string
	fail  error
}

func (r *recordingForwarding) EnableForwarding(_ context.Context, a Adapter) error {
	r.calls = append(r.calls, a.Name)
	return r.fail
}

// In l2bridge mode EnsureLocal turns forwarding on for the host vNIC (and
// the host endpoint's own interface when the host lists it), as flannel
// host-gw does; overlay mode leaves forwarding alone.
func TestL2BridgeTurnsForwardingOnForTheHostVNIC(t *testing.T) {
	epIf := Adapter{Name: "vEthernet (nodenet_ep)", Index: 15, MTU: 1500, IPs: []netip.Prefix{netip.MustParsePrefix(sourceVIP + "/24")}}
	for _, tc := range []struct {
		name     string
		overlay  bool
		withEPIf bool
		fail     error
		want     []string
		wantErr  string
	}{
		{name: "the host vNIC", want: []string{"vEthernet (Ethernet)"}},
		{name: "the host vNIC and the endpoint's interface", withEPIf: true, want: []string{"vEthernet (Ethernet)", "vEthernet (nodenet_ep)"}},
		{name: "a failure fails the ensure", fail: errors.New("access denied"), want: []string{"vEthernet (Ethernet)"}, wantErr: "access denied"},
		{name: "overlay mode leaves forwarding alone", overlay: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHost(hns.Version{})
			h.ads.attached = true
			adapters := func(ctx context.Context) ([]Adapter, error) {
				ads, err := h.ads.list(ctx)
				if tc.withEPIf {
					ads = append(ads, epIf)
				}
				return ads, err
			}
			rec := &recordingForwarding{fail: tc.fail}
			n, err := New(Options{HNS: h.sim, HostRoutes: h.routes, Adapters: adapters, Forwarding: rec})
			if err != nil {
				t.Fatal(err)
			}
			spec := l2bridgeSpec()
			if tc.overlay {
				spec = overlaySpec()
			}
			_, err = n.EnsureLocal(ctx, spec)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("EnsureLocal = %v, want an error saying %q", err, tc.wantErr)
				}
			} else if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(rec.calls, tc.want) {
				t.Errorf("forwarding turned on for %q, want %q", rec.calls, tc.want)
			}
		})
	}
}

// On the simulated host (the default Forwarding), the node reaches its
// l2bridge pods once EnsureLocal has run; before, the trace drops them.
func TestL2BridgeNodeReachesItsPodsOnTheSimulatedHost(t *testing.T) {
	h := newHost(hns.Version{})
	h.ads.attached = true
	ln := mustEnsure(t, h.agent(t), l2bridgeSpec())
	pod, err := h.sim.CreateEndpoint(ctx, &hns.Endpoint{HostComputeNetwork: ln.ID, IpConfigurations: []hns.IPConfig{{IpAddress: podIP, PrefixLength: 24}}})
	if err != nil {
		t.Fatal(err)
	}
	if !h.sim.HostForwarding("Ethernet") {
		t.Fatal("forwarding is off on the host vNIC after EnsureLocal")
	}
	tr, err := h.sim.Trace(hns.FromHost, hns.Packet{Protocol: hns.ProtocolTCP, Src: nodeIP, SrcPort: 40000, Dst: podIP, DstPort: 8080})
	if err != nil {
		t.Fatal(err)
	}
	if got := tr.Backends(); !slices.Equal(got, []string{pod.ID}) {
		t.Errorf("node -> pod reaches %v, want the pod %s\n%s", got, pod.ID, tr)
	}

	// The same host without our ensure (a network made by hand): dropped.
	bare := newHost(hns.Version{})
	nw := l2bridgeByHand(t, bare)
	bp, _ := bare.sim.CreateEndpoint(ctx, &hns.Endpoint{HostComputeNetwork: nw.ID, IpConfigurations: []hns.IPConfig{{IpAddress: podIP, PrefixLength: 24}}})
	tr, err = bare.sim.Trace(hns.FromHost, hns.Packet{Protocol: hns.ProtocolTCP, Src: nodeIP, SrcPort: 40000, Dst: podIP, DstPort: 8080})
	if err != nil || bp == nil {
		t.Fatal(err)
	}
	if len(tr.Deliveries) != 0 || !strings.Contains(tr.Dropped, "forwarding is off") {
		t.Errorf("without forwarding node -> pod: %v (dropped %q), want dropped\n%s", tr.Backends(), tr.Dropped, tr)
	}
}

// l2bridgeByHand creates the l2bridge network EnsureLocal would, without
// EnsureLocal.
func l2bridgeByHand(t *testing.T, h *host) *hns.Network {
	t.Helper()
	p, err := planFor(l2bridgeSpec())
	if err != nil {
		t.Fatal(err)
	}
	nw, err := h.sim.CreateNetwork(ctx, p.desiredNetwork("Ethernet"))
	if err != nil {
		t.Fatal(err)
	}
	return nw
}

// The address whose interface EnsureLocal waits for is the management IP:
// the provider address HNS reports, else the node IP the uplink held,
// else the uplink's first IPv4 address.
func TestManagementIP(t *testing.T) {
	pa := hns.NetworkPolicy{Type: hns.NetworkPolicyProviderAddress, ProviderAddress: &hns.ProviderAddressPolicy{ProviderAddress: "192.168.1.99"}}
	holder := func(ips ...string) uplink {
		u := uplink{Name: "Ethernet", Holder: Adapter{Name: "Ethernet"}}
		for _, ip := range ips {
			u.Holder.IPs = append(u.Holder.IPs, netip.MustParsePrefix(ip))
		}
		return u
	}
	for _, tc := range []struct {
		name     string
		policies []hns.NetworkPolicy
		up       uplink
		want     string // "" = none
	}{
		{name: "the provider address first", policies: []hns.NetworkPolicy{pa}, up: holder(nodeIP + "/24"), want: "192.168.1.99"},
		{name: "else the node IP the uplink holds", up: holder("fd00::11/64", "192.168.1.50/24", nodeIP+"/24"), want: nodeIP},
		{name: "else the uplink's first IPv4 address", up: holder("fd00::11/64", "192.168.1.50/24"), want: "192.168.1.50"},
		{name: "none without an IPv4 address", up: holder("fd00::11/64")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := managementIP(&hns.Network{Policies: tc.policies}, tc.up, netip.MustParseAddr(nodeIP))
			if (tc.want == "") == ok || (ok && got.String() != tc.want) {
				t.Errorf("managementIP = %v, %t; want %q", got, ok, tc.want)
			}
		})
	}
}
