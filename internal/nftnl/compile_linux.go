package nftnl

import (
	"encoding/binary"
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"

	"github.com/google/nftables/expr"
	"golang.org/x/sys/unix"
)

// The rule vocabulary, compiled to nf_tables expressions. Callers write
// rules as nft text (it is also what logs, `nodenetctl proxy render` and
// the knftables Fake show); compileRule turns each into the expressions
// nft itself generates for it — taken from `nft --debug=netlink` on nft
// 1.0.6 for every rule shape the proxy, cni/hostport and overlay/egress
// write (inet family: an ip or ip6 match first checks meta nfproto, a
// tcp/udp/sctp field meta l4proto; concatenations load each field into
// the next 4-byte register). Anything outside the vocabulary is an error,
// not a guess: each user's tests write its table through netlink and
// through nft and compare what `nft list` prints
// (TestEveryRuleShapeLoadsThroughNetlink in proxy/nftables,
// TestTheNetlinkTableIsTheOneNFTWrites in cni/hostport and overlay/egress).

// Register numbers (include/uapi/linux/netfilter/nf_tables.h): 0 is the
// verdict, 1-4 the 16-byte registers, 8-23 the 4-byte ones (8 = 1).
func reg(word int) uint32 {
	if word%4 == 0 {
		return uint32(word/4 + 1)
	}
	return uint32(8 + word)
}

// A keyField is one field of a set key or map value, or of a
// concatenation a rule looks up.
type keyField struct {
	typeID uint32 // nft's datatype id (src/datatype.h)
	len    int    // bytes in the register
	// what nft calls it in a typeof, for the set's userdata: the
	// expression type and its description (src/expression.c
	// build_udata of payload and numgen).
	etype uint32
	udata []byte
}

func (f keyField) words() int { return (f.len + 3) / 4 }

// nft datatype ids (nftables src/datatype.h enum datatypes).
const (
	typeInteger  = 4
	typeIPv4     = 7
	typeIPv6     = 8
	typeInetProt = 12
	typeInetServ = 13
	typeVerdict  = 0xffffff00 // NFT_DATA_VERDICT
	etypePayload = 7
	etypeConcat  = 13
	etypeNumgen  = 23
)

// udata TLVs (libnftnl udata: a type byte, a length byte, the value).
func udataTLV(b []byte, typ byte, v []byte) []byte {
	return append(append(b, typ, byte(len(v))), v...)
}

func udataU32(b []byte, typ byte, v uint32) []byte {
	return udataTLV(b, typ, binary.NativeEndian.AppendUint32(nil, v))
}

func payloadUdata(desc, field uint32) []byte {
	return udataU32(udataU32(nil, 0, desc), 1, field)
}

// fieldByType is a set field spelled by its type.
var fieldByType = map[string]keyField{
	"ipv4_addr":    {typeID: typeIPv4, len: 4},
	"ipv6_addr":    {typeID: typeIPv6, len: 16},
	"inet_proto":   {typeID: typeInetProt, len: 1},
	"inet_service": {typeID: typeInetServ, len: 2},
}

// nft's protocol descriptions and header fields (src/proto.c).
const (
	descUDP  = 6
	descTCP  = 8
	descSCTP = 10
	descIP   = 12
	descIP6  = 13
)

// fieldByExpr is a set field spelled by its typeof expression.
func fieldByExpr(e string) (keyField, bool) {
	switch e {
	case "ip daddr":
		return keyField{typeID: typeIPv4, len: 4, etype: etypePayload, udata: payloadUdata(descIP, 12)}, true
	case "ip saddr":
		return keyField{typeID: typeIPv4, len: 4, etype: etypePayload, udata: payloadUdata(descIP, 11)}, true
	case "ip6 daddr":
		return keyField{typeID: typeIPv6, len: 16, etype: etypePayload, udata: payloadUdata(descIP6, 9)}, true
	case "ip6 saddr":
		return keyField{typeID: typeIPv6, len: 16, etype: etypePayload, udata: payloadUdata(descIP6, 8)}, true
	case "tcp dport":
		return keyField{typeID: typeInetServ, len: 2, etype: etypePayload, udata: payloadUdata(descTCP, 2)}, true
	case "udp dport":
		return keyField{typeID: typeInetServ, len: 2, etype: etypePayload, udata: payloadUdata(descUDP, 2)}, true
	case "sctp dport":
		return keyField{typeID: typeInetServ, len: 2, etype: etypePayload, udata: payloadUdata(descSCTP, 2)}, true
	}
	if mod, ok := strings.CutPrefix(e, "numgen random mod "); ok {
		n, err := strconv.ParseUint(mod, 10, 32)
		if err != nil {
			return keyField{}, false
		}
		u := udataU32(udataU32(udataU32(nil, 0, unix.NFT_NG_RANDOM), 1, uint32(n)), 2, 0)
		return keyField{typeID: typeInteger, len: 4, etype: etypeNumgen, udata: u}, true
	}
	return keyField{}, false
}

