package nftables

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/klog/v2/ktesting"
	"sigs.k8s.io/knftables"

	"github.com/nodenet/nodenet/proxy"
)

// sortedDump is the fake's table as sorted lines: the same objects give
// the same text whatever order they were added in.
func sortedDump(fake *knftables.Fake) []string {
	lines := strings.Split(strings.TrimSpace(fake.Dump()), "\n")
	slices.Sort(lines)
	return lines
}

// freshDump is the table a new backend writes for s.
func freshDump(t *testing.T, s *proxy.State, tweak ...func(*Options)) []string {
	t.Helper()
	b, fake := newFakeBackend(t, tweak...)
	mustSync(t, b, proxy.Update{State: s, Full: true})
	return sortedDump(fake)
}

// clock is a settable time for the backend's stale-chain delay.
type clock struct{ now time.Time }

func (c *clock) get() time.Time          { return c.now }
func (c *clock) advance(d time.Duration) { c.now = c.now.Add(d) }

func withClock(b *Backend) *clock {
	c := &clock{now: time.Unix(1e9, 0)}
	b.now = c.get
	return c
}

func TestTheTableNamesEverythingAfterItsService(t *testing.T) {
	b, fake := newFakeBackend(t)
	mustSync(t, b, proxy.Update{State: representative(), Full: true})
	dump := fake.Dump()
	for _, want := range []string{
		`add table inet nodenet { comment "nodenet service proxy" ; }`,
		`add chain inet nodenet nat-prerouting { type nat hook prerouting priority -100 ; }`,
		`add chain inet nodenet filter-output { type filter hook output priority -110 ; }`,
		`add rule inet nodenet services ip daddr . meta l4proto . th dport vmap @service-ips-v4`,
		`add rule inet nodenet services fib daddr type local ip daddr != 127.0.0.0/8 meta l4proto . th dport vmap @service-nodeports-v4`,
		`add rule inet nodenet svc-default/web/tcp/80/http-v4 ip saddr != @local-traffic-v4 meta mark set meta mark | 0x00004000 comment "masquerade off-cluster traffic"`,
		`add rule inet nodenet svc-default/web/tcp/80/http-v4 goto pick-2-tcp-v4`,
		`add rule inet nodenet pick-2-tcp-v4 dnat ip addr . port to ip daddr . tcp dport . numgen random mod 2 map @endpoints-tcp-v4`,
		`add element inet nodenet service-ips-v4 { 10.96.0.10 . tcp . 80 : goto svc-default/web/tcp/80/http-v4 }`,
		`add element inet nodenet endpoints-tcp-v4 { 10.96.0.10 . 80 . 0 : 10.244.1.5 . 8080 }`,
		`add element inet nodenet endpoints-tcp-v4 { 10.96.0.10 . 80 . 1 : 10.244.2.7 . 8080 }`,
		`add element inet nodenet endpoints-udp-v4 { 10.96.0.53 . 53 . 0 : 10.244.2.8 . 53 }`,
		`add rule inet nodenet svc-default/web6/tcp/80-v6 goto pick-1-tcp-v6`,
		`add element inet nodenet endpoints-tcp-v6 { fd00:96::10 . 80 . 0 : fd00:244:1::5 . 8080 }`,
		// Node ports, external and load-balancer IPs.
		`add element inet nodenet service-nodeports-v4 { tcp . 30080 : goto ext-default/np/tcp/80-v4 }`,
		`add rule inet nodenet ext-default/np/tcp/80-v4 meta mark set meta mark | 0x00004000 comment "masquerade external traffic"`,
		`add rule inet nodenet ext-default/np/tcp/80-v4 goto pick-nodeport-2-tcp-v4`,
		`add element inet nodenet nodeport-endpoints-tcp-v4 { 30080 . 1 : 10.244.2.7 . 8080 }`,
		`add rule inet nodenet ext-default/lb/tcp/443-v4 th dport 30443 goto pick-nodeport-2-tcp-v4`,
		`add rule inet nodenet ext-default/lb/tcp/443-v4 goto pick-2-tcp-v4`,
		`add element inet nodenet service-ips-v4 { 198.51.100.100 . tcp . 443 : goto ext-default/lb/tcp/443-v4 }`,
		`add element inet nodenet service-ips-v4 { 198.51.100.1 . tcp . 443 : goto ext-default/lb/tcp/443-v4 }`,
		`add element inet nodenet firewall-ips-v4 { 198.51.100.100 . tcp . 443 : goto fw-default/lb/tcp/443-v4 }`,
		`add rule inet nodenet fw-default/lb/tcp/443-v4 ip saddr != { 192.0.2.0/24, 203.0.113.0/25 } drop comment "loadBalancerSourceRanges"`,
		// eTP Local.
		`add rule inet nodenet ext-default/local/tcp/80-v4 ip saddr @local-traffic-v4 goto clu-default/local/tcp/80-v4 comment "short-circuit pod traffic"`,
		`add rule inet nodenet ext-default/local/tcp/80-v4 fib saddr type local meta mark set meta mark | 0x00004000 goto clu-default/local/tcp/80-v4 comment "masquerade and short-circuit node traffic"`,
		`add rule inet nodenet ext-default/local/tcp/80-v4 th dport 30040 goto pick-nodeport-1-tcp-v4`,
		`add rule inet nodenet clu-default/local/tcp/80-v4 numgen random mod 2 == 0 meta l4proto tcp dnat ip to 10.244.1.5:8080`,
		`add rule inet nodenet clu-default/local/tcp/80-v4 meta l4proto tcp dnat ip to 10.244.2.7:8080`,
		`add element inet nodenet no-endpoint-nodeports-v4 { tcp . 30041 : drop }`,
		// Affinity.
		`add set inet nodenet aff-default/sticky/tcp/80-v4/10.244.1.5/8080 { type ipv4_addr ; flags dynamic,timeout ; timeout 10800s ; }`,
		`add rule inet nodenet svc-default/sticky/tcp/80-v4 ip saddr @aff-default/sticky/tcp/80-v4/10.244.1.5/8080 update @aff-default/sticky/tcp/80-v4/10.244.1.5/8080 { ip saddr } meta l4proto tcp dnat ip to 10.244.1.5:8080`,
		`add rule inet nodenet svc-default/sticky/tcp/80-v4 numgen random mod 2 == 0 update @aff-default/sticky/tcp/80-v4/10.244.1.5/8080 { ip saddr } meta l4proto tcp dnat ip to 10.244.1.5:8080`,
		// No endpoints, and a Local policy without local endpoints.
		`add element inet nodenet no-endpoint-services-v4 { 10.96.0.60 . tcp . 80 : goto reject-chain }`,
		`add element inet nodenet no-endpoint-nodeports-v4 { tcp . 30060 : goto reject-chain }`,
		`add element inet nodenet no-endpoint-services-v4 { 10.96.0.70 . tcp . 80 : drop }`,
		// Shared sets.
		`add element inet nodenet cluster-ips-v4 { 10.96.0.60 }`,
		`add element inet nodenet hairpin-v4 { 10.244.1.5 . 10.244.1.5 }`,
		`add element inet nodenet service-cidrs-v4 { 10.96.0.0/16 }`,
		`add rule inet nodenet cluster-ips-check ip daddr @service-cidrs-v4 drop comment "drop traffic to unallocated cluster IPs"`,
	} {
		if !strings.Contains(dump, want+"\n") {
			t.Errorf("the table lacks\n\t%s", want)
		}
	}
	for _, unwanted := range []string{"ext-default/web/", "ext-default/empty/", "svc-default/empty/", "svc-default/itp/"} {
		if strings.Contains(dump, unwanted) {
			t.Errorf("the table has %s, which has nothing to do", unwanted)
		}
	}
	if t.Failed() {
		t.Log(dump)
	}
}

