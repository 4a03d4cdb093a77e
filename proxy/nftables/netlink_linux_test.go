package nftables

import (
	"context"
	"errors"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/vishvananda/netns"
	"sigs.k8s.io/knftables"

	"github.com/nodenet/nodenet/internal/nftnl"
	"github.com/nodenet/nodenet/internal/nsexec"
	"github.com/nodenet/nodenet/proxy"
)

// everyShape is a state whose table holds every rule shape, set and map
// the backend writes: the representative services plus UDP and SCTP,
// IPv6 node ports, affinity, firewall and eTP Local, and load-balancer
// ranges that include the node (the "return" for load-balancer
// sources), in both families.
func everyShape() *proxy.State {
	s := representative()
	local6 := ep("[fd00:244:1::5]:8080", true)
	remote6 := ep("[fd00:244:2::7]:8080", false)
	return with(s,
		port("default/sctp:/SCTP", "10.96.0.80", 3868, eps(ep("10.244.2.8:3868", false), ep("10.244.1.5:3868", true)), nodePort(30868)),
		port("default/udp-np:/UDP", "10.96.0.81", 53, eps(ep("10.244.2.8:53", false)), nodePort(30053)),
		port("default/lbnode:/TCP", "10.96.0.90", 443, eps(ep("10.244.2.7:8443", false)), loadBalancer("198.51.100.110", "198.51.100.111"),
			sourceRanges("192.168.0.0/24", "203.0.113.0/24", "203.0.112.0/24")),
		port("default/lbone:/TCP", "10.96.0.91", 443, eps(ep("10.244.2.7:8443", false)), loadBalancer("198.51.100.112"),
			sourceRanges("203.0.113.0/25")),
		port("default/v6:/TCP", "fd00:96::40", 80, eps(local6, remote6), nodePort(30640), loadBalancer("2001:db8:100::100"),
			sourceRanges("fd00:1::/64", "2001:db8:5::/48"), externalLocal),
		port("default/v6sticky:/UDP", "fd00:96::50", 53, eps(local6, remote6), affinity(10*time.Second), nodePort(30650)),
		port("default/v6empty:/TCP", "fd00:96::60", 80, nil, nodePort(30660)),
	)
}

// newNFTBackend returns a Backend in ns that writes through the nft
// binary (knftables), for comparison.
func newNFTBackend(ns netns.NsHandle, tweak func(*Options)) (*Backend, error) {
	var b *Backend
	err := nsexec.Do(ns, func() error {
		nft, err := knftables.New(knftables.InetFamily, TableName)
		if err != nil {
			return err
		}
		opts := testOptions(nft)
		tweak(&opts)
		b, err = New(opts)
		return err
	})
	return b, err
}