// setType is what the encoder needs to know of a set or map to write its
// declaration and encode (and decode) its elements.
type setType struct {
	key, data []keyField
	verdict   bool // a verdict map
	isMap     bool
	interval  bool
	typeof    bool
}

func concatID(fs []keyField) uint32 {
	var id uint32
	for _, f := range fs {
		id = id<<6 | f.typeID // TYPE_BITS in src/datatype.h
	}
	return id
}

func concatLen(fs []keyField) int {
	if len(fs) == 1 {
		return fs[0].len
	}
	n := 0
	for _, f := range fs {
		n += f.words() * 4
	}
	return n
}

// parseSetType reads a knftables Set or Map type ("ipv4_addr . inet_proto
// : verdict") or typeof ("ip daddr . tcp dport . numgen random mod 1 :
// ip daddr . tcp dport").
func parseSetType(typ, typeOf string, isMap bool) (*setType, error) {
	st := &setType{isMap: isMap, typeof: typeOf != ""}
	spec := typ
	if st.typeof {
		spec = typeOf
	}
	key, data, hasData := strings.Cut(spec, " : ")
	if hasData != isMap {
		return nil, fmt.Errorf("set type %q: a map needs a value type, a set none", spec)
	}
	parse := func(s string) ([]keyField, error) {
		var out []keyField
		for _, part := range strings.Split(s, " . ") {
			f, ok := fieldByType[part]
			if st.typeof {
				f, ok = fieldByExpr(part)
			}
			if !ok {
				return nil, fmt.Errorf("set type %q: unknown field %q", spec, part)
			}
			out = append(out, f)
		}
		return out, nil
	}
	var err error
	if st.key, err = parse(key); err != nil {
		return nil, err
	}
	if data == "verdict" {
		st.verdict = true
	} else if hasData {
		if st.data, err = parse(data); err != nil {
			return nil, err
		}
	}
	return st, nil
}

// typeofUdata is a key or value typeof expression as nft stores it.
func typeofUdata(fs []keyField) []byte {
	if len(fs) == 1 && fs[0].etype != 0 {
		return udataTLV(udataU32(nil, 0, fs[0].etype), 1, fs[0].udata)
	}
	var body []byte
	for i, f := range fs {
		if f.etype == 0 {
			body = nil
			break
		}
		body = udataTLV(body, byte(i), udataTLV(udataU32(nil, 0, f.etype), 1, f.udata))
	}
	return udataTLV(udataU32(nil, 0, etypeConcat), 1, body)
}

// userdata is what nft stores with a set for `nft list` to print it as
// it was declared (libnftnl NFTNL_UDATA_SET_*): byte orders, typeof
// expressions, the comment. The kernel does not read it.
func (st *setType) userdata(comment string) []byte {
	var u []byte
	order := uint32(0)
	if len(st.key) == 1 && !st.typeof {
		order = 2 // BYTEORDER_BIG_ENDIAN: an address
	}
	u = udataU32(u, 0, order)
	if st.isMap {
		u = udataU32(u, 1, 0)
	}
	if st.typeof || len(st.key) > 1 {
		u = udataTLV(u, 3, typeofUdata(st.key))
	}
	if st.typeof && len(st.data) > 0 {
		u = udataTLV(u, 4, typeofUdata(st.data))
	}
	if st.isMap {
		u = udataU32(u, 6, 0)
	}
	if comment != "" {
		u = udataTLV(u, 7, append([]byte(comment), 0))
	}
	return u
}

