// Address plan: 10.244.1.0/24 (.1 gateway, .2 source VIP) and
// fd00:10:244:1::/64 (::1 gateway, ::2 source VIP). A "host-local"
// directory is written with pods at .5, .6, .20, ::7 and the source VIP
// reservation at .2 that Windows startup scripts made; last_reserved_ip.0
// says .20.
package ipam

import (
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/containernetworking/plugins/plugins/ipam/host-local/backend/disk"
	"github.com/google/go-cmp/cmp"
)

func TestAllocationsSurviveARestart(t *testing.T) {
	dataDir := t.TempDir()
	ranges := []Range{rng("10.244.1.0/24", "10.244.1.2"), rng("fd00:10:244:1::/64", "fd00:10:244:1::2")}

	before, err := New(Options{DataDir: dataDir, Network: testNetwork, Ranges: ranges})
	if err != nil {
		t.Fatal(err)
	}
	podA := mustAllocate(t, before, "pod-a", "eth0")
	mustAllocate(t, before, "pod-b", "eth0")
	mustRelease(t, before, "pod-b", "eth0")
	if err := before.Close(); err != nil {
		t.Fatal(err)
	}

	after := newAllocator(t, dataDir, ranges...)
	t.Run("an attachment gets the addresses it held before", func(t *testing.T) {
		got, err := after.Get("pod-a", "eth0")
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(podA, got, netipCmp); diff != "" {
			t.Errorf("Get after restart (-before +after):\n%s", diff)
		}
		if diff := cmp.Diff(podA, mustAllocate(t, after, "pod-a", "eth0"), netipCmp); diff != "" {
			t.Errorf("Allocate after restart (-before +after):\n%s", diff)
		}
	})
	t.Run("round-robin continues after the last address handed out", func(t *testing.T) {
		got := mustAllocate(t, after, "pod-c", "eth0")
		if diff := cmp.Diff(addrs("10.244.1.5", "fd00:10:244:1::5"), ipsOf(got), netipCmp); diff != "" {
			t.Errorf("pod-c (-want +got):\n%s", diff)
		}
	})
}