func TestTheFirstSyncReplacesTheTableAnEarlierRunLeft(t *testing.T) {
	b, fake := newFakeBackend(t)
	tx := fake.NewTransaction()
	tx.Add(&knftables.Table{})
	tx.Add(&knftables.Chain{Name: "svc-default/gone/tcp/80-v4"})
	tx.Add(&knftables.Rule{Chain: "svc-default/gone/tcp/80-v4", Rule: "drop"})
	if err := fake.Run(context.Background(), tx); err != nil {
		t.Fatal(err)
	}
	s := representative()
	mustSync(t, b, proxy.Update{State: s, Full: true})
	if diff := cmp.Diff(freshDump(t, s), sortedDump(fake)); diff != "" {
		t.Errorf("the table differs from a fresh one (-fresh +got):\n%s", diff)
	}
}

func TestCleanupDeletesTheTable(t *testing.T) {
	b, fake := newFakeBackend(t)
	s := representative()
	mustSync(t, b, proxy.Update{State: s, Full: true})
	if err := b.Cleanup(context.Background()); err != nil {
		t.Fatal(err)
	}
	if fake.Table != nil {
		t.Errorf("the table is still there:\n%s", fake.Dump())
	}
	// A sync after a cleanup builds the table again.
	mustSync(t, b, proxy.Update{State: s})
	if diff := cmp.Diff(freshDump(t, s), sortedDump(fake)); diff != "" {
		t.Errorf("the table differs from a fresh one (-fresh +got):\n%s", diff)
	}
}

