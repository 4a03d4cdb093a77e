// Address plan:
//
//	10.244.1.0/24        .0 network, .1 gateway, .2 source VIP, .255 broadcast
//	10.244.1.0/28        .0 network, .1 gateway, .2 source VIP, .15 broadcast;
//	                     .3-.14 (12 addresses) usable
//	10.244.1.0/29        .0 network, .1 gateway, .7 broadcast; .2-.6 usable
//	fd00:10:244:1::/64   ::0 subnet-router anycast, ::1 gateway, ::2 VIP
//	fd00:10:244:1::/124  ::0, ::1 gateway, ::2 VIP; ::3-::f usable (::f too:
//	                     IPv6 has no broadcast)
//	fd00:10:244:1::/126  ::0, ::1 gateway; ::2 and ::3 usable
package ipam

import (
	"errors"
	"fmt"
	"net/netip"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestAllocateNeverHandsOutReservedAddresses(t *testing.T) {
	tests := []struct {
		name        string
		rng         Range
		want        []netip.Addr // every address handed out until exhausted, in order
		wantErrText string
	}{
		{
			name: "an IPv4 /28 with the source VIP reserved hands out .3 to .14 and no more",
			rng:  rng("10.244.1.0/28", "10.244.1.2"),
			want: addrs("10.244.1.3", "10.244.1.4", "10.244.1.5", "10.244.1.6", "10.244.1.7", "10.244.1.8",
				"10.244.1.9", "10.244.1.10", "10.244.1.11", "10.244.1.12", "10.244.1.13", "10.244.1.14"),
			wantErrText: "no free address in 10.244.1.0/28: 12 of 12 usable addresses are allocated",
		},
		{
			name: "an IPv4 /28 with a custom gateway keeps .1 available and skips the gateway",
			rng:  Range{Subnet: netip.MustParsePrefix("10.244.1.0/28"), Gateway: addr("10.244.1.14"), Reserved: addrs("10.244.1.2")},
			want: addrs("10.244.1.1", "10.244.1.3", "10.244.1.4", "10.244.1.5", "10.244.1.6", "10.244.1.7", "10.244.1.8",
				"10.244.1.9", "10.244.1.10", "10.244.1.11", "10.244.1.12", "10.244.1.13"),
			wantErrText: "no free address in 10.244.1.0/28: 12 of 12 usable addresses are allocated",
		},
		{
			name: "an IPv6 /124 with the source VIP reserved hands out ::3 to ::f, the last one included",
			rng:  rng("fd00:10:244:1::/124", "fd00:10:244:1::2"),
			want: addrs("fd00:10:244:1::3", "fd00:10:244:1::4", "fd00:10:244:1::5", "fd00:10:244:1::6", "fd00:10:244:1::7",
				"fd00:10:244:1::8", "fd00:10:244:1::9", "fd00:10:244:1::a", "fd00:10:244:1::b", "fd00:10:244:1::c",
				"fd00:10:244:1::d", "fd00:10:244:1::e", "fd00:10:244:1::f"),
			wantErrText: "no free address in fd00:10:244:1::/124: 13 of 13 usable addresses are allocated",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := newAllocator(t, "", tt.rng)
			var got []netip.Addr
			var err error
			for i := 0; err == nil && i < 300; i++ {
				var al []Allocation
				if al, err = a.Allocate(fmt.Sprint("pod-", i), "eth0"); err == nil {
					got = append(got, al[0].IP)
				}
			}
			if diff := cmp.Diff(tt.want, got, netipCmp); diff != "" {
				t.Errorf("handed out (-want +got):\n%s", diff)
			}
			if err == nil || err.Error() != tt.wantErrText {
				t.Errorf("error once full = %v, want %q", err, tt.wantErrText)
			}
		})
	}
}

// step is one operation of a round-robin scenario.
type step struct {
	release string     // release this pod, or else
	pod     string     // allocate for this pod
	want    netip.Addr // and expect this address
}

