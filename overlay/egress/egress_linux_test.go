package egress

// Address plan: cluster CIDRs 10.244.0.0/16 and fd00:10:244::/56; this
// node's pod CIDRs 10.244.1.0/24 and fd00:10:244:1::/64.

import (
	"context"
	"errors"
	"net/netip"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/klog/v2/ktesting"
	"sigs.k8s.io/knftables"
)

var prefixes = func(ss ...string) []netip.Prefix {
	var out []netip.Prefix
	for _, s := range ss {
		out = append(out, netip.MustParsePrefix(s))
	}
	return out
}

var dualStack = Spec{
	PodCIDRs:     prefixes("10.244.1.0/24", "fd00:10:244:1::/64"),
	ClusterCIDRs: prefixes("10.244.0.0/16", "fd00:10:244::/56"),
}

func newFakeEgress(t *testing.T) (*Egress, *knftables.Fake) {
	t.Helper()
	fake := knftables.NewFake(knftables.InetFamily, TableName)
	e, err := New(Options{NFT: fake, Logger: ktesting.NewLogger(t, ktesting.NewConfig())})
	if err != nil {
		t.Fatal(err)
	}
	return e, fake
}

// ruleTexts are the chain's rules as written, without comments.
func ruleTexts(t *testing.T, fake *knftables.Fake) []string {
	t.Helper()
	rules, err := fake.ListRules(context.Background(), chainName)
	if err != nil {
		t.Fatalf("list rules: %v", err)
	}
	out := []string{}
	for _, r := range rules {
		out = append(out, r.Rule)
	}
	return out
}

// writes reports whether fn ran an nft transaction on fake.
func writes(fake *knftables.Fake, fn func()) bool {
	fake.Lock()
	fake.LastTransaction = nil
	fake.Unlock()
	fn()
	fake.RLock()
	defer fake.RUnlock()
	return fake.LastTransaction != nil
}

func TestEnsureWritesOneMasqueradeRulePerPodFamily(t *testing.T) {
	for _, tc := range []struct {
		name string
		spec Spec
		want []string
	}{
		{
			name: "a dual-stack node masquerades each family to outside its cluster CIDR and multicast",
			spec: dualStack,
			want: []string{
				"ip saddr 10.244.1.0/24 ip daddr != { 10.244.0.0/16, 224.0.0.0/4 } masquerade fully-random",
				"ip6 saddr fd00:10:244:1::/64 ip6 daddr != { fd00:10:244::/56, ff00::/8 } masquerade fully-random",
			},
		},
		{
			name: "a family without a pod CIDR gets no rule, even when the cluster has that family",
			spec: Spec{PodCIDRs: prefixes("10.244.1.0/24"), ClusterCIDRs: prefixes("fd00:10:244::/56", "10.244.0.0/16")},
			want: []string{"ip saddr 10.244.1.0/24 ip daddr != { 10.244.0.0/16, 224.0.0.0/4 } masquerade fully-random"},
		},
		{
			name: "several pod and cluster CIDRs are sorted, unmasked and folded into the prefixes that hold them",
			spec: Spec{
				PodCIDRs:     prefixes("10.244.9.7/24", "10.244.1.0/24", "10.244.1.0/24"),
				ClusterCIDRs: prefixes("10.245.0.0/16", "10.244.0.0/16", "10.244.0.0/16"),
			},
			want: []string{"ip saddr { 10.244.1.0/24, 10.244.9.0/24 } ip daddr != { 10.244.0.0/16, 10.245.0.0/16, 224.0.0.0/4 } masquerade fully-random"},
		},
		{
			name: "a pod CIDR outside every cluster CIDR still keeps traffic between its own pods",
			spec: Spec{PodCIDRs: prefixes("10.99.1.0/24"), ClusterCIDRs: prefixes("10.244.0.0/16")},
			want: []string{"ip saddr 10.99.1.0/24 ip daddr != { 10.99.1.0/24, 10.244.0.0/16, 224.0.0.0/4 } masquerade fully-random"},
		},
		{
			name: "no pod CIDR leaves an empty chain",
			spec: Spec{ClusterCIDRs: prefixes("10.244.0.0/16")},
			want: []string{},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e, fake := newFakeEgress(t)
			changed, err := e.Ensure(context.Background(), tc.spec)
			if err != nil {
				t.Fatal(err)
			}
			if !changed {
				t.Error("the first Ensure reported no change")
			}
			if diff := cmp.Diff(tc.want, ruleTexts(t, fake)); diff != "" {
				t.Errorf("rules (-want +got):\n%s", diff)
			}
			ch := fake.Table.Chains[chainName]
			if ch == nil || *ch.Type != knftables.NATType || *ch.Hook != knftables.PostroutingHook || *ch.Priority != "100" {
				t.Errorf("chain %s is %+v, want a nat chain on postrouting at priority 100", chainName, ch)
			}
			if n := len(fake.Table.Chains); n != 1 {
				t.Errorf("table has %d chains, want 1:\n%s", n, fake.Dump())
			}
		})
	}
}

