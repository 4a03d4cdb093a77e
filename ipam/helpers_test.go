// Address plan for the ipam tests:
//
//	10.244.1.0/24          node pod CIDR (IPv4): .0 network, .1 gateway,
//	                       .2 source VIP when reserved, .255 broadcast
//	10.244.1.0/28          a small range for exhaustion: .3-.14 usable
//	                       with the VIP reserved
//	10.244.1.0/29          a tiny range for round-robin wrap-around
//	10.244.9.0/24          a former pod CIDR (allocations left behind)
//	fd00:10:244:1::/64     node pod CIDR (IPv6): ::0 subnet-router anycast,
//	                       ::1 gateway, ::2 source VIP when reserved
//	fd00:10:244:1::/126    a tiny IPv6 range: ::2 and ::3 usable
package ipam

import (
	"net/netip"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

const testNetwork = "nodenet"

var (
	v4Subnet  = netip.MustParsePrefix("10.244.1.0/24")
	v6Subnet  = netip.MustParsePrefix("fd00:10:244:1::/64")
	sourceVIP = netip.MustParseAddr("10.244.1.2")
)

// netipCmp lets go-cmp compare netip values, whose fields are unexported.
var netipCmp = cmp.Options{
	cmp.Comparer(func(x, y netip.Addr) bool { return x == y }),
	cmp.Comparer(func(x, y netip.Prefix) bool { return x == y }),
}

func TestMain(m *testing.M) {
	// The cross-process test re-runs this binary as an allocating child.
	if os.Getenv(childEnv) != "" {
		os.Exit(runChild())
	}
	os.Exit(m.Run())
}

func addr(s string) netip.Addr { return netip.MustParseAddr(s) }

func addrs(ss ...string) []netip.Addr {
	out := make([]netip.Addr, 0, len(ss))
	for _, s := range ss {
		out = append(out, addr(s))
	}
	return out
}

// rng builds a Range with the default gateway.
func rng(cidr string, reserved ...string) Range {
	return Range{Subnet: netip.MustParsePrefix(cidr), Reserved: addrs(reserved...)}
}

// newAllocator opens an Allocator on dataDir (a new temporary one when
// empty) and closes it when the test ends.
func newAllocator(t testing.TB, dataDir string, ranges ...Range) *Allocator {
	t.Helper()
	if dataDir == "" {
		dataDir = t.TempDir()
	}
	a, err := New(Options{DataDir: dataDir, Network: testNetwork, Ranges: ranges})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() { _ = a.Close() })
	return a
}

func mustAllocate(t testing.TB, a *Allocator, containerID, ifName string) []Allocation {
	t.Helper()
	got, err := a.Allocate(containerID, ifName)
	if err != nil {
		t.Fatalf("Allocate(%s, %s): %v", containerID, ifName, err)
	}
	return got
}

func mustRelease(t testing.TB, a *Allocator, containerID, ifName string) {
	t.Helper()
	if err := a.Release(containerID, ifName); err != nil {
		t.Fatalf("Release(%s, %s): %v", containerID, ifName, err)
	}
}

// mustList returns List without the allocation times, which tests compare
// only in TestListSaysWhenEachAddressWasAllocated.
func mustList(t testing.TB, a *Allocator) []Allocation {
	t.Helper()
	got, err := a.List()
	if err != nil {
		t.Fatalf("List: %v", err)
	}
	for i := range got {
		got[i].Allocated = time.Time{}
	}
	return got
}

func ipsOf(allocs []Allocation) []netip.Addr {
	out := make([]netip.Addr, 0, len(allocs))
	for _, al := range allocs {
		out = append(out, al.IP)
	}
	return out
}

// writeFile writes a file into the store directory the way host-local lays
// it out (name and content given verbatim).
func writeFile(t testing.TB, dataDir, name, content string) {
	t.Helper()
	dir := filepath.Join(dataDir, testNetwork)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}