func TestAllocateIsRoundRobin(t *testing.T) {
	tests := []struct {
		name  string
		rng   Range
		steps []step
	}{
		{
			name: "a released address is not reused while later ones are free",
			rng:  rng("10.244.1.0/24", "10.244.1.2"),
			steps: []step{
				{pod: "a", want: addr("10.244.1.3")},
				{pod: "b", want: addr("10.244.1.4")},
				{release: "a"},
				{pod: "c", want: addr("10.244.1.5")},
				{release: "c"},
				{pod: "d", want: addr("10.244.1.6")},
			},
		},
		{
			name: "the walk wraps to the start of the range and skips the gateway",
			rng:  rng("10.244.1.0/29"),
			steps: []step{
				{pod: "a", want: addr("10.244.1.2")},
				{pod: "b", want: addr("10.244.1.3")},
				{pod: "c", want: addr("10.244.1.4")},
				{pod: "d", want: addr("10.244.1.5")},
				{pod: "e", want: addr("10.244.1.6")},
				{release: "b"},
				{release: "a"},
				{pod: "f", want: addr("10.244.1.2")},
				{pod: "g", want: addr("10.244.1.3")},
			},
		},
		{
			name: "the most recently handed out address is reused last",
			rng:  rng("fd00:10:244:1::/126"),
			steps: []step{
				{pod: "a", want: addr("fd00:10:244:1::2")},
				{pod: "b", want: addr("fd00:10:244:1::3")},
				{release: "b"},
				{release: "a"},
				{pod: "c", want: addr("fd00:10:244:1::2")},
				{pod: "d", want: addr("fd00:10:244:1::3")},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := newAllocator(t, "", tt.rng)
			for i, s := range tt.steps {
				if s.release != "" {
					mustRelease(t, a, s.release, "eth0")
					continue
				}
				got := mustAllocate(t, a, s.pod, "eth0")
				if got[0].IP != s.want {
					t.Errorf("step %d: pod %s got %s, want %s", i, s.pod, got[0].IP, s.want)
				}
			}
		})
	}
}

func TestAllocateIsIdempotent(t *testing.T) {
	v4, v6 := rng("10.244.1.0/24", "10.244.1.2"), rng("fd00:10:244:1::/64", "fd00:10:244:1::2")
	t.Run("a retried ADD gets the same addresses and takes no more", func(t *testing.T) {
		a := newAllocator(t, "", v4, v6)
		first := mustAllocate(t, a, "pod-a", "eth0")
		again := mustAllocate(t, a, "pod-a", "eth0")
		if diff := cmp.Diff(first, again, netipCmp); diff != "" {
			t.Errorf("second Allocate (-first +second):\n%s", diff)
		}
		if n := len(mustList(t, a)); n != 2 {
			t.Errorf("store holds %d allocations, want 2", n)
		}
	})
	t.Run("another interface of the same container gets its own addresses", func(t *testing.T) {
		a := newAllocator(t, "", v4, v6)
		eth0 := mustAllocate(t, a, "pod-a", "eth0")
		net1 := mustAllocate(t, a, "pod-a", "net1")
		want := []Allocation{
			{ContainerID: "pod-a", IfName: "net1", IP: addr("10.244.1.4"), Subnet: v4Subnet, Gateway: addr("10.244.1.1")},
			{ContainerID: "pod-a", IfName: "net1", IP: addr("fd00:10:244:1::4"), Subnet: v6Subnet, Gateway: addr("fd00:10:244:1::1")},
		}
		if diff := cmp.Diff(want, net1, netipCmp); diff != "" {
			t.Errorf("net1 (-want +got):\n%s", diff)
		}
		if got := ipsOf(eth0); got[0] != addr("10.244.1.3") || got[1] != addr("fd00:10:244:1::3") {
			t.Errorf("eth0 got %v", got)
		}
	})
	t.Run("an attachment holding only its IPv4 address gets an IPv6 one added", func(t *testing.T) {
		dataDir := t.TempDir()
		writeFile(t, dataDir, "10.244.1.77", "pod-a\r\neth0")
		a := newAllocator(t, dataDir, v4, v6)
		got := mustAllocate(t, a, "pod-a", "eth0")
		if diff := cmp.Diff(addrs("10.244.1.77", "fd00:10:244:1::3"), ipsOf(got), netipCmp); diff != "" {
			t.Errorf("allocated (-want +got):\n%s", diff)
		}
	})
}

func TestAllocateRejectsInvalidAttachments(t *testing.T) {
	tests := []struct {
		name, containerID, ifName, wantErr string
	}{
		{name: "an empty container ID is refused", ifName: "eth0", wantErr: "container ID is empty"},
		{name: "an empty interface name is refused", containerID: "pod-a", wantErr: "interface name is empty"},
		{name: "a container ID with a line break is refused", containerID: "pod-a\r\neth9", ifName: "eth0", wantErr: `container ID "pod-a\r\neth9" contains whitespace or control characters`},
		{name: "an interface name with a space is refused", containerID: "pod-a", ifName: "eth 0", wantErr: `interface name "eth 0" contains whitespace or control characters`},
	}
	a := newAllocator(t, "", rng("10.244.1.0/24"))
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for op, call := range map[string]func() error{
				"Allocate": func() error { _, err := a.Allocate(tt.containerID, tt.ifName); return err },
				"Get":      func() error { _, err := a.Get(tt.containerID, tt.ifName); return err },
				"Release":  func() error { return a.Release(tt.containerID, tt.ifName) },
			} {
				if err := call(); err == nil || err.Error() != tt.wantErr {
					t.Errorf("%s error = %v, want %q", op, err, tt.wantErr)
				}
			}
		})
	}
	if n := len(mustList(t, a)); n != 0 {
		t.Errorf("store holds %d allocations after invalid calls, want 0", n)
	}
}