func TestAPartialSyncWritesOnlyWhatChangedInTheChangedServicePort(t *testing.T) {
	b, fake := newFakeBackend(t)
	s := representative()
	mustSync(t, b, proxy.Update{State: s, Full: true})

	web := port("default/web:http/TCP", "10.96.0.10", 80,
		eps(ep("10.244.1.5:8080", true), ep("10.244.2.7:8080", false), ep("10.244.2.9:8080", false)))
	s = with(s, web)
	before := b.fp
	mustSync(t, b, proxy.Update{State: s, Changed: changed(web)})
	want := `add chain inet nodenet pick-3-tcp-v4
flush chain inet nodenet pick-3-tcp-v4
add rule inet nodenet pick-3-tcp-v4 dnat ip addr . port to ip daddr . tcp dport . numgen random mod 3 map @endpoints-tcp-v4
flush chain inet nodenet svc-default/web/tcp/80/http-v4
add rule inet nodenet svc-default/web/tcp/80/http-v4 ip saddr != @local-traffic-v4 meta mark set meta mark | 0x00004000 comment "masquerade off-cluster traffic"
add rule inet nodenet svc-default/web/tcp/80/http-v4 goto pick-3-tcp-v4
add element inet nodenet endpoints-tcp-v4 { 10.96.0.10 . 80 . 2 : 10.244.2.9 . 8080 }
` + markerMove(before, b.fp)
	if diff := cmp.Diff(want, fake.LastTransaction.String()); diff != "" {
		t.Errorf("adding an endpoint (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(freshDump(t, s), sortedDump(fake)); diff != "" {
		t.Errorf("the table differs from a fresh one (-fresh +got):\n%s", diff)
	}

	// An endpoint changing address is one element.
	web = port("default/web:http/TCP", "10.96.0.10", 80,
		eps(ep("10.244.1.5:8080", true), ep("10.244.2.7:8080", false), ep("10.244.2.10:8080", false)))
	s = with(s, web)
	before = b.fp
	mustSync(t, b, proxy.Update{State: s, Changed: changed(web)})
	want = `delete element inet nodenet endpoints-tcp-v4 { 10.96.0.10 . 80 . 2 }
add element inet nodenet endpoints-tcp-v4 { 10.96.0.10 . 80 . 2 : 10.244.2.10 . 8080 }
` + markerMove(before, b.fp)
	if diff := cmp.Diff(want, fake.LastTransaction.String()); diff != "" {
		t.Errorf("moving an endpoint (-want +got):\n%s", diff)
	}
}

// markerMove is how a transaction moves the state marker from before to
// after.
func markerMove(before, after fingerprint) string {
	return "delete chain inet nodenet " + before.marker() + "\nadd chain inet nodenet " + after.marker() + "\n"
}

func TestAnUnchangedServicePortCostsNoTransaction(t *testing.T) {
	b, fake := newFakeBackend(t)
	s := representative()
	mustSync(t, b, proxy.Update{State: s, Full: true})
	last := fake.LastTransaction

	// Changed lists a port whose ServicePort is the same (or an equal
	// copy): nothing differs, so nft is not run.
	web := *s.ServicePorts[key("default/web:http/TCP", proxy.IPv4)]
	s = with(s, &web)
	mustSync(t, b, proxy.Update{State: s, Changed: changed(&web)})
	if fake.LastTransaction != last {
		t.Errorf("an unchanged port ran a transaction:\n%s", fake.LastTransaction)
	}
}

func TestAPeriodicFullSyncOnlyReassertsTheSharedChainsAndSets(t *testing.T) {
	b, fake := newFakeBackend(t)
	s := representative()
	mustSync(t, b, proxy.Update{State: s, Full: true})
	mustSync(t, b, proxy.Update{State: s, Full: true})
	tx := fake.LastTransaction.String()
	for _, line := range strings.Split(strings.TrimSpace(tx), "\n") {
		if strings.Contains(line, "default/") || strings.Contains(line, "chain inet nodenet pick-") || strings.Contains(line, "table") ||
			strings.HasPrefix(line, "add element") && !strings.Contains(line, "-cidrs-") && !strings.Contains(line, "local-traffic-") {
			t.Errorf("a full sync with nothing changed wrote %q", line)
		}
	}
	if !strings.Contains(tx, "flush chain inet nodenet services\n") {
		t.Errorf("the full sync did not re-assert the services chain:\n%s", tx)
	}
	if diff := cmp.Diff(freshDump(t, s), sortedDump(fake)); diff != "" {
		t.Errorf("the table differs from a fresh one (-fresh +got):\n%s", diff)
	}
}

func TestRemovingServicePortsCleansUpEverything(t *testing.T) {
	b, fake := newFakeBackend(t)
	c := withClock(b)
	s := representative()
	mustSync(t, b, proxy.Update{State: s, Full: true})

	var gone []*proxy.ServicePort
	for _, sp := range s.ServicePorts {
		gone = append(gone, sp)
	}
	empty := state()
	mustSync(t, b, proxy.Update{State: empty, Changed: changed(gone...)})
	// Chains are emptied at once, and deleted when a later sync finds them
	// stale for long enough.
	if ch := fake.Table.Chains["svc-default/web/tcp/80/http-v4"]; ch == nil || len(ch.Rules) != 0 {
		t.Errorf("the removed port's chain should be empty until deleted: %+v", ch)
	}
	c.advance(staleChainDelay)
	mustSync(t, b, proxy.Update{State: empty})
	if diff := cmp.Diff(freshDump(t, empty), sortedDump(fake)); diff != "" {
		t.Errorf("the table differs from a fresh empty one (-fresh +got):\n%s", diff)
	}
}

func TestAStaleChainComesBackIntoUseWithoutBeingDeleted(t *testing.T) {
	b, fake := newFakeBackend(t)
	c := withClock(b)
	web := port("default/web:http/TCP", "10.96.0.10", 80, eps(ep("10.244.2.7:8080", false)))
	mustSync(t, b, proxy.Update{State: state(web), Full: true})
	mustSync(t, b, proxy.Update{State: state(), Changed: changed(web)})
	c.advance(staleChainDelay / 2)
	mustSync(t, b, proxy.Update{State: state(web), Changed: changed(web)})
	c.advance(2 * staleChainDelay)
	mustSync(t, b, proxy.Update{State: state(web)})
	if ch := fake.Table.Chains["svc-default/web/tcp/80/http-v4"]; ch == nil || len(ch.Rules) != 2 {
		t.Fatalf("the chain back in use was lost: %+v", ch)
	}
	if diff := cmp.Diff(freshDump(t, state(web)), sortedDump(fake)); diff != "" {
		t.Errorf("the table differs from a fresh one (-fresh +got):\n%s", diff)
	}
}

func TestAChangedAffinityTimeoutRecreatesTheAffinitySets(t *testing.T) {
	b, fake := newFakeBackend(t)
	list := eps(ep("10.244.1.5:8080", true), ep("10.244.2.7:8080", false))
	sticky := port("default/sticky:/TCP", "10.96.0.50", 80, list, affinity(3*time.Hour))
	mustSync(t, b, proxy.Update{State: state(sticky), Full: true})
	sticky = port("default/sticky:/TCP", "10.96.0.50", 80, list, affinity(time.Hour))
	mustSync(t, b, proxy.Update{State: state(sticky), Changed: changed(sticky)})
	tx := fake.LastTransaction.String()
	for _, want := range []string{
		"flush chain inet nodenet svc-default/sticky/tcp/80-v4\n",
		"delete set inet nodenet aff-default/sticky/tcp/80-v4/10.244.1.5/8080\n",
		"add set inet nodenet aff-default/sticky/tcp/80-v4/10.244.1.5/8080 { type ipv4_addr ; flags dynamic,timeout ; timeout 3600s ; }\n",
	} {
		if !strings.Contains(tx, want) {
			t.Errorf("the transaction lacks %q:\n%s", want, tx)
		}
	}
	// The sets are deleted only once the rules using them are gone.
	if strings.Index(tx, "flush chain") > strings.Index(tx, "delete set") {
		t.Errorf("a set is deleted before the chain using it is flushed:\n%s", tx)
	}
}

// flakyNFT fails the next Run when told to, without running it.
type flakyNFT struct {
	*knftables.Fake
	fail bool
}

func (f *flakyNFT) Run(ctx context.Context, tx *knftables.Transaction) error {
	if f.fail {
		f.fail = false
		return errors.New("injected failure")
	}
	return f.Fake.Run(ctx, tx)
}

func TestTheSyncAfterAFailureRebuildsTheTable(t *testing.T) {
	fake := knftables.NewFake(knftables.InetFamily, TableName)
	flaky := &flakyNFT{Fake: fake}
	opts := testOptions(flaky)
	b, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	s := representative()
	mustSync(t, b, proxy.Update{State: s, Full: true})

	// A failed transaction leaves the table as it was.
	web := port("default/web:http/TCP", "10.96.0.10", 80, eps(ep("10.244.2.9:8080", false)))
	flaky.fail = true
	if err := b.Sync(context.Background(), proxy.Update{State: with(s, web), Changed: changed(web)}); err == nil {
		t.Fatal("the sync did not report the failure")
	}
	// Someone also deletes one of our chains behind our back.
	tx := fake.NewTransaction()
	tx.Delete(&knftables.Chain{Name: "svc-default/np/tcp/80-v4"})
	if err := fake.Run(context.Background(), tx); err != nil {
		t.Fatal(err)
	}
	// The runner retries with a full sync, which rebuilds the table.
	s = with(s, web)
	mustSync(t, b, proxy.Update{State: s, Full: true})
	if !strings.HasPrefix(fake.LastTransaction.String(), "add table inet nodenet\ndelete table inet nodenet\n") {
		t.Errorf("the sync after a failure did not replace the table:\n%.300s", fake.LastTransaction)
	}
	if diff := cmp.Diff(freshDump(t, s), sortedDump(fake)); diff != "" {
		t.Errorf("the table differs from a fresh one (-fresh +got):\n%s", diff)
	}
	// And partial syncs work again.
	web = port("default/web:http/TCP", "10.96.0.10", 80, eps(ep("10.244.2.10:8080", false)))
	s = with(s, web)
	mustSync(t, b, proxy.Update{State: s, Changed: changed(web)})
	if diff := cmp.Diff(freshDump(t, s), sortedDump(fake)); diff != "" {
		t.Errorf("after a partial sync the table differs from a fresh one (-fresh +got):\n%s", diff)
	}
}

func TestAPartialSyncOfATamperedTableFailsAndTheNextRebuildsIt(t *testing.T) {
	b, fake := newFakeBackend(t)
	s := representative()
	mustSync(t, b, proxy.Update{State: s, Full: true})
	tx := fake.NewTransaction()
	tx.Delete(&knftables.Chain{Name: "svc-default/web/tcp/80/http-v4"})
	if err := fake.Run(context.Background(), tx); err != nil {
		t.Fatal(err)
	}
	web := port("default/web:http/TCP", "10.96.0.10", 80, eps(ep("10.244.2.9:8080", false)))
	s = with(s, web)
	if err := b.Sync(context.Background(), proxy.Update{State: s, Changed: changed(web)}); !knftables.IsNotFound(err) {
		t.Fatalf("got %v, want the missing chain reported", err)
	}
	mustSync(t, b, proxy.Update{State: s, Full: true})
	if diff := cmp.Diff(freshDump(t, s), sortedDump(fake)); diff != "" {
		t.Errorf("the table differs from a fresh one (-fresh +got):\n%s", diff)
	}
}

// recordingConntrack records Flush calls.
type recordingConntrack struct {
	calls []string
	err   error
}

func (r *recordingConntrack) Flush(prev, next *proxy.State, changed map[proxy.ServicePortKey]struct{}) error {
	var keys []string
	for k := range changed {
		keys = append(keys, k.String())
	}
	slices.Sort(keys)
	r.calls = append(r.calls, fmt.Sprintf("prev=%d next=%d changed=%v(nil=%v)",
		portsOf(prev), portsOf(next), keys, changed == nil))
	return r.err
}

func portsOf(s *proxy.State) int {
	if s == nil {
		return -1
	}
	return len(s.ServicePorts)
}

func TestConntrackIsFlushedAfterEverySuccessfulSync(t *testing.T) {
	ct := &recordingConntrack{err: errors.New("flushing is best effort")}
	flaky := &flakyNFT{Fake: knftables.NewFake(knftables.InetFamily, TableName)}
	opts := testOptions(flaky)
	opts.Logger = ktesting.NewLogger(t, ktesting.NewConfig())
	opts.Conntrack = ct
	b, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	s := representative()
	dns := port("default/dns:dns/UDP", "10.96.0.53", 53, eps(ep("10.244.2.9:53", false)))
	mustSync(t, b, proxy.Update{State: s, Full: true})
	mustSync(t, b, proxy.Update{State: with(s, dns), Changed: changed(dns)})
	flaky.fail = true
	if err := b.Sync(context.Background(), proxy.Update{State: without(s, dns), Changed: changed(dns)}); err == nil {
		t.Fatal("the injected failure was not reported")
	}
	mustSync(t, b, proxy.Update{State: without(s, dns), Full: true})
	want := []string{
		"prev=-1 next=10 changed=[](nil=true)",
		"prev=10 next=10 changed=[default/dns:dns/UDP/IPv4](nil=false)",
		// The failed sync flushed nothing; the next compares with the
		// last state programmed, all keys.
		"prev=10 next=9 changed=[](nil=true)",
	}
	if diff := cmp.Diff(want, ct.calls); diff != "" {
		t.Errorf("Flush calls (-want +got):\n%s", diff)
	}
}

func TestObserveSeesEveryTransaction(t *testing.T) {
	var ops []string
	b, _ := newFakeBackend(t, func(o *Options) {
		o.Observe = func(op string, err error, d time.Duration) {
			ops = append(ops, fmt.Sprintf("%s err=%v", op, err))
		}
	})
	c := withClock(b)
	s := representative()
	web := s.ServicePorts[key("default/web:http/TCP", proxy.IPv4)]
	mustSync(t, b, proxy.Update{State: s, Full: true})
	mustSync(t, b, proxy.Update{State: without(s, web), Changed: changed(web)})
	c.advance(staleChainDelay)
	mustSync(t, b, proxy.Update{State: without(s, web), Full: true})
	want := []string{"full-sync err=<nil>", "partial-sync err=<nil>", "stale-chains err=<nil>", "full-sync err=<nil>"}
	if diff := cmp.Diff(want, ops); diff != "" {
		t.Errorf("observed (-want +got):\n%s", diff)
	}
}

func TestNewRejectsOptionsItCannotProgram(t *testing.T) {
	fake := knftables.NewFake(knftables.InetFamily, TableName)
	tests := []struct {
		name  string
		tweak func(*Options)
	}{
		{"no family", func(o *Options) { o.Families = nil }},
		{"an unknown family", func(o *Options) { o.Families = []proxy.IPFamily{"IPv5"} }},
		{"an invalid prefix", func(o *Options) { o.ServiceCIDRs = []netip.Prefix{{}} }},
		{"an invalid node IP", func(o *Options) { o.NodeIPs = []netip.Addr{{}} }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			opts := testOptions(fake)
			tt.tweak(&opts)
			if _, err := New(opts); err == nil {
				t.Error("New accepted it")
			}
		})
	}
}