// parseConcat encodes a key or value "a . b . c" for fields fs.
func parseConcat(fs []keyField, s string) ([]byte, error) {
	return appendConcat(make([]byte, 0, 4*len(fs)+16), fs, s)
}

// appendConcat appends the encoding of s to out.
func appendConcat(out []byte, fs []keyField, s string) ([]byte, error) {
	rest := s
	for i := range fs {
		p, r, more := strings.Cut(rest, " . ")
		rest = r
		if more != (i < len(fs)-1) {
			return nil, fmt.Errorf("%q: want %d fields", s, len(fs))
		}
		start := len(out)
		switch fs[i].typeID {
		case typeIPv4, typeIPv6:
			a, err := netip.ParseAddr(p)
			if err != nil || (a.Is4() != (fs[i].typeID == typeIPv4)) {
				return nil, fmt.Errorf("%q: bad address %q", s, p)
			}
			if a.Is4() {
				b := a.As4()
				out = append(out, b[:]...)
			} else {
				b := a.As16()
				out = append(out, b[:]...)
			}
		case typeInetProt:
			n, ok := protoNumbers[p]
			if !ok {
				return nil, fmt.Errorf("%q: unknown protocol %q", s, p)
			}
			out = append(out, n)
		case typeInetServ:
			n, err := strconv.ParseUint(p, 10, 16)
			if err != nil {
				return nil, fmt.Errorf("%q: bad port %q", s, p)
			}
			out = binary.BigEndian.AppendUint16(out, uint16(n))
		case typeInteger:
			n, err := strconv.ParseUint(p, 10, 32)
			if err != nil {
				return nil, fmt.Errorf("%q: bad number %q", s, p)
			}
			out = binary.NativeEndian.AppendUint32(out, uint32(n)) // numgen writes host order
		}
		if len(fs) > 1 {
			for len(out)-start < fs[i].words()*4 {
				out = append(out, 0)
			}
		}
	}
	return out, nil
}

var protoNumbers = map[string]byte{"tcp": unix.IPPROTO_TCP, "udp": unix.IPPROTO_UDP, "sctp": unix.IPPROTO_SCTP}

// verdictData parses "goto X", "jump X", "drop", "accept", "return".
func verdictData(s string) (code int32, chain string, err error) {
	word, rest, _ := strings.Cut(s, " ")
	switch word {
	case "goto":
		return unix.NFT_GOTO, rest, nil
	case "jump":
		return unix.NFT_JUMP, rest, nil
	case "drop":
		return 0, "", nil // NF_DROP
	case "accept":
		return 1, "", nil // NF_ACCEPT
	case "return":
		return unix.NFT_RETURN, "", nil
	}
	return 0, "", fmt.Errorf("unknown verdict %q", s)
}

// prefixRange is a prefix as the half-open range an interval set holds:
// start, and the first address after it (invalid at the end of the
// address space).
func prefixRange(p netip.Prefix) (start, end netip.Addr) {
	p = p.Masked()
	last := p.Addr().AsSlice()
	bits := p.Bits()
	for i := range last {
		for b := 0; b < 8; b++ {
			if i*8+b >= bits {
				last[i] |= 0x80 >> b
			}
		}
	}
	l, _ := netip.AddrFromSlice(last)
	return p.Addr(), l.Next()
}

func parsePrefixOrAddr(s string) (netip.Prefix, error) {
	if strings.Contains(s, "/") {
		return netip.ParsePrefix(s)
	}
	a, err := netip.ParseAddr(s)
	if err != nil {
		return netip.Prefix{}, err
	}
	return netip.PrefixFrom(a, a.BitLen()), nil
}

// anonSet is an anonymous constant set a rule uses ("{ a, b }"): created
// in the same batch just before its rule, bound to it by id.
type anonSet struct {
	id       uint32
	v6       bool
	interval bool
	elems    []netip.Prefix
}

// ruleCompiler compiles one rule's text.
type ruleCompiler struct {
	text  string
	toks  []string
	i     int
	out   []expr.Any
	fam   byte // the nfproto the rule already checks (0: none)
	l4    byte // the l4proto it already checks
	anon  []anonSet
	nat   []string
	newID func() uint32
}

