package nftables

import (
	"context"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/vishvananda/netns"
	"k8s.io/klog/v2/ktesting"
	"sigs.k8s.io/knftables"

	"github.com/nodenet/nodenet/internal/nsexec"
	"github.com/nodenet/nodenet/proxy"
)

// countingNFT counts the transactions run through it.
type countingNFT struct {
	knftables.Interface
	runs int
}

func (c *countingNFT) Run(ctx context.Context, tx *knftables.Transaction) error {
	c.runs++
	return c.Interface.Run(ctx, tx)
}

// restart returns a new backend on nft (an agent restart), its
// transactions counted, and the number of times it called Observe.
func restart(t testing.TB, nft knftables.Interface, tweak ...func(*Options)) (*Backend, *countingNFT, *int) {
	t.Helper()
	counting := &countingNFT{Interface: nft}
	opts := testOptions(counting)
	opts.Logger = ktesting.NewLogger(t, ktesting.NewConfig())
	observed := new(int)
	opts.Observe = func(string, error, time.Duration) { *observed++ }
	for _, f := range tweak {
		f(&opts)
	}
	b, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	return b, counting, observed
}

func TestANewBackendOnACorrectTableWritesNothing(t *testing.T) {
	old, fake := newFakeBackend(t)
	s := representative()
	mustSync(t, old, proxy.Update{State: s, Full: true})
	// A client is in an affinity set, as the packet path would add it.
	aff := "aff-default/sticky/tcp/80-v4/10.244.2.7/8080"
	tx := fake.NewTransaction()
	tx.Add(&knftables.Element{Set: aff, Key: []string{"203.0.113.5"}})
	if err := fake.Run(context.Background(), tx); err != nil {
		t.Fatal(err)
	}
	before := fake.Dump()

	b, counting, observed := restart(t, fake)
	mustSync(t, b, proxy.Update{State: s, Full: true})
	if counting.runs != 0 || *observed != 0 {
		t.Errorf("the restart ran %d transactions and observed %d, want none", counting.runs, *observed)
	}
	if after := fake.Dump(); after != before {
		t.Errorf("the restart changed the table:\n%s", cmp.Diff(before, after))
	}
	if elems := fake.Table.Sets[aff].Elements; len(elems) != 1 || elems[0].Key[0] != "203.0.113.5" {
		t.Errorf("the affinity set holds %v, want the client it had", elems)
	}

	// The new backend knows the table: a partial sync writes only the
	// change, and moves the marker it found.
	web := port("default/web:http/TCP", "10.96.0.10", 80,
		eps(ep("10.244.1.5:8080", true), ep("10.244.2.7:8080", false), ep("10.244.2.9:8080", false)))
	s = with(s, web)
	fp := b.fp
	mustSync(t, b, proxy.Update{State: s, Changed: changed(web)})
	if got := fake.LastTransaction.String(); strings.Contains(got, "table") || !strings.HasSuffix(got, markerMove(fp, b.fp)) {
		t.Errorf("the partial sync after adopting wrote:\n%s", got)
	}
	got := slices.DeleteFunc(sortedDump(fake), func(line string) bool { return strings.Contains(line, "203.0.113.5") })
	if diff := cmp.Diff(freshDump(t, s), got); diff != "" {
		t.Errorf("the table, but for the affinity client, differs from a fresh one (-fresh +got):\n%s", diff)
	}
}

func TestANewBackendAfterAPartialSyncHistoryWritesNothing(t *testing.T) {
	for seed := range uint64(8) {
		fake := knftables.NewFake(knftables.InetFamily, TableName)
		old, _, _ := restart(t, fake)
		c := withClock(old)
		ch := newChanges(100 + seed)
		mustSync(t, old, proxy.Update{State: ch.state, Full: true})
		for step := range 40 {
			u := ch.next()
			u.Full = step%13 == 12
			mustSync(t, old, u)
			c.advance(staleChainDelay / 2)
		}
		// The last chains emptied are gone before the restart.
		c.advance(staleChainDelay)
		mustSync(t, old, proxy.Update{State: ch.state})

		b, counting, _ := restart(t, fake)
		mustSync(t, b, proxy.Update{State: ch.state, Full: true})
		if counting.runs != 0 {
			t.Fatalf("seed %d: the restart ran %d transactions:\n%s", seed, counting.runs, fake.LastTransaction)
		}
		// What the new backend believes is what the table holds: partial
		// syncs keep it exactly the fresh table.
		c = withClock(b)
		for step := range 20 {
			u := ch.next()
			mustSync(t, b, u)
			c.advance(staleChainDelay)
			mustSync(t, b, proxy.Update{State: u.State})
			if diff := cmp.Diff(freshDump(t, u.State), sortedDump(fake)); diff != "" {
				t.Fatalf("seed %d, step %d after the restart: the table differs from a fresh one (-fresh +got):\n%s", seed, step, diff)
			}
		}
	}
}

