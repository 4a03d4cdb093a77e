package nftnl

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
	"sigs.k8s.io/knftables"
)

// Listing: nf_tables GET requests and dumps. The kernel dumps the objects
// of every table of the family, so each answer's table is checked here.
// Rules are listed as handles and comments; their expressions are not
// read back (nothing here needs them: the proxy keeps a fingerprint
// chain, overlay/egress compares rule comments).

type tableInfo struct {
	comment string
}

type chainInfo struct {
	name     string
	hook     int // -1: not a base chain
	priority int32
	typ      string
	comment  string
}

type setInfo struct {
	name                               string
	flags                              uint32
	keyType, keyLen, dataType, dataLen uint32
	timeoutMS                          uint64
	comment                            string
}

func (s setInfo) isMap() bool { return s.flags&unix.NFT_SET_MAP != 0 }

type ruleInfo struct {
	chain string
	Rule
}

func be32(b []byte) uint32 {
	if len(b) < 4 {
		return 0
	}
	return binary.BigEndian.Uint32(b)
}

func be64(b []byte) uint64 {
	if len(b) < 8 {
		return 0
	}
	return binary.BigEndian.Uint64(b)
}

// udataString returns the NUL-terminated string of TLV typ in libnftnl
// userdata u (comments), or "".
func udataString(u []byte, typ byte) string {
	for len(u) >= 2 {
		t, l := u[0], int(u[1])
		if 2+l > len(u) {
			return ""
		}
		if t == typ {
			return string(trimNul(u[2 : 2+l]))
		}
		u = u[2+l:]
	}
	return ""
}

// getTable returns the table, or an *Error for which IsNotFound holds.
func (c *Conn) getTable(ctx context.Context) (tableInfo, error) {
	var m msgBuf
	m.str(unix.NFTA_TABLE_NAME, c.table)
	var t tableInfo
	err := c.sock.request(ctx, unix.NFT_MSG_GETTABLE, 0, m.b, "list table inet "+c.table, func(b []byte) {
		attrs(b, func(typ uint16, data []byte) {
			if typ == nftaTableUserdata {
				t.comment = udataString(data, 0) // NFTNL_UDATA_TABLE_COMMENT
			}
		})
	})
	return t, err
}

// chains lists the table's chains; an absent table has none (callers
// ask getTable first).
func (c *Conn) chains(ctx context.Context) ([]chainInfo, error) {
	var m msgBuf
	m.str(unix.NFTA_CHAIN_TABLE, c.table)
	var out []chainInfo
	err := c.sock.request(ctx, unix.NFT_MSG_GETCHAIN, unix.NLM_F_DUMP, m.b, "list chains of table inet "+c.table, func(b []byte) {
		var table string
		ch := chainInfo{hook: -1}
		attrs(b, func(typ uint16, data []byte) {
			switch typ {
			case unix.NFTA_CHAIN_TABLE:
				table = string(trimNul(data))
			case unix.NFTA_CHAIN_NAME:
				ch.name = string(trimNul(data))
			case unix.NFTA_CHAIN_HOOK:
				attrs(data, func(typ uint16, data []byte) {
					switch typ {
					case unix.NFTA_HOOK_HOOKNUM:
						ch.hook = int(be32(data))
					case unix.NFTA_HOOK_PRIORITY:
						ch.priority = int32(be32(data))
					}
				})
			case unix.NFTA_CHAIN_TYPE:
				ch.typ = string(trimNul(data))
			case nftaChainUserdata:
				ch.comment = udataString(data, 0)
			}
		})
		if table == c.table {
			out = append(out, ch)
		}
	})
	return out, err
}

func parseSet(b []byte) (table string, s setInfo) {
	attrs(b, func(typ uint16, data []byte) {
		switch typ {
		case unix.NFTA_SET_TABLE:
			table = string(trimNul(data))
		case unix.NFTA_SET_NAME:
			s.name = string(trimNul(data))
		case unix.NFTA_SET_FLAGS:
			s.flags = be32(data)
		case unix.NFTA_SET_KEY_TYPE:
			s.keyType = be32(data)
		case unix.NFTA_SET_KEY_LEN:
			s.keyLen = be32(data)
		case unix.NFTA_SET_DATA_TYPE:
			s.dataType = be32(data)
		case unix.NFTA_SET_DATA_LEN:
			s.dataLen = be32(data)
		case unix.NFTA_SET_TIMEOUT:
			s.timeoutMS = be64(data)
		case unix.NFTA_SET_USERDATA:
			s.comment = udataString(data, 7) // NFTNL_UDATA_SET_COMMENT
		}
	})
	return table, s
}

