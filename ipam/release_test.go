// Address plan: 10.244.1.0/24 (.1 gateway, .2 source VIP) and
// fd00:10:244:1::/64 (::1 gateway, ::2 source VIP); pods get .3 and ::3
// onwards. 10.244.9.0/24 is a former pod CIDR.
package ipam

import (
	"net/netip"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestRelease(t *testing.T) {
	v4, v6 := rng("10.244.1.0/24", "10.244.1.2"), rng("fd00:10:244:1::/64", "fd00:10:244:1::2")
	tests := []struct {
		name    string
		files   map[string]string // written before the Allocator opens
		pods    []string          // container IDs allocated on eth0
		release [][2]string       // attachments released, each twice
		want    []netip.Addr      // what the store holds afterwards
	}{
		{
			name:    "releasing an attachment that holds nothing succeeds",
			pods:    []string{"pod-a"},
			release: [][2]string{{"pod-z", "eth0"}},
			want:    addrs("10.244.1.3", "fd00:10:244:1::3"),
		},
		{
			name:    "releasing frees both families and only that attachment",
			pods:    []string{"pod-a", "pod-b"},
			release: [][2]string{{"pod-a", "eth0"}},
			want:    addrs("10.244.1.4", "fd00:10:244:1::4"),
		},
		{
			name:    "releasing another interface of the container keeps eth0's addresses",
			pods:    []string{"pod-a"},
			release: [][2]string{{"pod-a", "net1"}},
			want:    addrs("10.244.1.3", "fd00:10:244:1::3"),
		},
		{
			name:    "an address from a former pod CIDR is released too",
			files:   map[string]string{"10.244.9.7": "pod-a\r\neth0", "10.244.9.8": "pod-b\r\neth0"},
			release: [][2]string{{"pod-a", "eth0"}},
			want:    addrs("10.244.9.8"),
		},
		{
			name:    "a file from an old host-local without an interface name is released by any interface",
			files:   map[string]string{"10.244.1.50": "pod-a", "10.244.1.51": "pod-b"},
			release: [][2]string{{"pod-a", "eth1"}},
			want:    addrs("10.244.1.51"),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dataDir := t.TempDir()
			for name, content := range tt.files {
				writeFile(t, dataDir, name, content)
			}
			a := newAllocator(t, dataDir, v4, v6)
			for _, pod := range tt.pods {
				mustAllocate(t, a, pod, "eth0")
			}
			for _, att := range tt.release {
				mustRelease(t, a, att[0], att[1])
				mustRelease(t, a, att[0], att[1]) // idempotent
				if held, err := a.Get(att[0], att[1]); held != nil || err != nil {
					t.Errorf("%s/%s still holds %v (err %v)", att[0], att[1], held, err)
				}
			}
			if diff := cmp.Diff(tt.want, ipsOf(mustList(t, a)), netipCmp); diff != "" {
				t.Errorf("store after release (-want +got):\n%s", diff)
			}
		})
	}
}

func TestReleaseUnowned(t *testing.T) {
	tests := []struct {
		name         string
		files        map[string]string
		ip           string
		wantReleased bool
		want         []netip.Addr
	}{
		{
			name:         "an empty file, left by a writer that died mid-write, is removed",
			files:        map[string]string{"10.244.1.8": "", "10.244.1.9": "pod-a\r\neth0"},
			ip:           "10.244.1.8",
			wantReleased: true,
			want:         addrs("10.244.1.9"),
		},
		{
			name:         "a file of whitespace names no owner either",
			files:        map[string]string{"fd00_10_244_1__8": " \r\n"},
			ip:           "fd00:10:244:1::8",
			wantReleased: true,
			want:         []netip.Addr{},
		},
		{
			name:  "a file that names its container is left alone",
			files: map[string]string{"10.244.1.9": "pod-a\r\neth0", "10.244.1.10": "pod-b"},
			ip:    "10.244.1.9",
			want:  addrs("10.244.1.9", "10.244.1.10"),
		},
		{
			name:  "an address without a file is not an error",
			files: map[string]string{"10.244.1.9": "pod-a\r\neth0"},
			ip:    "10.244.1.20",
			want:  addrs("10.244.1.9"),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dataDir := t.TempDir()
			for name, content := range tt.files {
				writeFile(t, dataDir, name, content)
			}
			a := newAllocator(t, dataDir, rng("10.244.1.0/24"), rng("fd00:10:244:1::/64"))
			released, err := a.ReleaseUnowned(addr(tt.ip))
			if err != nil || released != tt.wantReleased {
				t.Errorf("ReleaseUnowned(%s) = %v, %v; want %v", tt.ip, released, err, tt.wantReleased)
			}
			if diff := cmp.Diff(tt.want, ipsOf(mustList(t, a)), netipCmp); diff != "" {
				t.Errorf("store after ReleaseUnowned (-want +got):\n%s", diff)
			}
		})
	}
}

func TestOperationsAfterCloseFail(t *testing.T) {
	a := newAllocator(t, "", rng("10.244.1.0/24"))
	if err := a.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := a.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if _, err := a.Allocate("pod-a", "eth0"); err != ErrClosed {
		t.Errorf("Allocate after Close: %v, want ErrClosed", err)
	}
	if err := a.Release("pod-a", "eth0"); err != ErrClosed {
		t.Errorf("Release after Close: %v, want ErrClosed", err)
	}
	if _, err := a.List(); err != ErrClosed {
		t.Errorf("List after Close: %v, want ErrClosed", err)
	}
}
