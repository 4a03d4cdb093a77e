package nftables

import (
	"cmp"
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"testing"

	"sigs.k8s.io/knftables"
)

// tracer runs a packet through the rules a Backend wrote to a knftables
// Fake: a small interpreter for exactly the nft syntax the backend emits
// (it fails the test on anything else). It models one new connection's
// first packet: netfilter's hooks in priority order, the routing decision
// between them, DNAT, the masquerade mark and masquerading, drop and
// reject, and dynamic (affinity) sets that keep what packets add to them.
type tracer struct {
	t     testing.TB
	table *knftables.FakeTable
	// local are this node's addresses (fib ... type local).
	local []netip.Addr
	// pick is the index of the endpoint numgen chooses: a map lookup
	// keyed by "numgen random mod n" gets pick%n, and in a cascade of
	// "numgen random mod m == 0" rules the pick-th one matches.
	pick int
	// dynamic holds what packets added to sets ("update @set").
	dynamic map[string]map[string]bool
	// cascade counts the cascade rules the current packet has met.
	cascade int
}

func newTracer(t testing.TB, fake *knftables.Fake, local ...string) *tracer {
	t.Helper()
	if fake.Table == nil {
		t.Fatal("the fake has no table")
	}
	tr := &tracer{t: t, table: fake.Table, dynamic: map[string]map[string]bool{}}
	for _, a := range append([]string{"127.0.0.1", "::1"}, local...) {
		tr.local = append(tr.local, netip.MustParseAddr(a))
	}
	return tr
}

// packet is the first packet of a connection.
type packet struct {
	src, dst netip.Addr
	proto    string // tcp, udp or sctp
	dport    uint16
	mark     uint32
	dnatted  bool // ct status dnat
}

// trace is what became of a packet.
type trace struct {
	verdict    string         // "accept", "drop" or "reject"
	dnat       netip.AddrPort // where it was DNATed to; invalid if not
	masquerade bool
	chains     []string // every chain it went through, for failure messages
}

func (r trace) String() string {
	s := r.verdict
	if r.dnat.IsValid() {
		s += ", DNAT to " + r.dnat.String()
	}
	if r.masquerade {
		s += ", masqueraded"
	}
	return s
}

// Trace sends a packet "proto src -> dst:dport", from "pod" or "outside"
// (entering at prerouting) or "node" (a local process: output), and
// returns what happened to it, e.g. "accept, DNAT to 10.244.2.7:8080".
func (tr *tracer) Trace(from, proto, src, dst string) trace {
	tr.t.Helper()
	d := netip.MustParseAddrPort(dst)
	p := &packet{src: netip.MustParseAddr(src), dst: d.Addr(), proto: proto, dport: d.Port()}
	res := &trace{verdict: "accept"}
	tr.cascade = 0
	var ok bool
	switch from {
	case "pod", "outside":
		ok = tr.hook("prerouting", p, res) &&
			(tr.isLocal(p.dst) && tr.hook("input", p, res) ||
				!tr.isLocal(p.dst) && tr.hook("forward", p, res) && tr.hook("postrouting", p, res))
	case "node":
		ok = tr.hook("output", p, res) && tr.hook("postrouting", p, res) &&
			(!tr.isLocal(p.dst) || tr.hook("input", p, res))
	default:
		tr.t.Fatalf("unknown source %q", from)
	}
	_ = ok
	return *res
}

func (tr *tracer) isLocal(a netip.Addr) bool { return slices.Contains(tr.local, a) }

// hook runs the base chains of hook in priority order; false means the
// packet is gone.
func (tr *tracer) hook(hook string, p *packet, res *trace) bool {
	var chains []*knftables.FakeChain
	for _, c := range tr.table.Chains {
		if c.Hook != nil && string(*c.Hook) == hook {
			chains = append(chains, c)
		}
	}
	slices.SortFunc(chains, func(a, b *knftables.FakeChain) int {
		pa, _ := knftables.ParsePriority(knftables.InetFamily, string(*a.Priority))
		pb, _ := knftables.ParsePriority(knftables.InetFamily, string(*b.Priority))
		return cmp.Compare(pa, pb)
	})
	for _, c := range chains {
		switch v := tr.chain(c.Name, p, res, 0); v {
		case "drop", "reject":
			res.verdict = v
			return false
		}
	}
	return true
}

// chain runs a chain: "" means it ended (or returned) and the caller goes
// on; anything else is a verdict ("accept" also for a NAT statement,
// which ends the chain).
func (tr *tracer) chain(name string, p *packet, res *trace, depth int) string {
	if depth > 16 {
		tr.t.Fatalf("jump loop through %v", res.chains)
	}
	c := tr.table.Chains[name]
	if c == nil {
		tr.t.Fatalf("no chain %q", name)
	}
	res.chains = append(res.chains, name)
	for _, r := range c.Rules {
		v, matched := tr.rule(r.Rule, p, res, depth)
		if matched && v != "" {
			if v == "return" {
				return ""
			}
			return v
		}
	}
	return ""
}