// sets lists the table's named sets and maps; an absent table has none.
func (c *Conn) sets(ctx context.Context) ([]setInfo, error) {
	var m msgBuf
	m.str(unix.NFTA_SET_TABLE, c.table)
	var out []setInfo
	err := c.sock.request(ctx, unix.NFT_MSG_GETSET, unix.NLM_F_DUMP, m.b, "list sets of table inet "+c.table, func(b []byte) {
		table, s := parseSet(b)
		if table == c.table && s.flags&unix.NFT_SET_ANONYMOUS == 0 {
			out = append(out, s)
		}
	})
	return out, err
}

func (c *Conn) getSet(ctx context.Context, name string) (setInfo, error) {
	var m msgBuf
	m.str(unix.NFTA_SET_TABLE, c.table)
	m.str(unix.NFTA_SET_NAME, name)
	var s setInfo
	err := c.sock.request(ctx, unix.NFT_MSG_GETSET, 0, m.b, "list set "+name+" of table inet "+c.table, func(b []byte) {
		_, s = parseSet(b)
	})
	return s, err
}

// rules lists the rules of chain ("": of every chain), in order.
func (c *Conn) rules(ctx context.Context, chain string) ([]ruleInfo, error) {
	var m msgBuf
	m.str(unix.NFTA_RULE_TABLE, c.table)
	if chain != "" {
		m.str(unix.NFTA_RULE_CHAIN, chain)
	}
	var out []ruleInfo
	err := c.sock.request(ctx, unix.NFT_MSG_GETRULE, unix.NLM_F_DUMP, m.b, "list rules of table inet "+c.table, func(b []byte) {
		var table string
		var r ruleInfo
		attrs(b, func(typ uint16, data []byte) {
			switch typ {
			case unix.NFTA_RULE_TABLE:
				table = string(trimNul(data))
			case unix.NFTA_RULE_CHAIN:
				r.chain = string(trimNul(data))
			case unix.NFTA_RULE_HANDLE:
				r.Handle = be64(data)
			case unix.NFTA_RULE_USERDATA:
				r.Comment = udataString(data, 0) // NFTNL_UDATA_RULE_COMMENT
			}
		})
		if table == c.table && (chain == "" || r.chain == chain) {
			out = append(out, r)
		}
	})
	return out, err
}

// List is part of Interface.
func (c *Conn) List(ctx context.Context, objectType string) ([]string, error) {
	if _, err := c.getTable(ctx); err != nil {
		return nil, err
	}
	var out []string
	switch strings.TrimSuffix(objectType, "s") {
	case "chain":
		chains, err := c.chains(ctx)
		if err != nil {
			return nil, err
		}
		for _, ch := range chains {
			out = append(out, ch.name)
		}
	case "set", "map":
		sets, err := c.sets(ctx)
		if err != nil {
			return nil, err
		}
		for _, s := range sets {
			if s.isMap() == (strings.TrimSuffix(objectType, "s") == "map") {
				out = append(out, s.name)
			}
		}
	default:
		return nil, fmt.Errorf("nftnl: cannot list objects of type %q", objectType)
	}
	return out, nil
}

// ListAll returns the names of the table's chains, sets and maps under
// "chain", "set" and "map" (anonymous sets left out), or an error for
// which IsNotFound holds if there is no table: one GETTABLE request and
// one GETCHAIN and one GETSET dump, however large the table.
func (c *Conn) ListAll(ctx context.Context) (map[string][]string, error) {
	if _, err := c.getTable(ctx); err != nil {
		return nil, err
	}
	chains, err := c.chains(ctx)
	if err != nil {
		return nil, err
	}
	out := map[string][]string{}
	for _, ch := range chains {
		out["chain"] = append(out["chain"], ch.name)
	}
	sets, err := c.sets(ctx)
	if err != nil {
		return nil, err
	}
	for _, s := range sets {
		typ := "set"
		if s.isMap() {
			typ = "map"
		}
		out[typ] = append(out[typ], s.name)
	}
	return out, nil
}

