package nftnl

// Address plan: every test works in network namespaces of its own, on
// table inet nftnl-test; the addresses are only keys and values of its
// sets and maps (10.0.0.0/8, 10.96.0.0/16, 192.168.1.0/24, fd00::/64).

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/vishvananda/netns"
	"sigs.k8s.io/knftables"

	"github.com/nodenet/nodenet/internal/nftnl/nftnltest"
	"github.com/nodenet/nodenet/internal/nsexec"
	"github.com/nodenet/nodenet/internal/testroot"
)

const testTable = "nftnl-test"

func newNetns(t *testing.T) netns.NsHandle {
	t.Helper()
	testroot.Require(t, "a network namespace and nftables")
	ns, err := nsexec.New()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ns.Close() })
	return ns
}

// openIn opens a Conn for table in ns.
func openIn(t *testing.T, ns netns.NsHandle, table string) *Conn {
	t.Helper()
	var c *Conn
	if err := nsexec.Do(ns, func() (err error) { c, err = Open(table); return err }); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// nft runs nft with args in ns and returns its output.
func nft(t *testing.T, ns netns.NsHandle, args ...string) string {
	t.Helper()
	var out []byte
	err := nsexec.Do(ns, func() (err error) {
		out, err = exec.Command("nft", args...).CombinedOutput()
		return err
	})
	if err != nil {
		t.Fatalf("nft %s: %v: %s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

func ptr[T any](v T) *T { return &v }

// fill writes a table with a set or map of each kind, a base chain and
// rules, with comments.
func fill(tx *Tx) {
	tx.Add(&knftables.Table{Comment: ptr("nftnl test table")})
	tx.Add(&knftables.Chain{Name: "prerouting", Type: ptr(knftables.NATType), Hook: ptr(knftables.PreroutingHook),
		Priority: ptr(knftables.BaseChainPriority("-100")), Comment: ptr("a base chain")})
	tx.Add(&knftables.Chain{Name: "postrouting", Type: ptr(knftables.NATType), Hook: ptr(knftables.PostroutingHook),
		Priority: ptr(knftables.BaseChainPriority("100"))})
	tx.Add(&knftables.Chain{Name: "svc"})
	tx.Add(&knftables.Map{Name: "dnat-v4", Type: "inet_proto . inet_service : ipv4_addr . inet_service", Comment: ptr("DNAT by port")})
	tx.Add(&knftables.Map{Name: "hostip-v4", Type: "ipv4_addr . inet_proto . inet_service : ipv4_addr . inet_service"})
	tx.Add(&knftables.Map{Name: "dnat-v6", Type: "inet_proto . inet_service : ipv6_addr . inet_service"})
	tx.Add(&knftables.Map{Name: "verdicts", Type: "ipv4_addr . inet_proto . inet_service : verdict"})
	tx.Add(&knftables.Map{Name: "ep", TypeOf: "ip daddr . tcp dport . numgen random mod 2 : ip daddr . tcp dport"})
	tx.Add(&knftables.Set{Name: "cidrs", Type: "ipv4_addr", Flags: []knftables.SetFlag{knftables.IntervalFlag}})
	tx.Add(&knftables.Set{Name: "v6", Type: "ipv6_addr"})
	for _, r := range []string{
		"fib daddr type local jump svc",
		"ip saddr 127.0.0.0/8 ip daddr 127.0.0.0/8 return",
		"meta nfproto ipv6 ip6 daddr ::1 return",
		"ip6 daddr != { fd00::1 } return",
		"ip saddr { 10.244.1.0/24 } ip daddr . meta l4proto . th dport @hostip-v4 meta mark set meta mark | 0x2000",
		"ip saddr { 10.244.1.0/24, 10.244.9.0/24 } meta l4proto . th dport @dnat-v4 meta mark set meta mark | 0x2000",
		"dnat ip to ip daddr . meta l4proto . th dport map @hostip-v4",
		"meta nfproto ipv4 dnat ip to meta l4proto . th dport map @dnat-v4",
		"meta nfproto ipv6 dnat ip6 to meta l4proto . th dport map @dnat-v6",
		"ip daddr . meta l4proto . th dport vmap @verdicts",
	} {
		tx.Add(&knftables.Rule{Chain: "prerouting", Rule: r})
	}
	for _, r := range []string{
		"meta mark & 0x2000 == 0 return",
		"meta mark set meta mark ^ 0x2000",
		"ip saddr 10.244.1.0/24 ip daddr != { 10.244.0.0/16, 224.0.0.0/4 } masquerade fully-random",
		"ip6 saddr fd00:10:244:1::/64 ip6 daddr != { fd00:10:244::/56, ff00::/8 } masquerade fully-random",
	} {
		tx.Add(&knftables.Rule{Chain: "postrouting", Rule: r})
	}
	tx.Add(&knftables.Rule{Chain: "svc", Rule: "ip daddr 10.96.0.1 drop", Comment: ptr("first")})
	tx.Add(&knftables.Rule{Chain: "svc", Rule: "dnat ip addr . port to ip daddr . tcp dport . numgen random mod 2 map @ep"})
	tx.Add(&knftables.Element{Map: "dnat-v4", Key: []string{"tcp", "80"}, Value: []string{"10.0.0.1", "8080"}, Comment: ptr("c-web/eth0 default/web")})
	tx.Create(&knftables.Element{Map: "dnat-v4", Key: []string{"udp", "53"}, Value: []string{"10.0.0.2", "5353"}})
	tx.Add(&knftables.Element{Map: "hostip-v4", Key: []string{"192.168.1.11", "sctp", "9000"}, Value: []string{"10.0.0.3", "9000"}})
	tx.Add(&knftables.Element{Map: "dnat-v6", Key: []string{"tcp", "80"}, Value: []string{"fd00::3", "8080"}, Comment: ptr("v6")})
	tx.Element(false, "verdicts", "10.96.0.1 . tcp . 80", "goto svc", true)
	tx.Element(false, "ep", "10.96.0.1 . 80 . 1", "10.0.0.2 . 8080", true)
	tx.Element(false, "cidrs", "10.0.0.0/8", "", false)
	tx.Element(false, "cidrs", "192.168.1.5", "", false)
	tx.Element(false, "v6", "fd00::1", "", false)
}

// TestEveryShapeLoadsAsNFTWritesIt writes one table through netlink (a
// recorded transaction run by a Conn) and through nft (the same
// transaction through knftables) into two namespaces, and compares what
// nft lists and the expressions the kernel holds for each rule.
func TestEveryShapeLoadsAsNFTWritesIt(t *testing.T) {
	viaNetlink, viaNFT := newNetns(t), newNetns(t)
	ctx := context.Background()
	conn := openIn(t, viaNetlink, testTable)
	tx := NewRecording(testTable)
	fill(tx)
	if err := conn.Run(ctx, tx); err != nil {
		t.Fatal(err)
	}
	err := nsexec.Do(viaNFT, func() error {
		k, err := knftables.New(knftables.InetFamily, testTable)
		if err != nil {
			return err
		}
		tx := NewRecording(testTable)
		fill(tx)
		return Knftables(k, testTable).Run(ctx, tx)
	})
	if err != nil {
		t.Fatal(err)
	}
	got, want := nft(t, viaNetlink, "list", "table", "inet", testTable), nft(t, viaNFT, "list", "table", "inet", testTable)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("the netlink table differs from nft's (-nft +netlink):\n%s", diff)
	}
	gotX := nftnltest.RuleExpressions(nft(t, viaNetlink, "--debug=netlink", "list", "table", "inet", testTable))
	wantX := nftnltest.RuleExpressions(nft(t, viaNFT, "--debug=netlink", "list", "table", "inet", testTable))
	if diff := cmp.Diff(wantX, gotX); diff != "" {
		t.Errorf("the kernel holds other expressions for the netlink table's rules (-nft +netlink):\n%s", diff)
	}
	if n := strings.Count(gotX, "inet "+testTable+" "); n != 16 {
		t.Errorf("%d rules read back, want 16:\n%s", n, gotX)
	}
}

func TestConnListsWhatItWrote(t *testing.T) {
	ns := newNetns(t)
	ctx := context.Background()
	c := openIn(t, ns, testTable)
	tx := c.NewTx()
	fill(tx)
	if err := c.Run(ctx, tx); err != nil {
		t.Fatal(err)
	}

	for typ, want := range map[string][]string{
		"chains": {"postrouting", "prerouting", "svc"},
		"map":    {"dnat-v4", "dnat-v6", "ep", "hostip-v4", "verdicts"},
		"sets":   {"cidrs", "v6"},
	} {
		got, err := c.List(ctx, typ)
		if err != nil {
			t.Fatal(err)
		}
		slices.Sort(got)
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("List(%q) (-want +got):\n%s", typ, diff)
		}
	}
	all, err := c.ListAll(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(all["chain"]) != 3 || len(all["map"]) != 5 || len(all["set"]) != 2 {
		t.Errorf("ListAll: %v (the rules' anonymous sets must be left out)", all)
	}

	elem := func(m, set string, key, value []string, comment string) *knftables.Element {
		e := &knftables.Element{Map: m, Set: set, Key: key, Value: value}
		if comment != "" {
			e.Comment = &comment
		}
		return e
	}
	for _, tc := range []struct {
		typ, name string
		want      []*knftables.Element
	}{
		{"map", "dnat-v4", []*knftables.Element{
			elem("dnat-v4", "", []string{"tcp", "80"}, []string{"10.0.0.1", "8080"}, "c-web/eth0 default/web"),
			elem("dnat-v4", "", []string{"udp", "53"}, []string{"10.0.0.2", "5353"}, ""),
		}},
		{"map", "hostip-v4", []*knftables.Element{elem("hostip-v4", "", []string{"192.168.1.11", "sctp", "9000"}, []string{"10.0.0.3", "9000"}, "")}},
		{"map", "dnat-v6", []*knftables.Element{elem("dnat-v6", "", []string{"tcp", "80"}, []string{"fd00::3", "8080"}, "v6")}},
		{"map", "verdicts", []*knftables.Element{elem("verdicts", "", []string{"10.96.0.1", "tcp", "80"}, []string{"goto svc"}, "")}},
		{"map", "ep", []*knftables.Element{elem("ep", "", []string{"10.96.0.1", "80", "1"}, []string{"10.0.0.2", "8080"}, "")}},
		{"set", "cidrs", []*knftables.Element{elem("", "cidrs", []string{"10.0.0.0/8"}, nil, ""), elem("", "cidrs", []string{"192.168.1.5"}, nil, "")}},
		{"set", "v6", []*knftables.Element{elem("", "v6", []string{"fd00::1"}, nil, "")}},
	} {
		got, err := c.ListElements(ctx, tc.typ, tc.name)
		if err != nil {
			t.Fatal(err)
		}
		slices.SortFunc(got, func(a, b *knftables.Element) int {
			return strings.Compare(strings.Join(a.Key, " "), strings.Join(b.Key, " "))
		})
		if diff := cmp.Diff(tc.want, got); diff != "" {
			t.Errorf("ListElements(%s) (-want +got):\n%s", tc.name, diff)
		}
	}

	rules, err := c.ListRules(ctx, "svc")
	if err != nil {
		t.Fatal(err)
	}
	if len(rules) != 2 || rules[0].Comment != "first" || rules[1].Comment != "" || rules[0].Handle >= rules[1].Handle {
		t.Errorf("ListRules(svc) = %+v, want two rules in order, the first commented", rules)
	}
	handles := nft(t, ns, "-a", "list", "chain", "inet", testTable, "svc")
	if !strings.Contains(handles, fmt.Sprintf("comment \"first\" # handle %d", rules[0].Handle)) {
		t.Errorf("the handle %d is not the first rule's:\n%s", rules[0].Handle, handles)
	}

	t.Run("what is missing is not found", func(t *testing.T) {
		if _, err := c.ListRules(ctx, "nothing"); !IsNotFound(err) {
			t.Errorf("ListRules of a missing chain: %v", err)
		}
		if _, err := c.ListElements(ctx, "map", "nothing"); !IsNotFound(err) {
			t.Errorf("ListElements of a missing map: %v", err)
		}
		other := openIn(t, ns, "nftnl-other")
		for _, typ := range []string{"chains", "sets"} {
			if _, err := other.List(ctx, typ); !IsNotFound(err) {
				t.Errorf("List(%s) of a missing table: %v", typ, err)
			}
		}
		if _, err := other.ListRules(ctx, "svc"); !IsNotFound(err) {
			t.Errorf("ListRules of a missing table: %v", err)
		}
		if _, err := other.Describe(ctx); !IsNotFound(err) {
			t.Errorf("Describe of a missing table: %v", err)
		}
	})

	t.Run("Describe shows chains, rule comments, sets and elements", func(t *testing.T) {
		d, err := c.Describe(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, want := range []string{
			"table inet nftnl-test {\n\tcomment \"nftnl test table\"\n",
			"\tchain prerouting {\n\t\ttype nat hook prerouting priority -100\n\t\tcomment \"a base chain\"\n\t\t10 rules\n\t}\n",
			"\tchain svc {\n\t\t2 rules\n\t\trule handle ",
			" comment \"first\"\n\t}\n",
			"\tmap dnat-v4 {\n\t\ttype inet_proto . inet_service : ipv4_addr . inet_service\n\t\tcomment \"DNAT by port\"\n\t\t2 elements\n",
			"\t\ttcp . 80 : 10.0.0.1 . 8080 comment \"c-web/eth0 default/web\"\n",
			"\tmap ep {\n\t\ttype ipv4_addr . inet_service . integer : ipv4_addr . inet_service\n\t\t1 element\n\t\t10.96.0.1 . 80 . 1 : 10.0.0.2 . 8080\n",
			"\tmap verdicts {\n\t\ttype ipv4_addr . inet_proto . inet_service : verdict\n\t\t1 element\n\t\t10.96.0.1 . tcp . 80 : goto svc\n",
			"\tset cidrs {\n\t\ttype ipv4_addr\n\t\tflags interval\n\t\t2 elements\n",
		} {
			if !strings.Contains(d, want) {
				t.Errorf("Describe lacks %q:\n%s", want, d)
			}
		}
	})
}

// TestCreateRefusesAnExistingElementAndTheBatchWithIt: a created element
// that is there fails the whole transaction, naming its map.
func TestCreateRefusesAnExistingElementAndTheBatchWithIt(t *testing.T) {
	ns := newNetns(t)
	ctx := context.Background()
	c := openIn(t, ns, testTable)
	tx := c.NewTx()
	fill(tx)
	if err := c.Run(ctx, tx); err != nil {
		t.Fatal(err)
	}
	before := nft(t, ns, "list", "table", "inet", testTable)
	tx = c.NewTx()
	tx.Add(&knftables.Element{Map: "dnat-v4", Key: []string{"tcp", "81"}, Value: []string{"10.0.0.1", "8081"}})
	tx.Create(&knftables.Element{Map: "dnat-v4", Key: []string{"tcp", "80"}, Value: []string{"10.0.0.9", "80"}})
	err := c.Run(ctx, tx)
	var nerr *Error
	if !errors.Is(err, syscall.EEXIST) || !errors.As(err, &nerr) || !strings.Contains(nerr.What, "dnat-v4") {
		t.Fatalf("Run: %v, want EEXIST naming dnat-v4", err)
	}
	if after := nft(t, ns, "list", "table", "inet", testTable); after != before {
		t.Errorf("the refused transaction changed the table:\n%s", cmp.Diff(before, after))
	}
	// Adding an element that is there, and deleting then adding one, in
	// one transaction: keeps the order.
	tx = c.NewTx()
	tx.Add(&knftables.Element{Map: "dnat-v4", Key: []string{"tcp", "80"}, Value: []string{"10.0.0.1", "8080"}})
	tx.Delete(&knftables.Element{Map: "dnat-v4", Key: []string{"udp", "53"}})
	tx.Create(&knftables.Element{Map: "dnat-v4", Key: []string{"udp", "53"}, Value: []string{"10.0.0.9", "53"}, Comment: ptr("moved")})
	if err := c.Run(ctx, tx); err != nil {
		t.Fatal(err)
	}
	if l := nft(t, ns, "list", "map", "inet", testTable, "dnat-v4"); !strings.Contains(l, `udp . 53 comment "moved" : 10.0.0.9 . 53`) {
		t.Errorf("the element was not replaced:\n%s", l)
	}
}

// TestElementsNeedTheirSetsType: a Conn writes elements of the sets it
// added or was told of, and refuses others before sending anything.
func TestElementsNeedTheirSetsType(t *testing.T) {
	ns := newNetns(t)
	ctx := context.Background()
	tx := openIn(t, ns, testTable).NewTx()
	fill(tx)
	if err := openIn(t, ns, testTable).Run(ctx, tx); err == nil {
		t.Fatal("a transaction of another Conn ran")
	}
	first := openIn(t, ns, testTable)
	tx = first.NewTx()
	fill(tx)
	if err := first.Run(ctx, tx); err != nil {
		t.Fatal(err)
	}
	fresh := openIn(t, ns, testTable)
	tx = fresh.NewTx()
	tx.Add(&knftables.Element{Map: "dnat-v4", Key: []string{"tcp", "82"}, Value: []string{"10.0.0.1", "82"}})
	if err := fresh.Run(ctx, tx); err == nil || !strings.Contains(err.Error(), "not a set this connection knows") {
		t.Errorf("an element of an undeclared map: %v", err)
	}
	if err := fresh.Declare(&knftables.Map{Name: "dnat-v4", Type: "inet_proto . inet_service : ipv4_addr . inet_service"}); err != nil {
		t.Fatal(err)
	}
	tx = fresh.NewTx()
	tx.Add(&knftables.Element{Map: "dnat-v4", Key: []string{"tcp", "82"}, Value: []string{"10.0.0.1", "82"}})
	if err := fresh.Run(ctx, tx); err != nil {
		t.Fatal(err)
	}
	if err := fresh.Run(ctx, tx); err == nil {
		t.Error("a transaction ran twice")
	}

	// A committed transaction declares what it adds and forgets what it
	// deletes; a refused one changes nothing.
	addElem := func(set string) error {
		tx := first.NewTx()
		tx.Element(false, set, "10.1.0.1", "", false)
		return first.Run(ctx, tx)
	}
	tx = first.NewTx()
	tx.Add(&knftables.Set{Name: "later", Type: "ipv4_addr"})
	tx.Delete(&knftables.Chain{Name: "no-such-chain"})
	if err := first.Run(ctx, tx); !IsNotFound(err) {
		t.Fatalf("a transaction deleting a missing chain: %v", err)
	}
	if err := addElem("later"); err == nil || !strings.Contains(err.Error(), "not a set this connection knows") {
		t.Errorf("an element of a set only a refused transaction added: %v", err)
	}
	tx = first.NewTx()
	tx.Add(&knftables.Set{Name: "later", Type: "ipv4_addr"})
	if err := first.Run(ctx, tx); err != nil {
		t.Fatal(err)
	}
	if err := addElem("later"); err != nil {
		t.Errorf("an element of a set a committed transaction added: %v", err)
	}
	tx = first.NewTx()
	tx.Delete(&knftables.Set{Name: "later"})
	if err := first.Run(ctx, tx); err != nil {
		t.Fatal(err)
	}
	if err := addElem("later"); err == nil || !strings.Contains(err.Error(), "not a set this connection knows") {
		t.Errorf("an element of a deleted set: %v", err)
	}
}

// TestWhatTheEncoderCannotSayIsRefused: objects of another table or
// family, and a DNAT through a map whose values are not address . port,
// fail the transaction before anything is sent.
func TestWhatTheEncoderCannotSayIsRefused(t *testing.T) {
	ns := newNetns(t)
	ctx := context.Background()
	c := openIn(t, ns, testTable)
	for name, add := range map[string]func(tx *Tx){
		"another table":  func(tx *Tx) { tx.Add(&knftables.Chain{Table: "elsewhere", Name: "c"}) },
		"another family": func(tx *Tx) { tx.Add(&knftables.Chain{Family: knftables.IPv4Family, Name: "c"}) },
		"a DNAT through a verdict map": func(tx *Tx) {
			tx.Add(&knftables.Chain{Name: "c"})
			tx.Add(&knftables.Map{Name: "vm", Type: "ipv4_addr . inet_service : verdict"})
			tx.Add(&knftables.Rule{Chain: "c", Rule: "dnat ip to ip daddr . th dport map @vm"})
		},
		"a DNAT through an undeclared map": func(tx *Tx) {
			tx.Add(&knftables.Chain{Name: "c"})
			tx.Add(&knftables.Rule{Chain: "c", Rule: "dnat ip to ip daddr . th dport map @nowhere"})
		},
		"a rule inserted at an index": func(tx *Tx) {
			tx.Add(&knftables.Chain{Name: "c"})
			tx.Add(&knftables.Rule{Chain: "c", Rule: "drop", Index: ptr(0)})
		},
	} {
		tx := c.NewTx()
		tx.Add(&knftables.Table{})
		add(tx)
		if err := c.Run(ctx, tx); err == nil {
			t.Errorf("%s: the transaction ran", name)
		}
	}
	if _, err := c.List(ctx, "chains"); !IsNotFound(err) {
		t.Errorf("a refused transaction created the table: %v", err)
	}
}

// TestKnftablesReplaysTheTransaction: a recorded transaction runs on
// knftables' Fake with every verb, and reads back through the Interface.
func TestKnftablesReplaysTheTransaction(t *testing.T) {
	ctx := context.Background()
	fake := knftables.NewFake(knftables.InetFamily, testTable)
	k := Knftables(fake, testTable)
	tx := k.NewTx()
	fill(tx)
	if err := k.Run(ctx, tx); err != nil {
		t.Fatal(err)
	}
	tx = k.NewTx()
	tx.Create(&knftables.Element{Map: "dnat-v4", Key: []string{"tcp", "80"}, Value: []string{"10.0.0.9", "80"}})
	if err := k.Run(ctx, tx); err == nil {
		t.Error("creating an existing element succeeded")
	}
	tx = k.NewTx()
	tx.Flush(&knftables.Chain{Name: "svc"})
	tx.Delete(&knftables.Element{Map: "dnat-v4", Key: []string{"udp", "53"}})
	if err := k.Run(ctx, tx); err != nil {
		t.Fatal(err)
	}
	if got := tx.String(); got != "flush chain inet nftnl-test svc\ndelete element inet nftnl-test dnat-v4 { udp . 53 }\n" {
		t.Errorf("String: %q", got)
	}
	elems, err := k.ListElements(ctx, "map", "dnat-v4")
	if err != nil || len(elems) != 1 || *elems[0].Comment != "c-web/eth0 default/web" {
		t.Errorf("ListElements: %v, %v", elems, err)
	}
	if rules, err := k.ListRules(ctx, "svc"); err != nil || len(rules) != 0 {
		t.Errorf("ListRules after the flush: %v, %v", rules, err)
	}
	if err := k.Run(ctx, openConnOrSkip(t).NewTx()); err == nil {
		t.Error("a netlink transaction ran through knftables")
	}
}

// openConnOrSkip opens a Conn in the test's own namespace, which only
// opens a socket.
func openConnOrSkip(t *testing.T) *Conn {
	t.Helper()
	c, err := Open(testTable)
	if err != nil {
		t.Skipf("netlink: %v", err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}
