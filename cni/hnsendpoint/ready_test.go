package hnsendpoint

import (
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nodenet/nodenet/config"
	"github.com/nodenet/nodenet/hns"
)

// clock is a settable clock for the simulator's readiness delay.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }

func (c *clock) advance(d time.Duration) { c.mu.Lock(); c.now = c.now.Add(d); c.mu.Unlock() }

// An Overlay network HNS has created but not yet given its provider
// address (the management IP) is not ready: Ready says so and Add fails
// before writing anything, so the server answers "try again later". Once
// HNS reports the address, both succeed. An L2Bridge network has no such
// wait.
func TestANetworkIsReadyOnceHNSReportsItsProviderAddress(t *testing.T) {
	for _, tc := range []struct {
		name         string
		mode         config.NetworkMode
		wantNotReady bool
	}{
		{name: "overlay before its provider address", mode: config.NetworkModeOverlay, wantNotReady: true},
		{name: "l2bridge", mode: config.NetworkModeL2Bridge},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ref := newHost(t, tc.mode, hostOptions{}) // for its NodeNetwork and network definition
			c := &clock{now: time.Unix(1000, 0)}
			sim := hns.NewSimulator(hns.SimulatorOptions{NetworkReadyDelay: 2 * time.Second, Now: c.Now,
				HostAdapters: []hns.HostAdapter{{Name: "Ethernet", IPs: []string{nodeIP}}}})
			def, err := ref.sim.GetNetworkByID(bg, ref.net.ID)
			if err != nil {
				t.Fatal(err)
			}
			// The network as HNS has it right after CreateNetwork: the
			// definition without the provider address HNS fills in.
			var policies []hns.NetworkPolicy
			for _, p := range def.Policies {
				if p.Type == hns.NetworkPolicyNetAdapterName || p.Type == hns.NetworkPolicyVxlanPort {
					policies = append(policies, p)
				}
			}
			created, err := sim.CreateNetwork(bg, &hns.Network{Name: def.Name, Type: def.Type, Ipams: def.Ipams, Flags: def.Flags, Policies: policies})
			if err != nil {
				t.Fatal(err)
			}
			nw := *ref.nw
			nw.ID = created.ID
			w, err := New(Options{HNS: sim})
			if err != nil {
				t.Fatal(err)
			}
			ns, err := sim.CreateNamespace(bg, &hns.Namespace{Type: hns.NamespaceTypeHost})
			if err != nil {
				t.Fatal(err)
			}
			p := pod(containerA, "eth0", ns.ID, "10.244.1.5")

			readyErr := w.Ready(bg, &nw)
			_, addErr := w.Add(bg, &nw, p)
			if tc.wantNotReady {
				if readyErr == nil || !strings.Contains(readyErr.Error(), "not ready") {
					t.Errorf("Ready = %v, want a not-ready error", readyErr)
				}
				if addErr == nil {
					t.Fatal("Add succeeded on a network that is not ready")
				}
				if eps, _ := sim.ListEndpoints(bg, ""); len(eps) != 0 {
					t.Fatalf("Add left %d endpoints", len(eps))
				}
				c.advance(2 * time.Second)
				readyErr = w.Ready(bg, &nw)
				_, addErr = w.Add(bg, &nw, p)
			}
			if readyErr != nil || addErr != nil {
				t.Fatalf("ready network: Ready = %v, Add = %v", readyErr, addErr)
			}
		})
	}
}