// TestEveryRuleShapeLoadsThroughNetlink writes the same states through
// netlink and through nft into two namespaces and compares what nft
// lists: every chain, rule, set, map and element must read back the
// same, and the kernel must hold the same expressions for every rule (nft
// --debug=netlink), so the netlink encoding means what the nft text
// means.
func TestEveryRuleShapeLoadsThroughNetlink(t *testing.T) {
	for name, tweak := range map[string]func(*Options){
		"default options": func(*Options) {},
		"masquerade all, node port addresses, another mark": func(o *Options) {
			o.MasqueradeAll = true
			o.MasqueradeMark = 0x8000
			o.NodePortAddresses = []netip.Prefix{netip.MustParsePrefix("192.168.0.0/24"), netip.MustParsePrefix("192.168.1.0/24"),
				netip.MustParsePrefix("fd00:1::/64")}
		},
		"no detect-local, IPv4 only": func(o *Options) {
			o.LocalTrafficCIDRs = nil
			o.Families = []proxy.IPFamily{proxy.IPv4}
		},
	} {
		t.Run(name, func(t *testing.T) {
			viaNetlink, viaNFT := newNetns(t), newNetns(t)
			nl, err := newKernelBackend(viaNetlink, func(knftables.Interface) Options {
				o := testOptions(nil)
				tweak(&o)
				return o
			})
			if err != nil {
				t.Fatal(err)
			}
			text, err := newNFTBackend(viaNFT, tweak)
			if err != nil {
				t.Fatal(err)
			}
			s := everyShape()
			compare := func(step string, u proxy.Update) {
				t.Helper()
				for _, x := range []struct {
					ns netns.NsHandle
					b  *Backend
				}{{viaNetlink, nl}, {viaNFT, text}} {
					if err := nsexec.Do(x.ns, func() error { return x.b.Sync(context.Background(), u) }); err != nil {
						t.Fatalf("%s: %v", step, err)
					}
				}
				got, err := nftList(viaNetlink)
				if err != nil {
					t.Fatalf("%s: %v", step, err)
				}
				want, err := nftList(viaNFT)
				if err != nil {
					t.Fatalf("%s: %v", step, err)
				}
				if diff := cmp.Diff(want, got); diff != "" {
					t.Errorf("%s: the netlink table differs from nft's (-nft +netlink):\n%s", step, diff)
				}
				gotX, err := nftRuleExpressions(viaNetlink)
				if err != nil {
					t.Fatalf("%s: %v", step, err)
				}
				wantX, err := nftRuleExpressions(viaNFT)
				if err != nil {
					t.Fatalf("%s: %v", step, err)
				}
				if diff := cmp.Diff(wantX, gotX); diff != "" {
					t.Errorf("%s: the kernel holds other expressions for the netlink table's rules (-nft +netlink):\n%s", step, diff)
				}
			}
			compare("full sync", proxy.Update{State: s, Full: true})
			// A partial sync: a changed value (delete then add of one key),
			// removed and added elements, a removed service.
			web := port("default/web:http/TCP", "10.96.0.10", 80, eps(ep("10.244.2.7:8080", false), ep("10.244.2.9:8080", false)))
			gone := s.ServicePorts[key("default/dns:dns/UDP", proxy.IPv4)]
			s = without(with(s, web), gone)
			compare("partial sync", proxy.Update{State: s, Changed: changed(web, gone)})
		})
	}
}

// TestABatchCommitsWholeOrNotAtAll sends one batch of many element
// messages with an invalid element in the middle: the kernel must refuse
// all of it, leaving the table as it was. The same batch without the bad
// element commits.
func TestABatchCommitsWholeOrNotAtAll(t *testing.T) {
	ns := newNetns(t)
	b, err := newKernelBackend(ns, testOptions)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := nsexec.Do(ns, func() error { return b.Sync(ctx, proxy.Update{State: representative(), Full: true}) }); err != nil {
		t.Fatal(err)
	}
	before, err := nftList(ns)
	if err != nil {
		t.Fatal(err)
	}
	const n = 30000
	build := func(bad bool) *txn {
		tx := b.tr.newTxn()
		tx.Add(&knftables.Chain{Name: "added-by-the-batch"})
		for i := range n {
			ip := netip.AddrFrom4([4]byte{10, 200, byte(i >> 8), byte(i)}).String()
			tx.Add(&knftables.Element{Map: "endpoints-tcp-v4", Key: []string{ip + " . 80 . 0"}, Value: []string{"10.244.2.7 . 8080"}})
			verdict := "goto added-by-the-batch"
			if bad && i == n/2 {
				verdict = "goto no-such-chain"
			}
			tx.Add(&knftables.Element{Map: "service-ips-v4", Key: []string{ip + " . tcp . 80"}, Value: []string{verdict}})
		}
		return tx
	}
	msgs, _, err := build(true).Discard()
	if err != nil {
		t.Fatal(err)
	}
	if msgs < 2*n/2000 || msgs > 2*n/400 {
		t.Errorf("%d elements went into %d messages: want them in as few as fit the 64 KiB attribute limit", 2*n, msgs)
	}
	err = nsexec.Do(ns, func() error { return b.tr.run(ctx, build(true)) })
	if !isNotFound(err) {
		t.Fatalf("the batch with a bad element: got %v, want a not-found error", err)
	}
	if !strings.Contains(err.Error(), "service-ips-v4") {
		t.Errorf("the error does not name the set: %v", err)
	}
	after, err := nftList(ns)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(before, after); diff != "" {
		t.Fatalf("a failed batch changed the table:\n%.2000s", diff)
	}
	if err := nsexec.Do(ns, func() error { return b.tr.run(ctx, build(false)) }); err != nil {
		t.Fatal(err)
	}
	after, err = nftList(ns)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Count(after, "goto added-by-the-batch"); got != n {
		t.Errorf("the good batch left %d of its %d verdict elements", got, n)
	}
}