// rule evaluates one rule: matched is false when a match failed, and v is
// its verdict ("" to go on to the next rule).
func (tr *tracer) rule(text string, p *packet, res *trace, depth int) (v string, matched bool) {
	toks := tokenize(text)
	i := 0
	next := func() string {
		if i >= len(toks) {
			tr.t.Fatalf("rule %q ends early", text)
		}
		i++
		return toks[i-1]
	}
	peek := func() string {
		if i < len(toks) {
			return toks[i]
		}
		return ""
	}
	verdict := func(v string) string {
		kind, target, _ := strings.Cut(v, " ")
		switch kind {
		case "jump":
			if r := tr.chain(target, p, res, depth+1); r != "" {
				return r
			}
			return ""
		case "goto":
			if r := tr.chain(target, p, res, depth+1); r != "" {
				return r
			}
			return "return"
		case "accept", "drop", "reject", "return":
			return kind
		}
		tr.t.Fatalf("unknown verdict %q in %q", v, text)
		return ""
	}

	for i < len(toks) {
		switch tok := next(); tok {
		case "ct":
			switch what := next(); what {
			case "state":
				if next() != "new" {
					tr.t.Fatalf("unsupported ct state in %q", text)
				}
			case "status":
				if next() != "dnat" {
					tr.t.Fatalf("unsupported ct status in %q", text)
				}
				if !p.dnatted {
					return "", false
				}
			default:
				tr.t.Fatalf("unsupported ct %s in %q", what, text)
			}
		case "numgen": // a cascade rule: numgen random mod m == 0
			if next() != "random" || next() != "mod" {
				tr.t.Fatalf("unsupported numgen in %q", text)
			}
			next()
			if next() != "==" {
				tr.t.Fatalf("unsupported numgen in %q", text)
			}
			want := parseUint(tr.t, next())
			hit := tr.cascade == tr.pick
			tr.cascade++
			if !hit || want != 0 {
				return "", false
			}
		case "ip", "ip6", "meta", "th", "tcp", "udp", "sctp":
			i--
			if tok == "meta" && toks[i+1] == "mark" {
				i += 2
				switch op := next(); op {
				case "set": // meta mark set meta mark | M, or ^ M
					if next() != "meta" || next() != "mark" {
						tr.t.Fatalf("unsupported mark statement in %q", text)
					}
					bitOp, m := next(), parseUint(tr.t, next())
					switch bitOp {
					case "|":
						p.mark |= m
					case "^":
						p.mark ^= m
					default:
						tr.t.Fatalf("unsupported mark op in %q", text)
					}
				case "&": // meta mark & M == V
					m := parseUint(tr.t, next())
					if next() != "==" {
						tr.t.Fatalf("unsupported mark match in %q", text)
					}
					if p.mark&m != parseUint(tr.t, next()) {
						return "", false
					}
				default:
					tr.t.Fatalf("unsupported meta mark %s in %q", op, text)
				}
				continue
			}
			key, ok := tr.concat(toks, &i, p)
			if !ok {
				return "", false
			}
			switch op := peek(); {
			case op == "vmap":
				i++
				value, found := tr.lookup(strings.TrimPrefix(next(), "@"), key)
				if !found {
					return "", false
				}
				return verdict(value), true
			case strings.HasPrefix(op, "@"):
				i++
				if _, found := tr.lookup(op[1:], key); !found {
					return "", false
				}
			default:
				neg := false
				if op == "!=" {
					neg = true
					i++
				} else if op == "==" {
					i++
				}
				operand := next()
				var in bool
				if strings.HasPrefix(operand, "@") {
					_, in = tr.lookup(operand[1:], key)
				} else {
					in = tr.matches(operand, toks, &i, key)
				}
				if in == neg {
					return "", false
				}
			}
		case "fib":
			dir := next()
			if next() != "type" || next() != "local" {
				tr.t.Fatalf("unsupported fib in %q", text)
			}
			a := p.src
			if dir == "daddr" {
				a = p.dst
			}
			if !tr.isLocal(a) {
				return "", false
			}
		case "update": // update @set { ip saddr }
			set := strings.TrimPrefix(next(), "@")
			if next() != "{" {
				tr.t.Fatalf("unsupported update in %q", text)
			}
			key, _ := tr.concat(toks, &i, p)
			if next() != "}" {
				tr.t.Fatalf("unsupported update in %q", text)
			}
			if tr.dynamic[set] == nil {
				tr.dynamic[set] = map[string]bool{}
			}
			tr.dynamic[set][key] = true
		case "dnat":
			fam := next()
			if peek() == "addr" { // dnat ip addr . port to <key> map @m
				i += 3
				if next() != "to" {
					tr.t.Fatalf("unsupported dnat in %q", text)
				}
				key, ok := tr.concat(toks, &i, p)
				if !ok || next() != "map" {
					return "", false
				}
				value, found := tr.lookup(strings.TrimPrefix(next(), "@"), key)
				if !found {
					return "", false
				}
				addr, port, _ := strings.Cut(value, " . ")
				tr.dnat(p, res, netip.AddrPortFrom(netip.MustParseAddr(addr), uint16(parseUint(tr.t, port))))
			} else {
				if next() != "to" {
					tr.t.Fatalf("unsupported dnat in %q", text)
				}
				tr.dnat(p, res, netip.MustParseAddrPort(next()))
			}
			_ = fam
			return "accept", true
		case "masquerade":
			if next() != "fully-random" {
				tr.t.Fatalf("unsupported masquerade in %q", text)
			}
			res.masquerade = true
			return "accept", true
		case "jump", "goto":
			return verdict(tok + " " + next()), true
		case "accept", "drop", "reject", "return":
			return verdict(tok), true
		default:
			tr.t.Fatalf("unsupported %q in %q", tok, text)
		}
	}
	return "", true
}