func TestExhaustedErrorNamesTheCIDR(t *testing.T) {
	tests := []struct {
		name     string
		rng      Range
		fill     int
		wantErr  *ExhaustedError
		wantText string
	}{
		{
			name:     "a full IPv4 /24 counts 253 usable addresses",
			rng:      rng("10.244.1.0/24"),
			fill:     253,
			wantErr:  &ExhaustedError{Subnet: v4Subnet, Usable: 253, Allocated: 253},
			wantText: "no free address in 10.244.1.0/24: 253 of 253 usable addresses are allocated",
		},
		{
			name:     "a full IPv4 /24 with the source VIP reserved counts 252",
			rng:      rng("10.244.1.0/24", "10.244.1.2"),
			fill:     252,
			wantErr:  &ExhaustedError{Subnet: v4Subnet, Usable: 252, Allocated: 252},
			wantText: "no free address in 10.244.1.0/24: 252 of 252 usable addresses are allocated",
		},
		{
			name:     "a full IPv6 /126 counts 2",
			rng:      rng("fd00:10:244:1::/126"),
			fill:     2,
			wantErr:  &ExhaustedError{Subnet: netip.MustParsePrefix("fd00:10:244:1::/126"), Usable: 2, Allocated: 2},
			wantText: "no free address in fd00:10:244:1::/126: 2 of 2 usable addresses are allocated",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := newAllocator(t, "", tt.rng)
			for i := range tt.fill {
				mustAllocate(t, a, fmt.Sprint("pod-", i), "eth0")
			}
			_, err := a.Allocate("one-too-many", "eth0")
			var got *ExhaustedError
			if !errors.As(err, &got) {
				t.Fatalf("error = %v, want an *ExhaustedError", err)
			}
			if diff := cmp.Diff(tt.wantErr, got, netipCmp); diff != "" {
				t.Errorf("error (-want +got):\n%s", diff)
			}
			if err.Error() != tt.wantText {
				t.Errorf("error text = %q, want %q", err, tt.wantText)
			}
			if !IsExhausted(fmt.Errorf("cni add: %w", err)) {
				t.Error("IsExhausted is false for the wrapped error")
			}
			if held, _ := a.Get("one-too-many", "eth0"); held != nil {
				t.Errorf("the failed attachment holds %v", held)
			}
		})
	}
	t.Run("other errors are not exhaustion", func(t *testing.T) {
		if IsExhausted(errors.New("no free address")) || IsExhausted(nil) {
			t.Error("IsExhausted is true for an unrelated error")
		}
	})
}

func TestAllocateIsAtomicAcrossFamilies(t *testing.T) {
	// The IPv6 /126 has ::3 as its only usable address once ::2 is the VIP.
	v4, v6 := rng("10.244.1.0/24", "10.244.1.2"), rng("fd00:10:244:1::/126", "fd00:10:244:1::2")
	a := newAllocator(t, "", v4, v6)
	podA := mustAllocate(t, a, "pod-a", "eth0")

	_, err := a.Allocate("pod-b", "eth0")
	if want := "no free address in fd00:10:244:1::/126: 1 of 1 usable addresses are allocated"; err == nil || err.Error() != want {
		t.Fatalf("Allocate(pod-b) error = %v, want %q", err, want)
	}
	if held, err := a.Get("pod-b", "eth0"); held != nil || err != nil {
		t.Errorf("pod-b holds %v (err %v) after a failed Allocate, want nothing", held, err)
	}
	if diff := cmp.Diff(podA, mustList(t, a), netipCmp); diff != "" {
		t.Errorf("store after the failed Allocate (-want +got):\n%s", diff)
	}

	// Once pod-a is gone, the IPv4 address pod-b briefly took is not held:
	// round-robin moves past it, but nothing else is lost.
	mustRelease(t, a, "pod-a", "eth0")
	podB := mustAllocate(t, a, "pod-b", "eth0")
	if diff := cmp.Diff(addrs("10.244.1.5", "fd00:10:244:1::3"), ipsOf(podB), netipCmp); diff != "" {
		t.Errorf("pod-b (-want +got):\n%s", diff)
	}
	free, err := a.Free()
	if err != nil {
		t.Fatal(err)
	}
	wantFree := map[netip.Prefix]uint64{v4Subnet: 251, v6.Subnet: 0}
	if diff := cmp.Diff(wantFree, free, netipCmp); diff != "" {
		t.Errorf("Free (-want +got):\n%s", diff)
	}
}