func TestEnsureWithTheSameSpecWritesNothing(t *testing.T) {
	e, fake := newFakeEgress(t)
	ctx := context.Background()
	if _, err := e.Ensure(ctx, dualStack); err != nil {
		t.Fatal(err)
	}
	before := fake.Dump()
	var changed bool
	var err error
	if writes(fake, func() { changed, err = e.Ensure(ctx, dualStack) }) {
		t.Error("a second Ensure with the same spec ran a transaction")
	}
	if err != nil || changed {
		t.Errorf("second Ensure = %v, %v; want no change", changed, err)
	}

	// A restarted agent has a new Egress and no memory; it reads the table.
	restarted, err := New(Options{NFT: fake})
	if err != nil {
		t.Fatal(err)
	}
	if writes(fake, func() { changed, err = restarted.Ensure(ctx, dualStack) }) {
		t.Error("a restarted agent's Ensure with the same spec ran a transaction")
	}
	if err != nil || changed {
		t.Errorf("restarted Ensure = %v, %v; want no change", changed, err)
	}
	if after := fake.Dump(); after != before {
		t.Errorf("table changed:\n%s\nwant\n%s", after, before)
	}
}

func TestEnsureRewritesTheTableWhenTheSpecOrTheRulesChange(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name   string
		change func(t *testing.T, fake *knftables.Fake) Spec
		want   []string
	}{
		{
			name: "a new cluster CIDR replaces the old rules",
			change: func(*testing.T, *knftables.Fake) Spec {
				return Spec{PodCIDRs: dualStack.PodCIDRs, ClusterCIDRs: prefixes("10.244.0.0/15", "fd00:10:244::/56")}
			},
			want: []string{
				"ip saddr 10.244.1.0/24 ip daddr != { 10.244.0.0/15, 224.0.0.0/4 } masquerade fully-random",
				"ip6 saddr fd00:10:244:1::/64 ip6 daddr != { fd00:10:244::/56, ff00::/8 } masquerade fully-random",
			},
		},
		{
			name: "dropping a family drops its rule",
			change: func(*testing.T, *knftables.Fake) Spec {
				return Spec{PodCIDRs: prefixes("10.244.1.0/24"), ClusterCIDRs: dualStack.ClusterCIDRs}
			},
			want: []string{"ip saddr 10.244.1.0/24 ip daddr != { 10.244.0.0/16, 224.0.0.0/4 } masquerade fully-random"},
		},
		{
			name: "a rule someone added to our chain is removed",
			change: func(t *testing.T, fake *knftables.Fake) Spec {
				tx := fake.NewTransaction()
				tx.Add(&knftables.Rule{Chain: chainName, Rule: "masquerade"})
				tx.Add(&knftables.Chain{Name: "stray"})
				if err := fake.Run(ctx, tx); err != nil {
					t.Fatal(err)
				}
				return dualStack
			},
			want: []string{
				"ip saddr 10.244.1.0/24 ip daddr != { 10.244.0.0/16, 224.0.0.0/4 } masquerade fully-random",
				"ip6 saddr fd00:10:244:1::/64 ip6 daddr != { fd00:10:244::/56, ff00::/8 } masquerade fully-random",
			},
		},
		{
			name: "a rule someone deleted comes back",
			change: func(t *testing.T, fake *knftables.Fake) Spec {
				tx := fake.NewTransaction()
				tx.Delete(&knftables.Rule{Chain: chainName, Handle: fake.Table.Chains[chainName].Rules[1].Handle})
				if err := fake.Run(ctx, tx); err != nil {
					t.Fatal(err)
				}
				return dualStack
			},
			want: []string{
				"ip saddr 10.244.1.0/24 ip daddr != { 10.244.0.0/16, 224.0.0.0/4 } masquerade fully-random",
				"ip6 saddr fd00:10:244:1::/64 ip6 daddr != { fd00:10:244::/56, ff00::/8 } masquerade fully-random",
			},
		},
		{
			name: "a deleted table comes back",
			change: func(t *testing.T, fake *knftables.Fake) Spec {
				tx := fake.NewTransaction()
				tx.Delete(&knftables.Table{})
				if err := fake.Run(ctx, tx); err != nil {
					t.Fatal(err)
				}
				return dualStack
			},
			want: []string{
				"ip saddr 10.244.1.0/24 ip daddr != { 10.244.0.0/16, 224.0.0.0/4 } masquerade fully-random",
				"ip6 saddr fd00:10:244:1::/64 ip6 daddr != { fd00:10:244::/56, ff00::/8 } masquerade fully-random",
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e, fake := newFakeEgress(t)
			if _, err := e.Ensure(ctx, dualStack); err != nil {
				t.Fatal(err)
			}
			spec := tc.change(t, fake)
			changed, err := e.Ensure(ctx, spec)
			if err != nil {
				t.Fatal(err)
			}
			if !changed {
				t.Error("Ensure reported no change")
			}
			if diff := cmp.Diff(tc.want, ruleTexts(t, fake)); diff != "" {
				t.Errorf("rules (-want +got):\n%s", diff)
			}
			if n := len(fake.Table.Chains); n != 1 {
				t.Errorf("table has %d chains, want only ours:\n%s", n, fake.Dump())
			}
			if writes(fake, func() { _, err = e.Ensure(ctx, spec) }) || err != nil {
				t.Errorf("Ensure after the rewrite wrote again (err %v)", err)
			}
		})
	}
}