func TestANewBackendReplacesATableThatIsNotExactlyItsOwn(t *testing.T) {
	web := port("default/web:http/TCP", "10.96.0.10", 80, eps(ep("10.244.2.9:8080", false)))
	tests := []struct {
		name string
		// change runs between the old backend's syncs and the new one's.
		change func(t *testing.T, old *Backend, fake *knftables.Fake, s *proxy.State) *proxy.State
		tweak  func(*Options)
	}{{
		name: "a deleted chain makes the new backend replace the table",
		change: func(t *testing.T, _ *Backend, fake *knftables.Fake, s *proxy.State) *proxy.State {
			tamper(t, fake, func(tx *knftables.Transaction) { tx.Delete(&knftables.Chain{Name: "svc-default/np/tcp/80-v4"}) })
			return s
		},
	}, {
		name: "a left-over stale chain makes the new backend replace the table",
		change: func(t *testing.T, old *Backend, _ *knftables.Fake, s *proxy.State) *proxy.State {
			// The old backend emptied web's chain and died before
			// deleting it.
			s2 := without(s, s.ServicePorts[key("default/web:http/TCP", proxy.IPv4)])
			mustSync(t, old, proxy.Update{State: s2, Changed: changed(s.ServicePorts[key("default/web:http/TCP", proxy.IPv4)])})
			return s2
		},
	}, {
		name: "a chain someone added makes the new backend replace the table",
		change: func(t *testing.T, _ *Backend, fake *knftables.Fake, s *proxy.State) *proxy.State {
			tamper(t, fake, func(tx *knftables.Transaction) { tx.Add(&knftables.Chain{Name: "debug"}) })
			return s
		},
	}, {
		name: "a set someone added makes the new backend replace the table",
		change: func(t *testing.T, _ *Backend, fake *knftables.Fake, s *proxy.State) *proxy.State {
			tamper(t, fake, func(tx *knftables.Transaction) { tx.Add(&knftables.Set{Name: "debug", Type: "ipv4_addr"}) })
			return s
		},
	}, {
		name: "a different state makes the new backend replace the table",
		change: func(*testing.T, *Backend, *knftables.Fake, *proxy.State) *proxy.State {
			return with(representative(), web)
		},
	}, {
		name:   "different options make the new backend replace the table",
		change: func(_ *testing.T, _ *Backend, _ *knftables.Fake, s *proxy.State) *proxy.State { return s },
		tweak:  func(o *Options) { o.MasqueradeAll = true },
	}, {
		name: "a table without a marker makes the new backend replace the table",
		change: func(t *testing.T, old *Backend, fake *knftables.Fake, s *proxy.State) *proxy.State {
			tamper(t, fake, func(tx *knftables.Transaction) { tx.Delete(&knftables.Chain{Name: old.fp.marker()}) })
			return s
		},
	}, {
		name: "no table makes the new backend write one",
		change: func(t *testing.T, old *Backend, _ *knftables.Fake, s *proxy.State) *proxy.State {
			if err := old.Cleanup(context.Background()); err != nil {
				t.Fatal(err)
			}
			return s
		},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			old, fake := newFakeBackend(t)
			withClock(old)
			s := representative()
			mustSync(t, old, proxy.Update{State: s, Full: true})
			s = tt.change(t, old, fake, s)

			var tweaks []func(*Options)
			if tt.tweak != nil {
				tweaks = append(tweaks, tt.tweak)
			}
			b, counting, _ := restart(t, fake, tweaks...)
			mustSync(t, b, proxy.Update{State: s, Full: true})
			if counting.runs != 1 || !strings.HasPrefix(fake.LastTransaction.String(), "add table inet nodenet\ndelete table inet nodenet\n") {
				t.Errorf("the new backend ran %d transactions, the last:\n%.300s", counting.runs, fake.LastTransaction)
			}
			if diff := cmp.Diff(freshDump(t, s, tweaks...), sortedDump(fake)); diff != "" {
				t.Errorf("the table differs from a fresh one (-fresh +got):\n%s", diff)
			}
		})
	}
}

// tamper runs a transaction behind the backend's back.
func tamper(t *testing.T, fake *knftables.Fake, build func(*knftables.Transaction)) {
	t.Helper()
	tx := fake.NewTransaction()
	build(tx)
	if err := fake.Run(context.Background(), tx); err != nil {
		t.Fatal(err)
	}
}