func TestOnlyTheConfiguredFamiliesAreProgrammed(t *testing.T) {
	b, fake := newFakeBackend(t, func(o *Options) { o.Families = []proxy.IPFamily{proxy.IPv4} })
	mustSync(t, b, proxy.Update{State: representative(), Full: true})
	if dump := fake.Dump(); strings.Contains(dump, "-v6") || strings.Contains(dump, "ip6") {
		t.Errorf("an IPv4-only backend wrote IPv6 objects:\n%s", dump)
	}
}

func TestOverlappingPrefixesAreMerged(t *testing.T) {
	b, fake := newFakeBackend(t, func(o *Options) {
		o.ServiceCIDRs = []netip.Prefix{
			netip.MustParsePrefix("10.96.1.0/24"), netip.MustParsePrefix("10.96.0.0/16"), netip.MustParsePrefix("10.97.0.1/16"),
		}
	})
	lb := port("default/lb:/TCP", "10.96.0.30", 443, eps(ep("10.244.2.7:8080", false)),
		loadBalancer("198.51.100.100"), sourceRanges("203.0.113.0/24", "203.0.113.128/25", "192.0.2.0/24"))
	mustSync(t, b, proxy.Update{State: state(lb), Full: true})
	var elems []string
	for _, e := range fake.Table.Sets["service-cidrs-v4"].Elements {
		elems = append(elems, e.Key...)
	}
	if diff := cmp.Diff([]string{"10.96.0.0/16", "10.97.0.0/16"}, elems); diff != "" {
		t.Errorf("service CIDRs (-want +got):\n%s", diff)
	}
	fw := fake.Table.Chains["fw-default/lb/tcp/443-v4"]
	if fw == nil || fw.Rules[0].Rule != "ip saddr != { 192.0.2.0/24, 203.0.113.0/24 } drop" {
		t.Errorf("firewall chain %+v", fw)
	}
}