// compiledRule is a rule's expressions, the anonymous sets they use, and
// the maps a "dnat … to <concatenation> map @m" looks its address and
// port up in (the encoder checks their value is address . port).
type compiledRule struct {
	exprs   []expr.Any
	anon    []anonSet
	natMaps []string
}

func (c *ruleCompiler) fail(format string, args ...any) error {
	return fmt.Errorf("rule %q: %s", c.text, fmt.Sprintf(format, args...))
}

func (c *ruleCompiler) peek() string {
	if c.i < len(c.toks) {
		return c.toks[c.i]
	}
	return ""
}

func (c *ruleCompiler) next() string {
	t := c.peek()
	c.i++
	return t
}

func (c *ruleCompiler) expect(words ...string) error {
	for _, w := range words {
		if t := c.next(); t != w {
			return c.fail("want %q, got %q", w, t)
		}
	}
	return nil
}

func (c *ruleCompiler) emit(es ...expr.Any) { c.out = append(c.out, es...) }

// needFamily adds the meta nfproto check an ip/ip6 match depends on.
func (c *ruleCompiler) needFamily(ip string) error {
	fam := byte(unix.NFPROTO_IPV4)
	if ip == "ip6" {
		fam = unix.NFPROTO_IPV6
	} else if ip != "ip" {
		return c.fail("unknown family %q", ip)
	}
	if c.fam == fam {
		return nil
	}
	if c.fam != 0 {
		return c.fail("mixes families")
	}
	c.fam = fam
	c.emit(&expr.Meta{Key: expr.MetaKeyNFPROTO, Register: 1}, &expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{fam}})
	return nil
}

func (c *ruleCompiler) needL4(proto string) error {
	n, ok := protoNumbers[proto]
	if !ok {
		return c.fail("unknown protocol %q", proto)
	}
	if c.l4 != n {
		c.l4 = n
		c.emit(&expr.Meta{Key: expr.MetaKeyL4PROTO, Register: 1}, &expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{n}})
	}
	return nil
}

// ipField is the payload of "ip saddr" etc.: offset and length.
func ipField(ip, sel string) (off, n uint32, ok bool) {
	switch ip + " " + sel {
	case "ip saddr":
		return 12, 4, true
	case "ip daddr":
		return 16, 4, true
	case "ip6 saddr":
		return 8, 16, true
	case "ip6 daddr":
		return 24, 16, true
	}
	return 0, 0, false
}

// loader loads one field of a concatenation into register word w.
type loader struct {
	words int
	load  func(w int) expr.Any
	dep   func() error
}

// field reads one concatenation field from the tokens: "ip daddr",
// "meta l4proto", "th dport", "tcp dport", "numgen random mod N".
func (c *ruleCompiler) field() (loader, error) {
	t := c.next()
	switch t {
	case "ip", "ip6":
		sel := c.next()
		off, n, ok := ipField(t, sel)
		if !ok {
			return loader{}, c.fail("unknown field %s %s", t, sel)
		}
		return loader{words: int(n) / 4, dep: func() error { return c.needFamily(t) }, load: func(w int) expr.Any {
			return &expr.Payload{DestRegister: reg(w), Base: expr.PayloadBaseNetworkHeader, Offset: off, Len: n}
		}}, nil
	case "meta":
		if err := c.expect("l4proto"); err != nil {
			return loader{}, err
		}
		return loader{words: 1, load: func(w int) expr.Any { return &expr.Meta{Key: expr.MetaKeyL4PROTO, Register: reg(w)} }}, nil
	case "th", "tcp", "udp", "sctp":
		if err := c.expect("dport"); err != nil {
			return loader{}, err
		}
		l := loader{words: 1, load: func(w int) expr.Any {
			return &expr.Payload{DestRegister: reg(w), Base: expr.PayloadBaseTransportHeader, Offset: 2, Len: 2}
		}}
		if t != "th" {
			l.dep = func() error { return c.needL4(t) }
		}
		return l, nil
	case "numgen":
		if err := c.expect("random", "mod"); err != nil {
			return loader{}, err
		}
		n, err := strconv.ParseUint(c.next(), 10, 32)
		if err != nil || n == 0 {
			return loader{}, c.fail("bad numgen modulus")
		}
		return loader{words: 1, load: func(w int) expr.Any {
			return &expr.Numgen{Register: reg(w), Modulus: uint32(n), Type: unix.NFT_NG_RANDOM}
		}}, nil
	}
	return loader{}, c.fail("unknown field %q", t)
}