// ListRules is part of Interface.
func (c *Conn) ListRules(ctx context.Context, chain string) ([]Rule, error) {
	// The rule dump of a missing chain is empty, not an error: ask for
	// the chain first.
	var m msgBuf
	m.str(unix.NFTA_CHAIN_TABLE, c.table)
	m.str(unix.NFTA_CHAIN_NAME, chain)
	if err := c.sock.request(ctx, unix.NFT_MSG_GETCHAIN, 0, m.b, "list chain "+chain+" of table inet "+c.table, func([]byte) {}); err != nil {
		return nil, err
	}
	rules, err := c.rules(ctx, chain)
	if err != nil {
		return nil, err
	}
	out := make([]Rule, len(rules))
	for i, r := range rules {
		out[i] = r.Rule
	}
	return out, nil
}

// ListElements is part of Interface. Keys and values are decoded by the
// set's type as the kernel holds it; elements of an interval set are
// listed as the prefixes (or ranges "a-b") they cover.
func (c *Conn) ListElements(ctx context.Context, objectType, name string) ([]*knftables.Element, error) {
	si, err := c.getSet(ctx, name)
	if err != nil {
		return nil, err
	}
	if want := strings.TrimSuffix(objectType, "s") == "map"; want != si.isMap() {
		return nil, fmt.Errorf("nftnl: %s %s of table inet %s is not a %s", map[bool]string{false: "set", true: "map"}[si.isMap()], name, c.table, objectType)
	}
	st, err := kernelSetType(si)
	if err != nil {
		return nil, fmt.Errorf("nftnl: set %s of table inet %s: %w", name, c.table, err)
	}
	return c.elements(ctx, si, st)
}

// rawElem is one element as the kernel dumps it.
type rawElem struct {
	key, data []byte
	verdict   string
	flags     uint32
	comment   string
}

func (c *Conn) elements(ctx context.Context, si setInfo, st *setType) ([]*knftables.Element, error) {
	var m msgBuf
	m.str(unix.NFTA_SET_ELEM_LIST_TABLE, c.table)
	m.str(unix.NFTA_SET_ELEM_LIST_SET, si.name)
	var raw []rawElem
	err := c.sock.request(ctx, unix.NFT_MSG_GETSETELEM, unix.NLM_F_DUMP, m.b, "list elements of "+si.name+" of table inet "+c.table, func(b []byte) {
		var table, set string
		attrs(b, func(typ uint16, data []byte) {
			switch typ {
			case unix.NFTA_SET_ELEM_LIST_TABLE:
				table = string(trimNul(data))
			case unix.NFTA_SET_ELEM_LIST_SET:
				set = string(trimNul(data))
			}
		})
		if table != c.table || set != si.name {
			return
		}
		attrs(b, func(typ uint16, data []byte) {
			if typ != unix.NFTA_SET_ELEM_LIST_ELEMENTS {
				return
			}
			attrs(data, func(_ uint16, el []byte) {
				raw = append(raw, parseElem(el))
			})
		})
	})
	if err != nil {
		return nil, err
	}
	if st.interval {
		return intervalElements(si, raw), nil
	}
	out := make([]*knftables.Element, 0, len(raw))
	for _, r := range raw {
		e := &knftables.Element{}
		if si.isMap() {
			e.Map = si.name
		} else {
			e.Set = si.name
		}
		e.Key = formatConcat(st.key, r.key)
		switch {
		case r.verdict != "":
			e.Value = []string{r.verdict}
		case r.data != nil:
			e.Value = formatConcat(st.data, r.data)
		}
		if r.comment != "" {
			e.Comment = knftables.PtrTo(r.comment)
		}
		out = append(out, e)
	}
	return out, nil
}