func TestASyncNoticesThatAnotherWriterMovedTheMarkerAndTheNextRebuilds(t *testing.T) {
	for _, full := range []bool{false, true} {
		b, fake := newFakeBackend(t)
		s := representative()
		mustSync(t, b, proxy.Update{State: s, Full: true})
		// Another backend (a second agent) programs another state.
		other, _, _ := restart(t, fake)
		web := port("default/web:http/TCP", "10.96.0.10", 80, eps(ep("10.244.2.9:8080", false)))
		mustSync(t, other, proxy.Update{State: with(s, web), Full: true})

		u := proxy.Update{State: s, Full: full}
		if !full {
			dns := port("default/dns:dns/UDP", "10.96.0.53", 53, eps(ep("10.244.2.10:53", false)))
			u = proxy.Update{State: with(s, dns), Changed: changed(dns)}
		}
		if err := b.Sync(context.Background(), u); !knftables.IsNotFound(err) {
			t.Fatalf("full=%v: got %v, want the missing marker reported", full, err)
		}
		mustSync(t, b, proxy.Update{State: u.State, Full: true})
		if diff := cmp.Diff(freshDump(t, u.State), sortedDump(fake)); diff != "" {
			t.Errorf("full=%v: the table differs from a fresh one (-fresh +got):\n%s", full, diff)
		}
	}
}

func TestTheStateMarkerDependsOnlyOnTheTableContent(t *testing.T) {
	s := representative()
	a, _ := newFakeBackend(t)
	mustSync(t, a, proxy.Update{State: s, Full: true})
	// A copy of every ServicePort, and the same Options spelled
	// differently, make the same table.
	b, _ := newFakeBackend(t, func(o *Options) {
		o.MasqueradeMark = 0x4000
		o.Families = append(o.Families, o.Families[0])
	})
	cp := state()
	for k, sp := range s.ServicePorts {
		c := *sp
		cp.ServicePorts[k] = &c
	}
	mustSync(t, b, proxy.Update{State: cp, Full: true})
	if a.fp != b.fp {
		t.Errorf("the same table has two fingerprints: %s and %s", a.fp.marker(), b.fp.marker())
	}
	// Anything the table shows changes it.
	for name, tweak := range map[string]func(*Options){
		"another mark":     func(o *Options) { o.MasqueradeMark = 0x8000 },
		"masquerade all":   func(o *Options) { o.MasqueradeAll = true },
		"no service CIDRs": func(o *Options) { o.ServiceCIDRs = nil },
		"IPv4 only":        func(o *Options) { o.Families = []proxy.IPFamily{proxy.IPv4} },
		"other local CIDR": func(o *Options) { o.LocalTrafficCIDRs = o.LocalTrafficCIDRs[:1] },
	} {
		c, _ := newFakeBackend(t, tweak)
		mustSync(t, c, proxy.Update{State: s, Full: true})
		if c.fp == a.fp {
			t.Errorf("%s: the fingerprint did not change", name)
		}
	}
}

// countingTransport counts the transactions a backend runs.
type countingTransport struct {
	transport
	runs int
}

func (c *countingTransport) run(ctx context.Context, tx *txn) error {
	c.runs++
	return c.transport.run(ctx, tx)
}

// kernelBackend returns a new backend in ns, on netlink as the agent's,
// its transactions counted.
func kernelBackend(t testing.TB, ns netns.NsHandle) (*Backend, *countingTransport) {
	t.Helper()
	b, err := newKernelBackend(ns, func(knftables.Interface) Options {
		opts := testOptions(nil)
		opts.Logger = ktesting.NewLogger(t, ktesting.NewConfig())
		return opts
	})
	if err != nil {
		t.Fatal(err)
	}
	counting := &countingTransport{transport: b.tr}
	b.tr = counting
	return b, counting
}

func kernelSync(t testing.TB, ns netns.NsHandle, b *Backend, u proxy.Update) {
	t.Helper()
	if err := nsexec.Do(ns, func() error { return b.Sync(context.Background(), u) }); err != nil {
		t.Fatal(err)
	}
}