// concat reads fields separated by "." (the first already read into
// first, if given) and loads them from register 1 on, dependencies
// first. It returns how many words the key takes.
func (c *ruleCompiler) concat(first *loader) (int, error) {
	var fs []loader
	if first != nil {
		fs = append(fs, *first)
	} else {
		f, err := c.field()
		if err != nil {
			return 0, err
		}
		fs = append(fs, f)
	}
	for c.peek() == "." {
		c.next()
		f, err := c.field()
		if err != nil {
			return 0, err
		}
		fs = append(fs, f)
	}
	for _, f := range fs {
		if f.dep != nil {
			if err := f.dep(); err != nil {
				return 0, err
			}
		}
	}
	w := 0
	for _, f := range fs {
		c.emit(f.load(w))
		w += f.words
	}
	return w, nil
}

func setRef(t string) (string, bool) { return strings.CutPrefix(t, "@") }

// compileRule compiles text; newID numbers the anonymous sets it needs.
func compileRule(text string, newID func() uint32) (compiledRule, error) {
	c := &ruleCompiler{text: text, toks: strings.Fields(text), newID: newID}
	for c.i < len(c.toks) {
		if err := c.statement(); err != nil {
			return compiledRule{}, err
		}
	}
	return compiledRule{exprs: c.out, anon: c.anon, natMaps: c.nat}, nil
}

func (c *ruleCompiler) statement() error {
	t := c.next()
	switch t {
	case "ct":
		key, val := c.next(), c.next()
		var k expr.CtKey
		var mask uint32
		switch key + " " + val {
		case "state new":
			k, mask = expr.CtKeySTATE, 8 // NF_CT_STATE_BIT(IP_CT_NEW)
		case "status dnat":
			k, mask = expr.CtKeySTATUS, 0x20 // IPS_DST_NAT
		default:
			return c.fail("unknown ct match %s %s", key, val)
		}
		c.emit(&expr.Ct{Key: k, Register: 1},
			&expr.Bitwise{SourceRegister: 1, DestRegister: 1, Len: 4, Mask: binary.NativeEndian.AppendUint32(nil, mask), Xor: make([]byte, 4)},
			&expr.Cmp{Op: expr.CmpOpNeq, Register: 1, Data: make([]byte, 4)})
	case "ip", "ip6":
		return c.ipMatch(t)
	case "meta":
		return c.meta()
	case "fib":
		dir := c.next()
		if err := c.expect("type", "local"); err != nil {
			return err
		}
		f := &expr.Fib{Register: 1, ResultADDRTYPE: true}
		switch dir {
		case "saddr":
			f.FlagSADDR = true
		case "daddr":
			f.FlagDADDR = true
		default:
			return c.fail("unknown fib %q", dir)
		}
		c.emit(f, &expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: binary.NativeEndian.AppendUint32(nil, unix.RTN_LOCAL)})
	case "th":
		if err := c.expect("dport"); err != nil {
			return err
		}
		n, err := strconv.ParseUint(c.next(), 10, 16)
		if err != nil {
			return c.fail("bad port")
		}
		c.emit(&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseTransportHeader, Offset: 2, Len: 2},
			&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: binary.BigEndian.AppendUint16(nil, uint16(n))})
	case "numgen":
		if err := c.expect("random", "mod"); err != nil {
			return err
		}
		n, err := strconv.ParseUint(c.next(), 10, 32)
		if err != nil || n == 0 {
			return c.fail("bad numgen modulus")
		}
		if err := c.expect("=="); err != nil {
			return err
		}
		v, err := strconv.ParseUint(c.next(), 10, 32)
		if err != nil {
			return c.fail("bad numgen value")
		}
		c.emit(&expr.Numgen{Register: 1, Modulus: uint32(n), Type: unix.NFT_NG_RANDOM},
			&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: binary.NativeEndian.AppendUint32(nil, uint32(v))})
	case "update":
		set, ok := setRef(c.next())
		if !ok {
			return c.fail("update wants a set")
		}
		if err := c.expect("{"); err != nil {
			return err
		}
		ip, sel := c.next(), c.next()
		off, n, ok := ipField(ip, sel)
		if !ok {
			return c.fail("unknown update key %s %s", ip, sel)
		}
		if err := c.expect("}"); err != nil {
			return err
		}
		if err := c.needFamily(ip); err != nil {
			return err
		}
		c.emit(&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: off, Len: n},
			&expr.Dynset{SrcRegKey: 1, SetName: set, Operation: unix.NFT_DYNSET_OP_UPDATE})
	case "dnat":
		return c.dnat()
	case "masquerade":
		m := &expr.Masq{}
		if c.peek() == "fully-random" {
			c.next()
			m.FullyRandom = true
		}
		c.emit(m)
	case "reject":
		// As nft: an ICMP port unreachable of the family the rule
		// matched, else the inet family's ICMPX one.
		switch c.fam {
		case unix.NFPROTO_IPV4:
			c.emit(&expr.Reject{Type: unix.NFT_REJECT_ICMP_UNREACH, Code: 3}) // ICMP_PORT_UNREACH
		case unix.NFPROTO_IPV6:
			c.emit(&expr.Reject{Type: unix.NFT_REJECT_ICMP_UNREACH, Code: 4}) // ICMPV6_PORT_UNREACH
		default:
			c.emit(&expr.Reject{Type: unix.NFT_REJECT_ICMPX_UNREACH, Code: unix.NFT_REJECT_ICMPX_PORT_UNREACH})
		}
	case "jump", "goto":
		chain := c.next()
		if chain == "" {
			return c.fail("%s without a chain", t)
		}
		k := expr.VerdictJump
		if t == "goto" {
			k = expr.VerdictGoto
		}
		c.emit(&expr.Verdict{Kind: k, Chain: chain})
	case "drop":
		c.emit(&expr.Verdict{Kind: expr.VerdictDrop})
	case "accept":
		c.emit(&expr.Verdict{Kind: expr.VerdictAccept})
	case "return":
		c.emit(&expr.Verdict{Kind: expr.VerdictReturn})
	default:
		return c.fail("unknown statement %q", t)
	}
	return nil
}