// TestSyncsNeverRunNFT puts an nft that fails and leaves a trace first on
// PATH, then makes every kind of sync and a restart: none may run it.
func TestSyncsNeverRunNFT(t *testing.T) {
	ns := newNetns(t)
	dir := t.TempDir()
	trace := filepath.Join(dir, "ran")
	script := "#!/bin/sh\necho \"$@\" >> " + trace + "\nexit 1\n"
	if err := os.WriteFile(filepath.Join(dir, "nft"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", dir+string(os.PathListSeparator)+os.Getenv("PATH"))
	if p, err := exec.LookPath("nft"); err != nil || p != filepath.Join(dir, "nft") {
		t.Fatalf("the failing nft is not first on PATH: %q %v", p, err)
	}

	b, err := newKernelBackend(ns, testOptions)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	b.now = func() time.Time { return now }
	ctx := context.Background()
	sync := func(b *Backend, u proxy.Update) {
		t.Helper()
		if err := nsexec.Do(ns, func() error { return b.Sync(ctx, u) }); err != nil {
			t.Fatal(err)
		}
	}
	s := everyShape()
	sync(b, proxy.Update{State: s, Full: true})
	web := s.ServicePorts[key("default/web:http/TCP", proxy.IPv4)]
	s2 := without(s, web)
	sync(b, proxy.Update{State: s2, Changed: changed(web)})
	now = now.Add(2 * staleChainDelay)
	sync(b, proxy.Update{State: s2, Full: true}) // deletes the stale chains
	restarted, err := newKernelBackend(ns, testOptions)
	if err != nil {
		t.Fatal(err)
	}
	counting := &countingTransport{transport: restarted.tr}
	restarted.tr = counting
	sync(restarted, proxy.Update{State: s2, Full: true})
	if counting.runs != 0 {
		t.Errorf("the restart onto a correct table ran %d transactions", counting.runs)
	}
	if err := nsexec.Do(ns, func() error { return restarted.Cleanup(ctx) }); err != nil {
		t.Fatal(err)
	}
	if ran, err := os.ReadFile(trace); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the backend ran nft: %q (%v)", ran, err)
	}
}

// TestKernelErrorsNameTheirObject: the kernel's refusal of one message
// is reported with the object it was about, and as not-found when the
// object is missing.
func TestKernelErrorsNameTheirObject(t *testing.T) {
	ns := newNetns(t)
	b, err := newKernelBackend(ns, testOptions)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	tx := b.tr.newTxn()
	tx.Delete(&knftables.Chain{Name: "nothing-here"})
	err = nsexec.Do(ns, func() error { return b.tr.run(ctx, tx) })
	var nl *nftnl.Error
	if !errors.As(err, &nl) || !isNotFound(err) || !errors.Is(err, syscall.ENOENT) || !strings.Contains(err.Error(), "nothing-here") {
		t.Errorf("deleting a chain of a missing table: got %v", err)
	}
	// An unknown rule is refused before anything is sent.
	tx = b.tr.newTxn()
	tx.Add(&knftables.Table{})
	tx.Add(&knftables.Chain{Name: "c"})
	tx.Add(&knftables.Rule{Chain: "c", Rule: "ip daddr 10.0.0.1 counter"})
	if err := nsexec.Do(ns, func() error { return b.tr.run(ctx, tx) }); err == nil || !strings.Contains(err.Error(), "counter") {
		t.Errorf("an unknown statement: got %v", err)
	}
	if _, err := nftList(ns); err == nil {
		t.Errorf("the refused transaction created the table")
	}
}