func TestInTheKernelANewBackendOnACorrectTableWritesNothing(t *testing.T) {
	ns := newNetns(t)
	old, _ := kernelBackend(t, ns)
	c := withClock(old)
	ch := newChanges(3)
	kernelSync(t, ns, old, proxy.Update{State: ch.state, Full: true})
	for range 20 {
		kernelSync(t, ns, old, ch.next())
		c.advance(staleChainDelay / 2)
	}
	c.advance(staleChainDelay)
	kernelSync(t, ns, old, proxy.Update{State: ch.state})
	before, err := nftList(ns)
	if err != nil {
		t.Fatal(err)
	}

	b, counting := kernelBackend(t, ns)
	kernelSync(t, ns, b, proxy.Update{State: ch.state, Full: true})
	if counting.runs != 0 {
		t.Errorf("the restart ran %d transactions", counting.runs)
	}
	if after, err := nftList(ns); err != nil || after != before {
		t.Errorf("the restart changed the table (%v):\n%s", err, cmp.Diff(before, after))
	}
	// The new backend's partial syncs fit the table it kept (nft fails a
	// transaction that adds what exists or deletes what does not).
	c = withClock(b)
	for range 20 {
		kernelSync(t, ns, b, ch.next())
		c.advance(staleChainDelay / 2)
	}
	if counting.runs == 0 {
		t.Fatal("the random changes ran no transaction")
	}

	// Restarting right after a removal finds the emptied chain still
	// there: the next backend replaces the table.
	var gone *proxy.ServicePort
	for _, sp := range ch.state.ServicePorts {
		if len(sp.InternalEndpoints) > 0 {
			gone = sp
			break
		}
	}
	if gone == nil {
		t.Fatal("no service port with a chain to remove")
	}
	s := without(ch.state, gone)
	kernelSync(t, ns, b, proxy.Update{State: s, Changed: changed(gone)})
	next, counting := kernelBackend(t, ns)
	kernelSync(t, ns, next, proxy.Update{State: s, Full: true})
	if counting.runs != 1 {
		t.Errorf("the restart over a stale chain ran %d transactions, want 1 (a replacement)", counting.runs)
	}
}

func TestInTheKernelAffinityEntriesSurviveAnAdoptingRestart(t *testing.T) {
	ns := connectableNetns(t)
	sticky := port("default/sticky:/TCP", "10.96.0.50", 80,
		eps(ep("10.244.1.5:8080", true), ep("10.244.1.6:8080", true)), affinity(time.Hour))
	s := state(sticky)
	old, _ := kernelBackend(t, ns)
	kernelSync(t, ns, old, proxy.Update{State: s, Full: true})
	first, err := ask(ns, "10.96.0.50:80")
	if err != nil {
		t.Fatal(err)
	}
	set := "aff-default/sticky/tcp/80-v4/" + strings.ReplaceAll(first, ":", "/")
	clients := func() string {
		t.Helper()
		var out []byte
		err := nsexec.Do(ns, func() (err error) {
			out, err = exec.Command("nft", "list", "set", "inet", TableName, set).CombinedOutput()
			return err
		})
		if err != nil {
			t.Fatalf("nft list set: %v: %s", err, out)
		}
		_, elems, _ := strings.Cut(string(out), "elements = ")
		return elems
	}
	if !strings.Contains(clients(), "expires") {
		t.Fatalf("the client is not in %s:\n%s", set, clients())
	}

	b, counting := kernelBackend(t, ns)
	kernelSync(t, ns, b, proxy.Update{State: s, Full: true})
	if counting.runs != 0 {
		t.Errorf("the restart ran %d transactions", counting.runs)
	}
	if !strings.Contains(clients(), "expires") {
		t.Errorf("the restart emptied %s", set)
	}
	// Without affinity, 20 connections over two endpoints would all hit
	// the first one once in half a million runs.
	for i := range 20 {
		if got, err := ask(ns, "10.96.0.50:80"); err != nil || got != first {
			t.Fatalf("connection %d after the restart reached %q (%v), want %s", i, got, err, first)
		}
	}
}

func TestDeletingTheMarkerChainRebuildsATamperedTableWithinTwoSyncs(t *testing.T) {
	b, fake := newFakeBackend(t)
	s := representative()
	mustSync(t, b, proxy.Update{State: s, Full: true})
	// Someone deletes an element: names are unchanged, so nothing notices.
	tamper(t, fake, func(tx *knftables.Transaction) {
		tx.Delete(&knftables.Element{Map: "endpoints-tcp-v4", Key: []string{"10.96.0.10 . 80 . 1"}})
	})
	mustSync(t, b, proxy.Update{State: s, Full: true})
	if diff := cmp.Diff(freshDump(t, s), sortedDump(fake)); diff == "" {
		t.Fatal("the element came back without a rebuild: this test no longer shows the trade-off")
	}
	// Deleting the marker asks for a rebuild.
	tamper(t, fake, func(tx *knftables.Transaction) { tx.Delete(&knftables.Chain{Name: b.fp.marker()}) })
	if err := b.Sync(context.Background(), proxy.Update{State: s, Full: true}); !knftables.IsNotFound(err) {
		t.Fatalf("got %v, want the missing marker reported", err)
	}
	mustSync(t, b, proxy.Update{State: s, Full: true})
	if diff := cmp.Diff(freshDump(t, s), sortedDump(fake)); diff != "" {
		t.Errorf("the table differs from a fresh one (-fresh +got):\n%s", diff)
	}
}