// ipMatch compiles "ip daddr . … vmap @m", "ip saddr . ip daddr @s",
// "ip saddr [!=] @s", "ip saddr [!=] { … }", "ip daddr [!=] addr/prefix".
func (c *ruleCompiler) ipMatch(ip string) error {
	sel := c.next()
	off, n, ok := ipField(ip, sel)
	if !ok {
		return c.fail("unknown match %s %s", ip, sel)
	}
	if c.peek() == "." {
		first := loader{words: int(n) / 4, dep: func() error { return c.needFamily(ip) }, load: func(w int) expr.Any {
			return &expr.Payload{DestRegister: reg(w), Base: expr.PayloadBaseNetworkHeader, Offset: off, Len: n}
		}}
		if _, err := c.concat(&first); err != nil {
			return err
		}
		return c.lookupTail()
	}
	if err := c.needFamily(ip); err != nil {
		return err
	}
	neg := false
	if c.peek() == "!=" {
		c.next()
		neg = true
	}
	op := c.cmpOp(neg)
	load := func(l uint32) {
		c.emit(&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: off, Len: l})
	}
	t := c.next()
	if set, ok := setRef(t); ok {
		load(n)
		c.emit(&expr.Lookup{SourceRegister: 1, SetName: set, Invert: neg})
		return nil
	}
	if t == "{" {
		as := anonSet{v6: ip == "ip6"}
		for {
			e := strings.TrimSuffix(c.next(), ",")
			if e == "}" || e == "" {
				break
			}
			p, err := parsePrefixOrAddr(e)
			if err != nil || p.Addr().Is6() != as.v6 {
				return c.fail("bad set element %q", e)
			}
			if p.Bits() != p.Addr().BitLen() {
				as.interval = true
			}
			as.elems = append(as.elems, p)
		}
		switch len(as.elems) {
		case 0:
			return c.fail("empty set")
		case 1:
			// nft matches a one-element set as the element itself.
			c.matchPrefix(as.elems[0], off, n, op)
			return nil
		}
		as.id = c.newID()
		c.anon = append(c.anon, as)
		load(n)
		c.emit(&expr.Lookup{SourceRegister: 1, SetName: "__set%d", SetID: as.id, Invert: neg})
		return nil
	}
	p, err := parsePrefixOrAddr(t)
	if err != nil || p.Addr().Is6() != (ip == "ip6") {
		return c.fail("bad address %q", t)
	}
	c.matchPrefix(p, off, n, op)
	return nil
}

