package egress

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"sync"

	"k8s.io/klog/v2"
	"sigs.k8s.io/knftables"

	"github.com/nodenet/nodenet/internal/nftnl"
)

// TableName is our nftables table, in family inet.
const TableName = "nodenet-egress"

// chainName is the one chain: a nat chain on the postrouting hook.
const chainName = "postrouting"

// Multicast destinations stay as they are (flannel leaves 224.0.0.0/4 alone
// too): they don't leave the link through the node's routing.
var (
	multicastV4 = netip.MustParsePrefix("224.0.0.0/4")
	multicastV6 = netip.MustParsePrefix("ff00::/8")
)

// Options configures an Egress.
type Options struct {
	// NFT, if set, runs Ensure and Remove through knftables instead of
	// netlink: an Interface bound to family inet and table TableName
	// (knftables.NewFake with the same arguments in tests; knftables.New,
	// which runs nft, to compare with what nft writes). nil (the agent):
	// the kernel's, programmed over a netlink socket New opens in the
	// caller's network namespace; nft is never run.
	NFT knftables.Interface
	// Logger logs what Ensure and Remove change. Default:
	// klog.Background().
	Logger klog.Logger
}

// Spec is what to masquerade.
type Spec struct {
	// PodCIDRs are this node's pod CIDRs: the sources masqueraded. A family
	// without one gets no rule.
	PodCIDRs []netip.Prefix
	// ClusterCIDRs are the whole cluster's pod CIDRs: destinations in them
	// (or in PodCIDRs) keep the pod's address.
	ClusterCIDRs []netip.Prefix
}

// Egress keeps the egress table; see the package doc. Its methods are safe
// for concurrent use.
type Egress struct {
	nft nftnl.Interface
	log klog.Logger
	// mu serializes the list-then-write of Ensure and Remove.
	mu sync.Mutex
}

// New returns an Egress. With opts.NFT nil it opens a netlink socket in
// the caller's network namespace; it writes nothing.
func New(opts Options) (*Egress, error) {
	e := &Egress{log: opts.Logger}
	if e.log.GetSink() == nil {
		e.log = klog.Background()
	}
	if opts.NFT != nil {
		e.nft = nftnl.Knftables(opts.NFT, TableName)
		return e, nil
	}
	conn, err := nftnl.Open(TableName)
	if err != nil {
		return nil, fmt.Errorf("egress: nftables: %w", err)
	}
	e.nft = conn
	return e, nil
}

// Ensure makes the table masquerade what spec says, and reports whether it
// wrote anything: it lists the chain's rules and writes only when they are
// not the ones spec asks for (see the package doc).
func (e *Egress) Ensure(ctx context.Context, spec Spec) (changed bool, err error) {
	want := plan(spec)
	e.mu.Lock()
	defer e.mu.Unlock()
	have, err := e.nft.ListRules(ctx, chainName)
	switch {
	case err == nil && sameComments(have, want.rules):
		return false, nil
	case err != nil && !nftnl.IsNotFound(err):
		return false, fmt.Errorf("egress: list the rules of chain %s: %w", chainName, err)
	}
	tx := e.nft.NewTx()
	// Add before Delete so the delete cannot fail on a missing table; then
	// build it again from nothing, all in one atomic transaction.
	tx.Add(&knftables.Table{})
	tx.Delete(&knftables.Table{})
	tx.Add(&knftables.Table{Comment: knftables.PtrTo("nodenet: masquerade pod traffic leaving the cluster (overlay/egress)")})
	tx.Add(want.chain)
	for _, r := range want.rules {
		tx.Add(r)
	}
	if err := e.nft.Run(ctx, tx); err != nil {
		return false, fmt.Errorf("egress: program the table: %w", err)
	}
	e.log.Info("Programmed pod egress masquerading", "table", TableName,
		"podCIDRs", spec.PodCIDRs, "clusterCIDRs", spec.ClusterCIDRs, "rules", len(want.rules))
	return true, nil
}

// Remove deletes the table, and reports whether there was one to delete.
func (e *Egress) Remove(ctx context.Context) (changed bool, err error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if _, err := e.nft.List(ctx, "chains"); err != nil {
		if nftnl.IsNotFound(err) {
			return false, nil
		}
		return false, fmt.Errorf("egress: look for the table: %w", err)
	}
	tx := e.nft.NewTx()
	tx.Delete(&knftables.Table{})
	if err := e.nft.Run(ctx, tx); err != nil {
		if nftnl.IsNotFound(err) {
			return false, nil // someone else deleted it meanwhile
		}
		return false, fmt.Errorf("egress: delete the table: %w", err)
	}
	e.log.Info("Removed pod egress masquerading", "table", TableName)
	return true, nil
}

