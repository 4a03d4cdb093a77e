// Address plan: 10.244.1.0/24 (.1 gateway, .2 source VIP) and
// fd00:10:244:1::/64 (::1 gateway, ::2 source VIP); pods get .3 and ::3
// onwards.
package ipam

import (
	"testing"

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
