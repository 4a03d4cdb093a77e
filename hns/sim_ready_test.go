package hns

import (
	"testing"
	"time"
)

// An Overlay network reports its provider address (the management IP)
// only NetworkReadyDelay after CreateNetwork, as real HNS fills it in
// after returning (flannel's Windows backends wait for it).
func TestNetworkGetsItsProviderAddressAfterTheReadyDelay(t *testing.T) {
	withoutPA := func() *Network {
		n := overlayNetwork("nodenet")
		n.Policies = n.Policies[:1] // NetAdapterName only: HNS picks the PA
		return n
	}
	for _, tc := range []struct {
		name    string
		delay   time.Duration
		network func() *Network
		// wantAt is the provider address read back after 0, 1 and 2 s.
		wantAt [3]string
	}{
		{name: "no delay: at once", network: withoutPA, wantAt: [3]string{nodeIP, nodeIP, nodeIP}},
		{name: "a 1.5 s delay: absent until then", delay: 1500 * time.Millisecond, network: withoutPA, wantAt: [3]string{"", "", nodeIP}},
		{name: "a provider address the request names is there at once", delay: time.Hour, network: func() *Network { return overlayNetwork("nodenet") },
			wantAt: [3]string{nodeIP, nodeIP, nodeIP}},
		{name: "an L2Bridge network gets none (v2 has no management IP for it)", network: func() *Network { return l2bridgeNetwork("cbr0") }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clock := &fakeClock{now: time.Unix(1000, 0)}
			s := newTestSimulator(t, SimulatorOptions{NetworkReadyDelay: tc.delay, Now: clock.Now})
			n := mustNetwork(t, s, tc.network())
			if got := providerAddressOf(n); got != tc.wantAt[0] {
				t.Errorf("CreateNetwork's answer has provider address %q, want %q", got, tc.wantAt[0])
			}
			for i, want := range tc.wantAt {
				got, err := s.GetNetworkByID(ctx, n.ID)
				if err != nil {
					t.Fatal(err)
				}
				if pa := providerAddressOf(got); pa != want {
					t.Errorf("after %d s: provider address %q, want %q", i, pa, want)
				}
				clock.Advance(time.Second)
			}
		})
	}
}

// A simulated host starts with the host's default namespace, as Windows
// does; created namespaces are listed after it.
func TestHostStartsWithItsDefaultNamespace(t *testing.T) {
	s := newTestSimulator(t, SimulatorOptions{})
	nss, err := s.ListNamespaces(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(nss) != 1 || nss[0].Type != NamespaceTypeHostDefault || nss[0].Compartment != DefaultCompartment {
		t.Fatalf("a new host lists %+v, want one HostDefault namespace in compartment 1", nss)
	}
	pod, err := s.CreateNamespace(ctx, &Namespace{})
	if err != nil {
		t.Fatal(err)
	}
	nss, err = s.ListNamespaces(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(nss) != 2 || nss[1].ID != pod.ID {
		t.Fatalf("listing %+v, want the default namespace then %s", nss, pod.ID)
	}
	if def := HostDefaultNamespace(nss); def == nil || def.ID != nss[0].ID {
		t.Errorf("HostDefaultNamespace picks %+v, want %s", def, nss[0].ID)
	}
	if s.Writes() != 1 {
		t.Errorf("%d writes, want 1 (listing writes nothing)", s.Writes())
	}
}