func (tr *tracer) dnat(p *packet, res *trace, to netip.AddrPort) {
	p.dst, p.dport, p.dnatted = to.Addr(), to.Port(), true
	res.dnat = to
}

// concat reads "x . y . z" of packet fields and returns their values
// joined as nft prints them; ok is false when a field does not apply to
// the packet (an ip field of an IPv6 packet, tcp dport of UDP).
func (tr *tracer) concat(toks []string, i *int, p *packet) (string, bool) {
	var parts []string
	ok := true
	for {
		f := toks[*i]
		*i++
		switch f {
		case "ip", "ip6":
			if (f == "ip") != p.src.Is4() {
				ok = false
			}
			switch dir := toks[*i]; dir {
			case "saddr":
				parts = append(parts, p.src.String())
			case "daddr":
				parts = append(parts, p.dst.String())
			default:
				tr.t.Fatalf("unsupported %s %s", f, dir)
			}
			*i++
		case "meta":
			if toks[*i] != "l4proto" {
				tr.t.Fatalf("unsupported meta %s", toks[*i])
			}
			*i++
			parts = append(parts, p.proto)
		case "th", "tcp", "udp", "sctp":
			if toks[*i] != "dport" {
				tr.t.Fatalf("unsupported %s %s", f, toks[*i])
			}
			*i++
			if f != "th" && f != p.proto {
				ok = false
			}
			parts = append(parts, strconv.Itoa(int(p.dport)))
		case "numgen":
			if toks[*i] != "random" || toks[*i+1] != "mod" {
				tr.t.Fatalf("unsupported numgen")
			}
			n := int(parseUint(tr.t, toks[*i+2]))
			*i += 3
			parts = append(parts, strconv.Itoa(tr.pick%n))
		default:
			tr.t.Fatalf("unsupported field %q", f)
		}
		if *i < len(toks) && toks[*i] == "." {
			*i++
			continue
		}
		return strings.Join(parts, " . "), ok
	}
}

// matches compares a single value with operand (an address, a prefix,
// a number, a protocol, or "{ a, b }").
func (tr *tracer) matches(operand string, toks []string, i *int, value string) bool {
	if operand == "{" {
		for toks[*i] != "}" {
			if valueIn(strings.TrimSuffix(toks[*i], ","), value) {
				*i = slices.Index(toks[*i:], "}") + *i + 1
				return true
			}
			*i++
		}
		*i++
		return false
	}
	return valueIn(operand, value)
}

// valueIn says whether value is elem, or inside elem if elem is a prefix.
func valueIn(elem, value string) bool {
	if strings.Contains(elem, "/") {
		pfx, err := netip.ParsePrefix(elem)
		a, err2 := netip.ParseAddr(value)
		return err == nil && err2 == nil && pfx.Contains(a)
	}
	return elem == value
}

// lookup finds key in a set or map (elements may be prefixes, and a set
// may hold what packets added); value is the map value.
func (tr *tracer) lookup(name, key string) (value string, found bool) {
	if tr.dynamic[name][key] {
		return "", true
	}
	var elems []*knftables.Element
	if s := tr.table.Sets[name]; s != nil {
		elems = s.Elements
	} else if m := tr.table.Maps[name]; m != nil {
		elems = m.Elements
	} else {
		tr.t.Fatalf("no set or map %q", name)
	}
	keyParts := strings.Split(key, " . ")
	for _, e := range elems {
		parts := strings.Split(strings.Join(e.Key, " . "), " . ")
		if len(parts) != len(keyParts) {
			tr.t.Fatalf("%s: key %q does not fit element %q", name, key, parts)
		}
		match := true
		for j := range parts {
			if !valueIn(parts[j], keyParts[j]) {
				match = false
				break
			}
		}
		if match {
			return strings.Join(e.Value, " . "), true
		}
	}
	return "", false
}

// tokenize splits a rule into words, with braces and commas apart.
func tokenize(text string) []string {
	text = strings.NewReplacer("{", " { ", "}", " } ", ",", " ").Replace(text)
	return strings.Fields(text)
}

func parseUint(t testing.TB, s string) uint32 {
	t.Helper()
	n, err := strconv.ParseUint(s, 0, 32)
	if err != nil {
		t.Fatalf("not a number: %q", s)
	}
	return uint32(n)
}

// String describes a trace for test failures.
func (tr *tracer) describe(r trace) string {
	return fmt.Sprintf("%s (through %s)", r, strings.Join(r.chains, " → "))
}