// matchPrefix compares the n-byte address field at off with p (an
// address: a prefix of its full length).
func (c *ruleCompiler) matchPrefix(p netip.Prefix, off, n uint32, op expr.CmpOp) {
	load := func(l uint32) {
		c.emit(&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: off, Len: l})
	}
	p = p.Masked()
	addr := p.Addr().AsSlice()
	switch {
	case p.Bits()%8 == 0:
		// A whole-byte prefix compares just those bytes.
		load(uint32(p.Bits() / 8))
		c.emit(&expr.Cmp{Op: op, Register: 1, Data: addr[:p.Bits()/8]})
	default:
		load(n)
		m := make([]byte, n)
		for i := 0; i < p.Bits(); i++ {
			m[i/8] |= 0x80 >> (i % 8)
		}
		c.emit(&expr.Bitwise{SourceRegister: 1, DestRegister: 1, Len: n, Mask: m, Xor: make([]byte, n)},
			&expr.Cmp{Op: op, Register: 1, Data: addr})
	}
}

func (c *ruleCompiler) cmpOp(neg bool) expr.CmpOp {
	if neg {
		return expr.CmpOpNeq
	}
	return expr.CmpOpEq
}

// lookupTail finishes a concatenation: "vmap @m" or "@s".
func (c *ruleCompiler) lookupTail() error {
	t := c.next()
	if t == "vmap" {
		set, ok := setRef(c.next())
		if !ok {
			return c.fail("vmap wants a map")
		}
		c.emit(&expr.Lookup{SourceRegister: 1, DestRegister: 0, IsDestRegSet: true, SetName: set})
		return nil
	}
	set, ok := setRef(t)
	if !ok {
		return c.fail("want a set after a concatenation, got %q", t)
	}
	c.emit(&expr.Lookup{SourceRegister: 1, SetName: set})
	return nil
}

// meta compiles "meta l4proto tcp", "meta l4proto . th dport vmap @m",
// "meta nfproto ipv4" (or ipv6), "meta mark set meta mark | M" (or ^ M)
// and "meta mark & M == V".
func (c *ruleCompiler) meta() error {
	switch c.next() {
	case "nfproto":
		// An explicit match: written even if an earlier match implied it,
		// and what later ip/ip6 matches and a dnat of the family rely on.
		ip := map[string]string{"ipv4": "ip", "ipv6": "ip6"}[c.next()]
		if ip == "" {
			return c.fail("unknown nfproto")
		}
		if want := map[string]byte{"ip": unix.NFPROTO_IPV4, "ip6": unix.NFPROTO_IPV6}[ip]; c.fam != 0 && c.fam != want {
			return c.fail("mixes families")
		}
		c.fam = 0
		return c.needFamily(ip)
	case "l4proto":
		if c.peek() == "." {
			first := loader{words: 1, load: func(w int) expr.Any { return &expr.Meta{Key: expr.MetaKeyL4PROTO, Register: reg(w)} }}
			if _, err := c.concat(&first); err != nil {
				return err
			}
			return c.lookupTail()
		}
		return c.needL4Always(c.next())
	case "mark":
		switch c.next() {
		case "set":
			if err := c.expect("meta", "mark"); err != nil {
				return err
			}
			op := c.next()
			v, err := strconv.ParseUint(c.next(), 0, 32)
			if err != nil {
				return c.fail("bad mark")
			}
			var mask, xor uint32
			switch op {
			case "|":
				mask, xor = ^uint32(v), uint32(v)
			case "^":
				mask, xor = 0xffffffff, uint32(v)
			default:
				return c.fail("unknown mark operation %q", op)
			}
			c.emit(&expr.Meta{Key: expr.MetaKeyMARK, Register: 1},
				&expr.Bitwise{SourceRegister: 1, DestRegister: 1, Len: 4, Mask: binary.NativeEndian.AppendUint32(nil, mask), Xor: binary.NativeEndian.AppendUint32(nil, xor)},
				&expr.Meta{Key: expr.MetaKeyMARK, SourceRegister: true, Register: 1})
		case "&":
			m, err := strconv.ParseUint(c.next(), 0, 32)
			if err != nil {
				return c.fail("bad mark mask")
			}
			if err := c.expect("=="); err != nil {
				return err
			}
			v, err := strconv.ParseUint(c.next(), 0, 32)
			if err != nil {
				return c.fail("bad mark value")
			}
			c.emit(&expr.Meta{Key: expr.MetaKeyMARK, Register: 1},
				&expr.Bitwise{SourceRegister: 1, DestRegister: 1, Len: 4, Mask: binary.NativeEndian.AppendUint32(nil, uint32(m)), Xor: make([]byte, 4)},
				&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: binary.NativeEndian.AppendUint32(nil, uint32(v))})
		default:
			return c.fail("unknown meta mark statement")
		}
		return nil
	}
	return c.fail("unknown meta statement")
}