// ruleset is what Ensure writes besides the table.
type ruleset struct {
	chain *knftables.Chain
	rules []*knftables.Rule
}

// plan renders spec: the chain, then per family of the pod CIDRs (IPv4
// first) one masquerade rule. Each rule's comment ends in a hash of the
// chain and every rule, so comparing comments compares rulesets.
func plan(spec Spec) ruleset {
	chain := &knftables.Chain{
		Name:     chainName,
		Type:     knftables.PtrTo(knftables.NATType),
		Hook:     knftables.PtrTo(knftables.PostroutingHook),
		Priority: knftables.PtrTo(knftables.BaseChainPriority("100")),
		Comment:  knftables.PtrTo("masquerade this node's pods leaving the cluster"),
	}
	type draft struct{ family, text string }
	var drafts []draft
	for _, f := range []struct {
		name, ip  string
		is4       bool
		multicast netip.Prefix
	}{
		{"IPv4", "ip", true, multicastV4},
		{"IPv6", "ip6", false, multicastV6},
	} {
		pods := outermost(ofFamily(spec.PodCIDRs, f.is4))
		if len(pods) == 0 {
			continue
		}
		keep := outermost(append(append(ofFamily(spec.ClusterCIDRs, f.is4), pods...), f.multicast))
		drafts = append(drafts, draft{f.name, fmt.Sprintf("%s saddr %s %s daddr != %s masquerade fully-random",
			f.ip, setOf(pods), f.ip, anonSet(keep))})
	}

	h := sha256.New()
	fmt.Fprintf(h, "%s %s %s %s\n", chain.Name, *chain.Type, *chain.Hook, *chain.Priority)
	for _, d := range drafts {
		fmt.Fprintln(h, d.text)
	}
	sum := hex.EncodeToString(h.Sum(nil))[:16]

	rs := ruleset{chain: chain}
	for _, d := range drafts {
		rs.rules = append(rs.rules, &knftables.Rule{
			Chain:   chainName,
			Rule:    d.text,
			Comment: knftables.PtrTo(fmt.Sprintf("%s pods to outside the cluster; ruleset %s", d.family, sum)),
		})
	}
	return rs
}

// sameComments reports whether have holds exactly want's rules, judged by
// their comments: rules are not read back from the kernel, but their
// comments are kept as written, and each carries the ruleset's hash.
func sameComments(have []nftnl.Rule, want []*knftables.Rule) bool {
	return slices.EqualFunc(have, want, func(h nftnl.Rule, w *knftables.Rule) bool {
		return h.Comment != "" && w.Comment != nil && h.Comment == *w.Comment
	})
}

// ofFamily returns the masked prefixes of one family.
func ofFamily(ps []netip.Prefix, is4 bool) []netip.Prefix {
	var out []netip.Prefix
	for _, p := range ps {
		if p.IsValid() && p.Addr().Is4() == is4 {
			out = append(out, p.Masked())
		}
	}
	return out
}

// outermost drops every prefix inside another (nft refuses overlapping
// intervals in one set) and sorts the rest, so equal specs render equal
// rules.
func outermost(ps []netip.Prefix) []netip.Prefix {
	var out []netip.Prefix
	for i, p := range ps {
		inside := false
		for j, q := range ps {
			if i != j && q.Bits() <= p.Bits() && q.Contains(p.Addr()) && (q.Bits() < p.Bits() || j < i) {
				inside = true // in a bigger prefix, or a duplicate of an earlier one
				break
			}
		}
		if !inside {
			out = append(out, p)
		}
	}
	slices.SortFunc(out, func(a, b netip.Prefix) int {
		if c := a.Addr().Compare(b.Addr()); c != 0 {
			return c
		}
		return a.Bits() - b.Bits()
	})
	return out
}

// setOf renders one prefix as itself and several as an anonymous set.
func setOf(ps []netip.Prefix) string {
	if len(ps) == 1 {
		return ps[0].String()
	}
	return anonSet(ps)
}

// anonSet renders an anonymous set: "{ a, b }".
func anonSet(ps []netip.Prefix) string {
	s := make([]string, len(ps))
	for i, p := range ps {
		s[i] = p.String()
	}
	return "{ " + strings.Join(s, ", ") + " }"
}