func TestRuleCommentsNameTheFamilyAndTheRuleset(t *testing.T) {
	a, b := plan(dualStack), plan(Spec{PodCIDRs: dualStack.PodCIDRs, ClusterCIDRs: prefixes("10.244.0.0/15", "fd00:10:244::/56")})
	if !strings.HasPrefix(*a.rules[0].Comment, "IPv4 pods to outside the cluster; ruleset ") ||
		!strings.HasPrefix(*a.rules[1].Comment, "IPv6 pods to outside the cluster; ruleset ") {
		t.Errorf("comments %q, %q", *a.rules[0].Comment, *a.rules[1].Comment)
	}
	// The IPv6 rule is the same in both, but its comment still tells the
	// rulesets apart.
	if a.rules[1].Rule != b.rules[1].Rule || *a.rules[1].Comment == *b.rules[1].Comment {
		t.Errorf("IPv6 rules %q / %q, comments %q / %q: want equal rules with different comments",
			a.rules[1].Rule, b.rules[1].Rule, *a.rules[1].Comment, *b.rules[1].Comment)
	}
	for _, r := range a.rules {
		if len(*r.Comment) > knftables.CommentLengthMax {
			t.Errorf("comment %q is longer than nft allows", *r.Comment)
		}
	}
}

func TestRemoveDeletesTheTableOnce(t *testing.T) {
	e, fake := newFakeEgress(t)
	ctx := context.Background()
	if _, err := e.Ensure(ctx, dualStack); err != nil {
		t.Fatal(err)
	}
	changed, err := e.Remove(ctx)
	if err != nil || !changed {
		t.Fatalf("Remove = %v, %v; want the table deleted", changed, err)
	}
	if fake.Table != nil {
		t.Errorf("table still there:\n%s", fake.Dump())
	}
	if writes(fake, func() { changed, err = e.Remove(ctx) }) {
		t.Error("Remove without a table ran a transaction")
	}
	if err != nil || changed {
		t.Errorf("second Remove = %v, %v; want nothing to do", changed, err)
	}
}

// failingList is a Fake whose List calls fail the way a broken nft does.
type failingList struct{ *knftables.Fake }

var errBroken = errors.New("nft: broken")

func (failingList) ListRules(context.Context, string) ([]*knftables.Rule, error) {
	return nil, errBroken
}
func (failingList) List(context.Context, string) ([]string, error) { return nil, errBroken }

func TestAFailedListWritesNothingAndIsReturned(t *testing.T) {
	fake := knftables.NewFake(knftables.InetFamily, TableName)
	e, err := New(Options{NFT: failingList{fake}})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if writes(fake, func() { _, err = e.Ensure(ctx, dualStack) }) || !errors.Is(err, errBroken) {
		t.Errorf("Ensure: err %v; want errBroken and no transaction", err)
	}
	if writes(fake, func() { _, err = e.Remove(ctx) }) || !errors.Is(err, errBroken) {
		t.Errorf("Remove: err %v; want errBroken and no transaction", err)
	}
}