func parseElem(el []byte) rawElem {
	var r rawElem
	attrs(el, func(typ uint16, data []byte) {
		switch typ {
		case unix.NFTA_SET_ELEM_KEY:
			attrs(data, func(typ uint16, v []byte) {
				if typ == unix.NFTA_DATA_VALUE {
					r.key = slices.Clone(v)
				}
			})
		case unix.NFTA_SET_ELEM_DATA:
			attrs(data, func(typ uint16, v []byte) {
				switch typ {
				case unix.NFTA_DATA_VALUE:
					r.data = slices.Clone(v)
				case unix.NFTA_DATA_VERDICT:
					r.verdict = parseVerdict(v)
				}
			})
		case unix.NFTA_SET_ELEM_FLAGS:
			r.flags = be32(data)
		case unix.NFTA_SET_ELEM_USERDATA:
			r.comment = udataString(data, 0) // NFTNL_UDATA_SET_ELEM_COMMENT
		}
	})
	return r
}

// parseVerdict renders NFTA_DATA_VERDICT as nft spells it.
func parseVerdict(b []byte) string {
	var code int32
	var chain string
	attrs(b, func(typ uint16, data []byte) {
		switch typ {
		case unix.NFTA_VERDICT_CODE:
			code = int32(be32(data))
		case unix.NFTA_VERDICT_CHAIN:
			chain = string(trimNul(data))
		}
	})
	switch code {
	case 0:
		return "drop"
	case 1:
		return "accept"
	case unix.NFT_JUMP:
		return "jump " + chain
	case unix.NFT_GOTO:
		return "goto " + chain
	case unix.NFT_RETURN:
		return "return"
	case unix.NFT_CONTINUE:
		return "continue"
	case unix.NFT_BREAK:
		return "break"
	}
	return "verdict " + strconv.Itoa(int(code))
}

// intervalElements pairs an interval set's starts and ends into the
// prefixes (or ranges) they cover.
func intervalElements(si setInfo, raw []rawElem) []*knftables.Element {
	slices.SortFunc(raw, func(a, b rawElem) int {
		if c := bytes.Compare(a.key, b.key); c != 0 {
			return c
		}
		// An end and the next start at the same address: the end first.
		return int(b.flags&unix.NFT_SET_ELEM_INTERVAL_END) - int(a.flags&unix.NFT_SET_ELEM_INTERVAL_END)
	})
	var out []*knftables.Element
	emit := func(start, end []byte) {
		s, ok := netip.AddrFromSlice(start)
		if !ok {
			out = append(out, &knftables.Element{Set: si.name, Key: []string{"0x" + hex.EncodeToString(start)}})
			return
		}
		var e netip.Addr
		if end != nil {
			e, _ = netip.AddrFromSlice(end)
		}
		out = append(out, &knftables.Element{Set: si.name, Key: []string{rangeString(s, e)}})
	}
	var open []byte
	for _, r := range raw {
		if r.flags&unix.NFT_SET_ELEM_INTERVAL_END != 0 {
			if open != nil {
				emit(open, r.key)
				open = nil
			}
			continue
		}
		if open != nil {
			emit(open, nil) // no end: to the end of the address space
		}
		open = r.key
	}
	if open != nil {
		emit(open, nil)
	}
	return out
}

// rangeString renders [s, end) (end invalid: to the end of the address
// space) as a prefix or an address if it is one, else as "first-last".
func rangeString(s, end netip.Addr) string {
	for bits := 0; bits <= s.BitLen(); bits++ {
		p := netip.PrefixFrom(s, bits)
		if p.Masked().Addr() != s {
			continue
		}
		if _, e := prefixRange(p); e == end {
			if bits == s.BitLen() {
				return s.String()
			}
			return p.String()
		}
	}
	last := "end"
	if end.IsValid() {
		last = end.Prev().String()
	}
	return s.String() + "-" + last
}

// kernelSetType is the type of a set as the kernel holds it: its key
// (and data) datatypes, concatenations split by their 6-bit ids.
func kernelSetType(si setInfo) (*setType, error) {
	st := &setType{isMap: si.isMap(), interval: si.flags&unix.NFT_SET_INTERVAL != 0}
	var err error
	if st.key, err = kernelFields(si.keyType, int(si.keyLen)); err != nil {
		return nil, fmt.Errorf("key: %w", err)
	}
	if st.isMap {
		if si.dataType == typeVerdict {
			st.verdict = true
		} else if st.data, err = kernelFields(si.dataType, int(si.dataLen)); err != nil {
			return nil, fmt.Errorf("value: %w", err)
		}
	}
	return st, nil
}