func TestSourceRangesThatIncludeTheNodeAdmitItsLoadBalancerIPs(t *testing.T) {
	b, fake := newFakeBackend(t)
	remote, remote6 := ep("10.244.2.7:8080", false), ep("[fd00:244:2::7]:8080", false)
	lb := port("default/lb:/TCP", "10.96.0.30", 443, eps(remote),
		loadBalancer("198.51.100.103", "198.51.100.102"), sourceRanges("203.0.113.0/25", "192.168.0.0/24"))
	lb6 := port("default/lb:/TCP", "fd00:96::30", 443, eps(remote6),
		loadBalancer("2001:db8:100::100"), sourceRanges("fd00:1::/64"))
	s := state(lb, lb6)
	mustSync(t, b, proxy.Update{State: s, Full: true})
	dump := fake.Dump()
	for _, want := range []string{
		`add rule inet nodenet fw-default/lb/tcp/443-v4 ip saddr { 198.51.100.102, 198.51.100.103 } return comment "the node is in the ranges: admit it from a load-balancer IP"`,
		`add rule inet nodenet fw-default/lb/tcp/443-v4 ip saddr != { 192.168.0.0/24, 203.0.113.0/25 } drop comment "loadBalancerSourceRanges"`,
		`add rule inet nodenet fw-default/lb/tcp/443-v6 ip6 saddr 2001:db8:100::100 return comment "the node is in the ranges: admit it from a load-balancer IP"`,
		`add rule inet nodenet fw-default/lb/tcp/443-v6 ip6 saddr != fd00:1::/64 drop comment "loadBalancerSourceRanges"`,
	} {
		if !strings.Contains(dump, want+"\n") {
			t.Errorf("the table lacks\n\t%s", want)
		}
	}
	if t.Failed() {
		t.Log(dump)
	}

	// Ranges that stop including the node rewrite only the fw chain.
	lb = port("default/lb:/TCP", "10.96.0.30", 443, eps(remote),
		loadBalancer("198.51.100.103", "198.51.100.102"), sourceRanges("203.0.113.0/25"))
	s = with(s, lb)
	before := b.fp
	mustSync(t, b, proxy.Update{State: s, Changed: changed(lb)})
	want := `flush chain inet nodenet fw-default/lb/tcp/443-v4
add rule inet nodenet fw-default/lb/tcp/443-v4 ip saddr != 203.0.113.0/25 drop comment "loadBalancerSourceRanges"
` + markerMove(before, b.fp)
	if diff := cmp.Diff(want, fake.LastTransaction.String()); diff != "" {
		t.Errorf("excluding the node (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(freshDump(t, s), sortedDump(fake)); diff != "" {
		t.Errorf("the table differs from a fresh one (-fresh +got):\n%s", diff)
	}
}

// TestIncrementalSyncsMatchAFreshTable drives random changes through
// partial syncs (with full syncs and failures mixed in) and checks after
// each that the table is exactly what a new backend would write.
func TestIncrementalSyncsMatchAFreshTable(t *testing.T) {
	fake := knftables.NewFake(knftables.InetFamily, TableName)
	flaky := &flakyNFT{Fake: fake}
	opts := testOptions(flaky)
	opts.Logger = ktesting.NewLogger(t, ktesting.NewConfig())
	b, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	c := withClock(b)
	ch := newChanges(1)
	mustSync(t, b, proxy.Update{State: ch.state, Full: true})
	for step := range 300 {
		u := ch.next()
		switch ch.rng.IntN(20) {
		case 0:
			u.Full = true
		case 1:
			flaky.fail = true
			if err := b.Sync(context.Background(), u); err != nil {
				u = proxy.Update{State: u.State, Full: true}
			}
			flaky.fail = false // unused when the sync had nothing to write
		}
		mustSync(t, b, u)
		// Let the stale chains go, as later syncs would.
		c.advance(staleChainDelay)
		mustSync(t, b, proxy.Update{State: u.State})
		if diff := cmp.Diff(freshDump(t, u.State), sortedDump(fake)); diff != "" {
			t.Fatalf("step %d: the table differs from a fresh one (-fresh +got):\n%s", step, diff)
		}
	}
}

// changes makes random updates of a few services of every kind, sharing
// cluster IPs, external IPs, node ports and endpoints.
type changes struct {
	rng   *rand.Rand
	state *proxy.State
	slots []struct{ key, clusterIP string }
}

func newChanges(seed uint64) *changes {
	c := &changes{rng: rand.New(rand.NewPCG(seed, 2)), state: state()}
	for i := range 6 {
		cip, cip6 := fmt.Sprintf("10.96.0.%d", i+1), fmt.Sprintf("fd00:96::%d", i+1)
		c.slots = append(c.slots,
			struct{ key, clusterIP string }{fmt.Sprintf("ns/svc%d:a/TCP", i), cip},
			struct{ key, clusterIP string }{fmt.Sprintf("ns/svc%d:b/UDP", i), cip},
			struct{ key, clusterIP string }{fmt.Sprintf("ns/svc%d:a/TCP", i), cip6})
	}
	return c
}

// next returns a partial update changing, adding or removing 1-3 ports.
func (c *changes) next() proxy.Update {
	var ports []*proxy.ServicePort
	next := with(c.state)
	for range 1 + c.rng.IntN(3) {
		sl := c.slots[c.rng.IntN(len(c.slots))]
		sp := c.random(sl.key, sl.clusterIP)
		ports = append(ports, sp)
		if c.rng.IntN(4) == 0 {
			delete(next.ServicePorts, sp.Key)
		} else {
			next.ServicePorts[sp.Key] = sp
		}
	}
	c.state = next
	return proxy.Update{State: next, Changed: changed(ports...)}
}

func (c *changes) random(key, clusterIP string) *proxy.ServicePort {
	rng := c.rng
	v6 := strings.Contains(clusterIP, ":")
	candidates := []proxy.Endpoint{
		ep("10.244.1.5:8080", true), ep("10.244.1.6:8080", true), ep("10.244.2.7:8080", false),
		ep("10.244.2.8:8080", false), ep("10.244.2.9:53", false),
	}
	if v6 {
		candidates = []proxy.Endpoint{ep("[fd00:244:1::5]:8080", true), ep("[fd00:244:2::7]:8080", false)}
	}
	var list []proxy.Endpoint
	for _, e := range candidates {
		if rng.IntN(2) == 0 {
			list = append(list, e)
		}
	}
	var tweaks []func(*proxy.ServicePort)
	if rng.IntN(2) == 0 {
		tweaks = append(tweaks, nodePort(uint16(30000+rng.IntN(3))))
	}
	if !v6 && rng.IntN(3) == 0 {
		tweaks = append(tweaks, externalIPs(fmt.Sprintf("198.51.100.%d", 1+rng.IntN(2))))
	}
	if !v6 && rng.IntN(3) == 0 {
		tweaks = append(tweaks, loadBalancer(fmt.Sprintf("198.51.100.%d", 100+rng.IntN(2))))
		// Ranges with and without the node (192.168.0.10).
		switch rng.IntN(3) {
		case 0:
			tweaks = append(tweaks, sourceRanges("203.0.113.0/25"))
		case 1:
			tweaks = append(tweaks, sourceRanges("203.0.113.0/25", "192.168.0.0/24"))
		}
	}
	if rng.IntN(3) == 0 {
		tweaks = append(tweaks, externalLocal)
	}
	if rng.IntN(4) == 0 {
		tweaks = append(tweaks, internalLocal)
	}
	if rng.IntN(4) == 0 {
		tweaks = append(tweaks, affinity(time.Duration(1+rng.IntN(2))*time.Hour))
	}
	return port(key, clusterIP, uint16(80+rng.IntN(2)), list, tweaks...)
}