func TestReadsAHostLocalDirectoryAsIs(t *testing.T) {
	dataDir := t.TempDir()
	// Written the way host-local writes: its own disk store for the current
	// format, by hand for what older or Windows host-local left.
	hl, err := disk.New(testNetwork, dataDir)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range []struct {
		id, ifName, ip, rangeID string
	}{
		{"sourcevip", "eth0", "10.244.1.2", "0"},
		{"pod-a", "eth0", "10.244.1.5", "0"},
		{"pod-a", "eth0", "fd00:10:244:1::7", "1"},
		{"pod-c", "eth0", "10.244.1.20", "0"},
	} {
		if ok, err := hl.Reserve(r.id, r.ifName, net.ParseIP(r.ip), r.rangeID); !ok || err != nil {
			t.Fatalf("host-local Reserve(%s): %v, %v", r.ip, ok, err)
		}
	}
	if err := hl.Close(); err != nil {
		t.Fatal(err)
	}
	writeFile(t, dataDir, "10.244.1.6", "pod-old")                  // before host-local stored ifname
	writeFile(t, dataDir, "fd00_10_244_1__8", "pod-win\r\neth0")    // Windows: ':' escaped as '_'
	writeFile(t, dataDir, "10.244.9.3", "pod-moved\r\neth0")        // a former pod CIDR
	writeFile(t, dataDir, "README", "not an allocation")            // ignored
	writeFile(t, dataDir, "last_reserved_ip.1", "fd00:10:244:1::8") // round-robin state

	a := newAllocator(t, dataDir, rng("10.244.1.0/24", "10.244.1.2"), rng("fd00:10:244:1::/64", "fd00:10:244:1::2"))
	gw4, gw6 := addr("10.244.1.1"), addr("fd00:10:244:1::1")

	t.Run("List shows every allocation file, sorted by address", func(t *testing.T) {
		want := []Allocation{
			{ContainerID: "sourcevip", IfName: "eth0", IP: addr("10.244.1.2"), Subnet: v4Subnet, Gateway: gw4},
			{ContainerID: "pod-a", IfName: "eth0", IP: addr("10.244.1.5"), Subnet: v4Subnet, Gateway: gw4},
			{ContainerID: "pod-old", IP: addr("10.244.1.6"), Subnet: v4Subnet, Gateway: gw4},
			{ContainerID: "pod-c", IfName: "eth0", IP: addr("10.244.1.20"), Subnet: v4Subnet, Gateway: gw4},
			{ContainerID: "pod-moved", IfName: "eth0", IP: addr("10.244.9.3")},
			{ContainerID: "pod-a", IfName: "eth0", IP: addr("fd00:10:244:1::7"), Subnet: v6Subnet, Gateway: gw6},
			{ContainerID: "pod-win", IfName: "eth0", IP: addr("fd00:10:244:1::8"), Subnet: v6Subnet, Gateway: gw6},
		}
		if diff := cmp.Diff(want, mustList(t, a), netipCmp); diff != "" {
			t.Errorf("List (-want +got):\n%s", diff)
		}
	})
	t.Run("Get finds host-local's allocations, legacy files for any interface", func(t *testing.T) {
		for _, tt := range []struct {
			id, ifName string
			want       []netip.Addr
		}{
			{"pod-a", "eth0", addrs("10.244.1.5", "fd00:10:244:1::7")},
			{"pod-old", "eth1", addrs("10.244.1.6")},
			{"pod-win", "eth0", addrs("fd00:10:244:1::8")},
			{"pod-moved", "eth0", addrs("10.244.9.3")},
		} {
			got, err := a.Get(tt.id, tt.ifName)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, ipsOf(got), netipCmp); diff != "" {
				t.Errorf("Get(%s, %s) (-want +got):\n%s", tt.id, tt.ifName, diff)
			}
		}
	})
	t.Run("Allocate returns what host-local gave a retried ADD", func(t *testing.T) {
		got := mustAllocate(t, a, "pod-a", "eth0")
		if diff := cmp.Diff(addrs("10.244.1.5", "fd00:10:244:1::7"), ipsOf(got), netipCmp); diff != "" {
			t.Errorf("Allocate(pod-a) (-want +got):\n%s", diff)
		}
	})
	t.Run("a new pod continues after host-local's last addresses", func(t *testing.T) {
		got := mustAllocate(t, a, "pod-new", "eth0")
		if diff := cmp.Diff(addrs("10.244.1.21", "fd00:10:244:1::9"), ipsOf(got), netipCmp); diff != "" {
			t.Errorf("Allocate(pod-new) (-want +got):\n%s", diff)
		}
	})
	t.Run("host-local reads what nodenet wrote", func(t *testing.T) {
		hl, err := disk.New(testNetwork, dataDir)
		if err != nil {
			t.Fatal(err)
		}
		defer hl.Close()
		want := []string{"10.244.1.21", "fd00:10:244:1::9"}
		if runtime.GOOS == "windows" {
			// host-local's GetByID parses file names with net.ParseIP, so
			// on Windows it misses its own escaped IPv6 files.
			want = want[:1]
		}
		var got []string
		for _, ip := range hl.GetByID("pod-new", "eth0") {
			got = append(got, ip.String())
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("host-local GetByID(pod-new) (-want +got):\n%s", diff)
		}
		if last, err := hl.LastReservedIP("1"); err != nil || last.String() != "fd00:10:244:1::9" {
			t.Errorf("host-local LastReservedIP(1) = %v, %v", last, err)
		}
	})
	t.Run("the store's own files are left alone", func(t *testing.T) {
		for _, name := range []string{"lock", "README", "last_reserved_ip.0"} {
			if _, err := os.Stat(filepath.Join(dataDir, testNetwork, name)); err != nil {
				t.Errorf("%s: %v", name, err)
			}
		}
	})
}