// kernelFields splits a (concatenated) datatype id of total bytes into
// fields. An integer takes what the others leave; another datatype is
// listed as bytes if it is the only field.
func kernelFields(id uint32, total int) ([]keyField, error) {
	var ids []uint32
	for x := id; x != 0; x >>= 6 {
		ids = append([]uint32{x & 0x3f}, ids...)
	}
	if len(ids) <= 1 {
		return []keyField{{typeID: id, len: total}}, nil
	}
	fs := make([]keyField, len(ids))
	free := -1
	used := 0
	for i, t := range ids {
		fs[i].typeID = t
		switch t {
		case typeIPv4:
			fs[i].len = 4
		case typeIPv6:
			fs[i].len = 16
		case typeInetProt:
			fs[i].len = 1
		case typeInetServ:
			fs[i].len = 2
		default:
			if free >= 0 {
				return nil, fmt.Errorf("datatype %#x: two fields of unknown length", id)
			}
			free = i
			continue
		}
		used += fs[i].words() * 4
	}
	if free >= 0 {
		fs[free].len = total - used
		if fs[free].len <= 0 {
			return nil, fmt.Errorf("datatype %#x of %d bytes: no room for field %d", id, total, free)
		}
	} else if used != total {
		return nil, fmt.Errorf("datatype %#x: %d bytes, want %d", id, total, used)
	}
	return fs, nil
}

// formatConcat renders b, a key or value of fields fs, one string per
// field.
func formatConcat(fs []keyField, b []byte) []string {
	if len(fs) == 1 {
		return []string{formatField(fs[0], b)}
	}
	out := make([]string, 0, len(fs))
	for _, f := range fs {
		n := f.words() * 4
		if n > len(b) {
			out = append(out, "0x"+hex.EncodeToString(b))
			break
		}
		out = append(out, formatField(f, b[:min(f.len, n)]))
		b = b[n:]
	}
	return out
}

func formatField(f keyField, b []byte) string {
	switch {
	case f.typeID == typeIPv4 && len(b) == 4, f.typeID == typeIPv6 && len(b) == 16:
		a, _ := netip.AddrFromSlice(b)
		return a.String()
	case f.typeID == typeInetProt && len(b) == 1:
		for name, n := range protoNumbers {
			if n == b[0] {
				return name
			}
		}
		return strconv.Itoa(int(b[0]))
	case f.typeID == typeInetServ && len(b) == 2:
		return strconv.Itoa(int(binary.BigEndian.Uint16(b)))
	case f.typeID == typeInteger && len(b) == 4:
		return strconv.FormatUint(uint64(binary.NativeEndian.Uint32(b)), 10) // numgen writes host order
	}
	return "0x" + hex.EncodeToString(b)
}

// typeName is a datatype's name as nft spells it.
func typeName(id uint32) string {
	switch id {
	case typeIPv4:
		return "ipv4_addr"
	case typeIPv6:
		return "ipv6_addr"
	case typeInetProt:
		return "inet_proto"
	case typeInetServ:
		return "inet_service"
	case typeInteger:
		return "integer"
	case typeVerdict:
		return "verdict"
	}
	return fmt.Sprintf("type-%d", id)
}

// typeString renders a set's type: "ipv4_addr . inet_service : verdict".
func (s setInfo) typeString() string {
	part := func(id uint32) string {
		var names []string
		for x := id; x != 0; x >>= 6 {
			names = append([]string{typeName(x & 0x3f)}, names...)
		}
		if len(names) <= 1 {
			return typeName(id)
		}
		return strings.Join(names, " . ")
	}
	t := part(s.keyType)
	if s.isMap() {
		if s.dataType == typeVerdict {
			t += " : verdict"
		} else {
			t += " : " + part(s.dataType)
		}
	}
	return t
}
