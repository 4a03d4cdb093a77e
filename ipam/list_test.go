// Address plan: 10.244.1.0/24 (.1 gateway, .2 source VIP) and
// fd00:10:244:1::/64 (::1 gateway, ::2 source VIP); pods get .3 and ::3
// onwards.
package ipam

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestList(t *testing.T) {
	gw4, gw6 := addr("10.244.1.1"), addr("fd00:10:244:1::1")
	tests := []struct {
		name string
		pods []string // allocated on eth0, in order
		gone []string // then released
		want []Allocation
	}{
		{
			name: "an empty store lists nothing",
			want: []Allocation{},
		},
		{
			name: "allocations are listed IPv4 first, each family by address",
			pods: []string{"pod-a", "pod-b", "pod-c"},
			gone: []string{"pod-b"},
			want: []Allocation{
				{ContainerID: "pod-a", IfName: "eth0", IP: addr("10.244.1.3"), Subnet: v4Subnet, Gateway: gw4},
				{ContainerID: "pod-c", IfName: "eth0", IP: addr("10.244.1.5"), Subnet: v4Subnet, Gateway: gw4},
				{ContainerID: "pod-a", IfName: "eth0", IP: addr("fd00:10:244:1::3"), Subnet: v6Subnet, Gateway: gw6},
				{ContainerID: "pod-c", IfName: "eth0", IP: addr("fd00:10:244:1::5"), Subnet: v6Subnet, Gateway: gw6},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := newAllocator(t, "", rng("10.244.1.0/24", "10.244.1.2"), rng("fd00:10:244:1::/64", "fd00:10:244:1::2"))
			for _, pod := range tt.pods {
				mustAllocate(t, a, pod, "eth0")
			}
			for _, pod := range tt.gone {
				mustRelease(t, a, pod, "eth0")
			}
			if diff := cmp.Diff(tt.want, mustList(t, a), netipCmp); diff != "" {
				t.Errorf("List (-want +got):\n%s", diff)
			}
		})
	}
}

func TestListSaysWhenEachAddressWasAllocated(t *testing.T) {
	dataDir := t.TempDir()
	a := newAllocator(t, dataDir, rng("10.244.1.0/24", "10.244.1.2"))
	before := time.Now().Add(-time.Second) // file times may be coarser than the clock
	mustAllocate(t, a, "pod-a", "eth0")
	mustAllocate(t, a, "pod-b", "eth0")
	// pod-a's address is an hour old, as after an agent restart.
	old := time.Now().Add(-time.Hour).Truncate(time.Second)
	if err := os.Chtimes(filepath.Join(dataDir, testNetwork, "10.244.1.3"), old, old); err != nil {
		t.Fatal(err)
	}
	// Allocating again (a retried ADD) does not make it younger.
	mustAllocate(t, a, "pod-a", "eth0")
	list, err := a.List()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]time.Time{}
	for _, al := range list {
		got[al.ContainerID] = al.Allocated
	}
	if !got["pod-a"].Equal(old) {
		t.Errorf("pod-a allocated at %v, want %v (its file's time)", got["pod-a"], old)
	}
	if b := got["pod-b"]; b.Before(before) || b.After(time.Now().Add(time.Second)) {
		t.Errorf("pod-b allocated at %v, want about now", b)
	}
}