// needL4Always is an explicit "meta l4proto P" match: written even if
// an earlier one matched the same.
func (c *ruleCompiler) needL4Always(proto string) error {
	c.l4 = 0
	return c.needL4(proto)
}

// dnat compiles "dnat ip to A:P", "dnat ip addr . port to <concat> map
// @m" and "dnat ip to <concat> map @m" (the same, spelled without "addr .
// port": nft generates the same expressions when @m's value is address .
// port, which the encoder checks).
func (c *ruleCompiler) dnat() error {
	fam := c.next()
	nfFam := uint32(unix.NFPROTO_IPV4)
	addrWords := 1
	switch fam {
	case "ip":
	case "ip6":
		nfFam, addrWords = unix.NFPROTO_IPV6, 4
	default:
		return c.fail("unknown dnat family %q", fam)
	}
	checked := true // the map's value is declared address . port
	if c.peek() == "to" {
		c.next()
		if ap, err := netip.ParseAddrPort(c.peek()); err == nil {
			c.next()
			if ap.Addr().Is6() != (fam == "ip6") {
				return c.fail("bad dnat target")
			}
			c.emit(&expr.Immediate{Register: 1, Data: ap.Addr().AsSlice()},
				&expr.Immediate{Register: 2, Data: binary.BigEndian.AppendUint16(nil, ap.Port())},
				&expr.NAT{Type: expr.NATTypeDestNAT, Family: nfFam, RegAddrMin: 1, RegProtoMin: 2, Specified: true})
			return nil
		}
		checked = false
	} else if err := c.expect("addr", ".", "port", "to"); err != nil {
		return err
	}
	if _, err := c.concat(nil); err != nil {
		return err
	}
	if err := c.expect("map"); err != nil {
		return err
	}
	set, ok := setRef(c.next())
	if !ok {
		return c.fail("dnat map wants a map")
	}
	if !checked {
		c.nat = append(c.nat, set)
	}
	c.emit(&expr.Lookup{SourceRegister: 1, DestRegister: 1, IsDestRegSet: true, SetName: set},
		&expr.NAT{Type: expr.NATTypeDestNAT, Family: nfFam, RegAddrMin: 1, RegProtoMin: reg(addrWords)})
	return nil
}

// mergeRanges turns prefixes into sorted, non-overlapping, non-adjacent
// half-open ranges (end invalid: to the end of the address space), as
// an interval set must hold them.
func mergeRanges(ps []netip.Prefix) [][2]netip.Addr {
	var rs [][2]netip.Addr
	for _, p := range ps {
		s, e := prefixRange(p)
		rs = append(rs, [2]netip.Addr{s, e})
	}
	slices.SortFunc(rs, func(a, b [2]netip.Addr) int { return a[0].Compare(b[0]) })
	var out [][2]netip.Addr
	for _, r := range rs {
		if n := len(out); n > 0 {
			last := &out[n-1]
			if !last[1].IsValid() || r[0].Compare(last[1]) <= 0 {
				if last[1].IsValid() && (!r[1].IsValid() || r[1].Compare(last[1]) > 0) {
					last[1] = r[1]
				}
				continue
			}
		}
		out = append(out, r)
	}
	return out
}
