package nftnl

import (
	"fmt"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"github.com/google/nftables/expr"
	"golang.org/x/sys/unix"
	"sigs.k8s.io/knftables"
)

// encoder writes a transaction's operations into a batch as they come.
// Set elements are gathered per set and operation into NEWSETELEM and
// DELSETELEM messages as large as the kernel takes (the element list is
// one attribute, whose length is 16 bits), so a full proxy sync of 100k
// elements is about a hundred messages, not 100k.
type encoder struct {
	c      *Conn
	table  string
	b      *batch
	groups map[groupKey]*elemGroup
	order  []groupKey // groups in the order they were opened
	anonID uint32
	m      msgBuf // scratch for one message's attributes
	// rules caches the encoded expressions of rule texts this batch
	// already compiled: a full sync writes the same few texts (a goto to
	// a pick chain, the masquerade mark) thousands of times.
	rules map[string][]byte
	// types are the sets and maps this batch adds (their types) and
	// deletes (nil); dropAll says it deletes the table. The Conn takes
	// them on once the batch is committed.
	types   map[string]*setType
	dropAll bool
	// cache holds the Conn's set types this batch used.
	cache map[string]*setType
}

func newEncoder(c *Conn) *encoder {
	return &encoder{c: c, table: c.table, b: newBatch(), groups: map[groupKey]*elemGroup{},
		types: map[string]*setType{}, cache: map[string]*setType{}}
}

// elemOp is what a NEWSETELEM/DELSETELEM message does to its elements.
type elemOp uint8

const (
	elemAdd    elemOp = iota // add, or keep
	elemCreate               // add, or fail if the key is there (NLM_F_EXCL)
	elemDelete
)

type groupKey struct {
	set string
	op  elemOp
}

// elemGroup is a NEWSETELEM/DELSETELEM message being filled.
type elemGroup struct {
	m     msgBuf
	list  int // offset of the open element list
	count int
}

// createFlags are the netlink flags of an add (or, with VerbCreate, a
// create) of a table, chain or set.
func createFlags(v Verb) uint16 {
	if v == VerbCreate {
		return unix.NLM_F_CREATE | unix.NLM_F_EXCL
	}
	return unix.NLM_F_CREATE
}

func (e *encoder) add(v Verb, o knftables.Object) error {
	if err := e.owns(o); err != nil {
		return err
	}
	switch o := o.(type) {
	case *knftables.Table:
		return e.tableOp(v, o)
	case *knftables.Chain:
		return e.chain(v, o)
	case *knftables.Rule:
		switch {
		case v == VerbDelete && o.Handle != nil:
			return e.deleteRule(o)
		case (v == VerbAdd || v == VerbCreate) && o.Index == nil && o.Handle == nil:
			return e.rule(o)
		}
		return fmt.Errorf("netlink: rule of chain %s: only appending rules, and deleting them by handle, is supported", o.Chain)
	case *knftables.Set:
		return e.set(v, o.Name, o.Type, o.TypeOf, false, o.Flags, o.Timeout, o.Comment)
	case *knftables.Map:
		return e.set(v, o.Name, o.Type, o.TypeOf, true, o.Flags, o.Timeout, o.Comment)
	case *knftables.Element:
		name := o.Set
		if o.Map != "" {
			name = o.Map
		}
		if len(o.Key) == 0 {
			return fmt.Errorf("netlink: element of %s without a key", name)
		}
		op := elemAdd
		switch v {
		case VerbCreate:
			op = elemCreate
		case VerbDelete:
			op = elemDelete
		case VerbFlush:
			return fmt.Errorf("netlink: cannot flush an element")
		}
		comment := ""
		if o.Comment != nil && op != elemDelete {
			comment = *o.Comment
		}
		// knftables keeps the fields of a concatenation apart; nft text
		// joins them.
		return e.element(op, name, strings.Join(o.Key, " . "), strings.Join(o.Value, " . "), comment)
	}
	return fmt.Errorf("netlink: unsupported object %T", o)
}

// owns refuses an object that names another family or table than the
// encoder's (knftables' Interface refuses those too).
func (e *encoder) owns(o knftables.Object) error {
	var fam knftables.Family
	var table string
	switch o := o.(type) {
	case *knftables.Table:
		fam, table = o.Family, o.Name
	case *knftables.Chain:
		fam, table = o.Family, o.Table
	case *knftables.Rule:
		fam, table = o.Family, o.Table
	case *knftables.Set:
		fam, table = o.Family, o.Table
	case *knftables.Map:
		fam, table = o.Family, o.Table
	case *knftables.Element:
		fam, table = o.Family, o.Table
	}
	if fam != "" && fam != knftables.InetFamily {
		return fmt.Errorf("netlink: object of family %s: this connection programs table inet %s", fam, e.table)
	}
	if table != "" && table != e.table {
		return fmt.Errorf("netlink: object of table %s: this connection programs table inet %s", table, e.table)
	}
	return nil
}

func (e *encoder) reset() *msgBuf {
	e.m.b = e.m.b[:0]
	return &e.m
}

func (e *encoder) tableOp(v Verb, o *knftables.Table) error {
	m := e.reset()
	m.str(unix.NFTA_TABLE_NAME, e.table)
	switch v {
	case VerbAdd, VerbCreate:
		m.u32(unix.NFTA_TABLE_FLAGS, 0)
		if o.Comment != nil {
			m.attr(nftaTableUserdata, udataTLV(nil, 0, append([]byte(*o.Comment), 0))) // NFTNL_UDATA_TABLE_COMMENT
		}
		e.b.nft(unix.NFT_MSG_NEWTABLE, createFlags(v), m.b, e.table)
	case VerbDelete:
		e.flushGroups()
		e.b.nft(unix.NFT_MSG_DELTABLE, 0, m.b, e.table)
		e.dropAll = true
		clear(e.types)
	default:
		return fmt.Errorf("netlink: cannot flush the table")
	}
	return nil
}

// Attributes x/sys/unix does not name (include/uapi/linux/netfilter/
// nf_tables.h).
const (
	nftaTableUserdata = 6
	nftaChainUserdata = 12
)

var hooks = map[knftables.BaseChainHook]uint32{
	knftables.PreroutingHook:  unix.NF_INET_PRE_ROUTING,
	knftables.InputHook:       unix.NF_INET_LOCAL_IN,
	knftables.ForwardHook:     unix.NF_INET_FORWARD,
	knftables.OutputHook:      unix.NF_INET_LOCAL_OUT,
	knftables.PostroutingHook: unix.NF_INET_POST_ROUTING,
}

func (e *encoder) chain(v Verb, o *knftables.Chain) error {
	m := e.reset()
	switch v {
	case VerbAdd, VerbCreate:
		m.str(unix.NFTA_CHAIN_TABLE, e.table)
		m.str(unix.NFTA_CHAIN_NAME, o.Name)
		if o.Hook != nil {
			hook, ok := hooks[*o.Hook]
			if !ok || o.Type == nil || o.Priority == nil {
				return fmt.Errorf("netlink: base chain %s: want a type, a known hook and a priority", o.Name)
			}
			prio, err := strconv.Atoi(string(*o.Priority))
			if err != nil {
				return fmt.Errorf("netlink: base chain %s: priority %q is not a number", o.Name, *o.Priority)
			}
			h := m.begin(unix.NFTA_CHAIN_HOOK)
			m.u32(unix.NFTA_HOOK_HOOKNUM, hook)
			m.u32(unix.NFTA_HOOK_PRIORITY, uint32(int32(prio)))
			m.end(h)
			m.str(unix.NFTA_CHAIN_TYPE, string(*o.Type))
		}
		if o.Comment != nil {
			m.attr(nftaChainUserdata, udataTLV(nil, 0, append([]byte(*o.Comment), 0)))
		}
		e.b.nft(unix.NFT_MSG_NEWCHAIN, createFlags(v), m.b, o.Name)
	case VerbFlush:
		m.str(unix.NFTA_RULE_TABLE, e.table)
		m.str(unix.NFTA_RULE_CHAIN, o.Name)
		e.b.nft(unix.NFT_MSG_DELRULE, 0, m.b, o.Name)
	case VerbDelete:
		// Elements may still point at it until their deletion is sent.
		e.flushGroups()
		m.str(unix.NFTA_CHAIN_TABLE, e.table)
		m.str(unix.NFTA_CHAIN_NAME, o.Name)
		e.b.nft(unix.NFT_MSG_DELCHAIN, 0, m.b, o.Name)
	}
	return nil
}

func (e *encoder) rule(o *knftables.Rule) error {
	list, ok := e.rules[o.Rule]
	if !ok {
		r, err := compileRule(o.Rule, func() uint32 { e.anonID++; return e.anonID })
		if err != nil {
			return err
		}
		for _, m := range r.natMaps {
			if err := e.checkNATMap(o.Rule, m); err != nil {
				return err
			}
		}
		for _, as := range r.anon {
			e.anonSet(as)
		}
		var lm msgBuf
		for _, x := range r.exprs {
			data, err := expr.Marshal(unix.NFPROTO_INET, x)
			if err != nil {
				return fmt.Errorf("rule %q: %w", o.Rule, err)
			}
			lm.attr(unix.NFTA_LIST_ELEM|nlaFNested, data)
		}
		list = lm.b
		// A rule with an anonymous set refers to it by its id: not
		// reusable.
		if len(r.anon) == 0 {
			if e.rules == nil {
				e.rules = map[string][]byte{}
			}
			e.rules[o.Rule] = list
		}
	}
	m := e.reset()
	m.str(unix.NFTA_RULE_TABLE, e.table)
	m.str(unix.NFTA_RULE_CHAIN, o.Chain)
	l := m.begin(unix.NFTA_RULE_EXPRESSIONS)
	m.b = append(m.b, list...)
	m.end(l)
	if o.Comment != nil {
		m.attr(unix.NFTA_RULE_USERDATA, udataTLV(nil, 0, append([]byte(*o.Comment), 0))) // NFTNL_UDATA_RULE_COMMENT
	}
	e.b.nft(unix.NFT_MSG_NEWRULE, unix.NLM_F_CREATE|unix.NLM_F_APPEND, m.b, o.Chain)
	return nil
}

// checkNATMap checks that map m, which a "dnat … to <concatenation> map
// @m" rule uses, has address . port values: what that spelling means to
// nft, and what the expressions compiled for it load.
func (e *encoder) checkNATMap(rule, m string) error {
	st := e.setType(m)
	if st == nil {
		return fmt.Errorf("rule %q: map %s is not declared to this connection (add it, or Declare it, first)", rule, m)
	}
	if !st.isMap || st.verdict || len(st.data) != 2 || (st.data[0].typeID != typeIPv4 && st.data[0].typeID != typeIPv6) ||
		st.data[1].typeID != typeInetServ {
		return fmt.Errorf("rule %q: map %s does not map to address . port", rule, m)
	}
	return nil
}

func (e *encoder) deleteRule(o *knftables.Rule) error {
	m := e.reset()
	m.str(unix.NFTA_RULE_TABLE, e.table)
	m.str(unix.NFTA_RULE_CHAIN, o.Chain)
	m.u64(unix.NFTA_RULE_HANDLE, uint64(*o.Handle))
	e.b.nft(unix.NFT_MSG_DELRULE, 0, m.b, fmt.Sprintf("%s (rule handle %d)", o.Chain, *o.Handle))
	return nil
}

// anonSet declares a rule's anonymous set and adds its elements.
func (e *encoder) anonSet(as anonSet) {
	key := keyField{typeID: typeIPv4, len: 4}
	if as.v6 {
		key = keyField{typeID: typeIPv6, len: 16}
	}
	flags := uint32(unix.NFT_SET_ANONYMOUS | unix.NFT_SET_CONSTANT)
	if as.interval {
		flags |= unix.NFT_SET_INTERVAL
	}
	m := e.reset()
	m.str(unix.NFTA_SET_TABLE, e.table)
	m.str(unix.NFTA_SET_NAME, "__set%d")
	m.u32(unix.NFTA_SET_FLAGS, flags)
	m.u32(unix.NFTA_SET_KEY_TYPE, key.typeID)
	m.u32(unix.NFTA_SET_KEY_LEN, uint32(key.len))
	m.u32(unix.NFTA_SET_ID, as.id)
	m.attr(unix.NFTA_SET_USERDATA, udataU32(nil, 0, 2))
	e.b.nft(unix.NFT_MSG_NEWSET, unix.NLM_F_CREATE, m.b, "(anonymous)")

	m = e.reset()
	m.str(unix.NFTA_SET_ELEM_LIST_TABLE, e.table)
	m.str(unix.NFTA_SET_ELEM_LIST_SET, "__set%d")
	m.u32(unix.NFTA_SET_ELEM_LIST_SET_ID, as.id)
	l := m.begin(unix.NFTA_SET_ELEM_LIST_ELEMENTS)
	if as.interval {
		for _, r := range mergeRanges(as.elems) {
			intervalElems(m, r)
		}
	} else {
		for _, p := range as.elems {
			elemKey(m, p.Addr().AsSlice(), nil, 0)
		}
	}
	m.end(l)
	e.b.nft(unix.NFT_MSG_NEWSETELEM, unix.NLM_F_CREATE, m.b, "(anonymous set)")
}

// intervalElems writes a range as an interval set holds it: its start,
// and its end (the first address after it) flagged as such, unless the
// range runs to the end of the address space.
func intervalElems(m *msgBuf, r [2]netip.Addr) {
	elemKey(m, r[0].AsSlice(), nil, 0)
	if r[1].IsValid() {
		elemKey(m, r[1].AsSlice(), nil, unix.NFT_SET_ELEM_INTERVAL_END)
	}
}

// elemKey writes one list element: key, optional value attributes
// (already encoded NFTA_DATA_*), flags.
func elemKey(m *msgBuf, key, data []byte, flags uint32) {
	el := m.begin(unix.NFTA_LIST_ELEM)
	k := m.begin(unix.NFTA_SET_ELEM_KEY)
	m.attr(unix.NFTA_DATA_VALUE, key)
	m.end(k)
	if data != nil {
		d := m.begin(unix.NFTA_SET_ELEM_DATA)
		m.b = append(m.b, data...)
		m.end(d)
	}
	if flags != 0 {
		m.u32(unix.NFTA_SET_ELEM_FLAGS, flags)
	}
	m.end(el)
}

func (e *encoder) set(v Verb, name, typ, typeOf string, isMap bool, flags []knftables.SetFlag, timeout *time.Duration, comment *string) error {
	m := e.reset()
	switch v {
	case VerbFlush:
		// A DELSETELEM without elements flushes the set; what is
		// pending for it goes first.
		e.flushSet(name)
		m.str(unix.NFTA_SET_ELEM_LIST_TABLE, e.table)
		m.str(unix.NFTA_SET_ELEM_LIST_SET, name)
		e.b.nft(unix.NFT_MSG_DELSETELEM, 0, m.b, name+" (flush)")
		return nil
	case VerbDelete:
		e.flushSet(name)
		m.str(unix.NFTA_SET_TABLE, e.table)
		m.str(unix.NFTA_SET_NAME, name)
		e.b.nft(unix.NFT_MSG_DELSET, 0, m.b, name)
		e.types[name] = nil
		return nil
	}
	st, err := declaredType(name, typ, typeOf, isMap, flags)
	if err != nil {
		return fmt.Errorf("netlink: %w", err)
	}
	var f uint32
	if isMap {
		f |= unix.NFT_SET_MAP
	}
	for _, fl := range flags {
		switch fl {
		case knftables.IntervalFlag:
			f |= unix.NFT_SET_INTERVAL
		case knftables.TimeoutFlag:
			f |= unix.NFT_SET_TIMEOUT
		case knftables.DynamicFlag:
			f |= unix.NFT_SET_EVAL
		case knftables.ConstantFlag:
			f |= unix.NFT_SET_CONSTANT
		default:
			return fmt.Errorf("netlink: set %s: unsupported flag %q", name, fl)
		}
	}
	m.str(unix.NFTA_SET_TABLE, e.table)
	m.str(unix.NFTA_SET_NAME, name)
	m.u32(unix.NFTA_SET_FLAGS, f)
	m.u32(unix.NFTA_SET_KEY_TYPE, concatID(st.key))
	m.u32(unix.NFTA_SET_KEY_LEN, uint32(concatLen(st.key)))
	if isMap {
		if st.verdict {
			m.u32(unix.NFTA_SET_DATA_TYPE, typeVerdict)
			m.u32(unix.NFTA_SET_DATA_LEN, 0)
		} else {
			m.u32(unix.NFTA_SET_DATA_TYPE, concatID(st.data))
			m.u32(unix.NFTA_SET_DATA_LEN, uint32(concatLen(st.data)))
		}
	}
	if timeout != nil {
		m.u64(unix.NFTA_SET_TIMEOUT, uint64(timeout.Milliseconds()))
	}
	e.anonID++
	m.u32(unix.NFTA_SET_ID, e.anonID)
	c := ""
	if comment != nil {
		c = *comment
	}
	m.attr(unix.NFTA_SET_USERDATA, st.userdata(c))
	e.b.nft(unix.NFT_MSG_NEWSET, createFlags(v), m.b, name)
	// Its elements, in this transaction and (once it is committed)
	// later ones, are encoded by this type.
	e.types[name] = st
	return nil
}

// setType returns the type of set name: added in this batch, or known to
// the Conn (and not deleted in this batch); or nil.
func (e *encoder) setType(name string) *setType {
	if st, ok := e.types[name]; ok {
		return st
	}
	if e.dropAll {
		return nil
	}
	if st := e.cache[name]; st != nil {
		return st
	}
	st := e.c.typeOf(name)
	if st != nil {
		e.cache[name] = st
	}
	return st
}

// element adds (or creates, or deletes) one element to its set's open
// message.
func (e *encoder) element(op elemOp, name, key, value, comment string) error {
	st := e.setType(name)
	if st == nil {
		return fmt.Errorf("netlink: element of %s: not a set this connection knows (add it, or Declare it, first)", name)
	}
	// Deleting then adding a key (a changed value) must stay in order.
	for _, other := range [...]elemOp{elemAdd, elemCreate, elemDelete} {
		if other == op {
			continue
		}
		if g := e.groups[groupKey{name, other}]; g != nil && g.count > 0 {
			e.emitGroup(groupKey{name, other})
		}
	}
	k := groupKey{name, op}
	g := e.groups[k]
	if g == nil {
		g = &elemGroup{}
		e.groups[k] = g
	}
	if g.count == 0 {
		g.m.b = g.m.b[:0]
		g.m.str(unix.NFTA_SET_ELEM_LIST_TABLE, e.table)
		g.m.str(unix.NFTA_SET_ELEM_LIST_SET, name)
		g.list = g.m.begin(unix.NFTA_SET_ELEM_LIST_ELEMENTS)
		e.order = append(e.order, k)
	}
	if err := encodeElement(&g.m, st, key, value, comment, op == elemDelete); err != nil {
		return fmt.Errorf("netlink: element of %s: %w", name, err)
	}
	g.count++
	if len(g.m.b)-g.list > elemListMax {
		e.emitGroup(k)
	}
	return nil
}

func encodeElement(m *msgBuf, st *setType, key, value, comment string, del bool) error {
	if st.interval {
		p, err := parsePrefixOrAddr(key)
		if err != nil {
			return err
		}
		s, end := prefixRange(p)
		intervalElems(m, [2]netip.Addr{s, end})
		return nil
	}
	// Written in place: a full sync encodes 100k of these.
	at := len(m.b)
	el := m.begin(unix.NFTA_LIST_ELEM)
	k := m.begin(unix.NFTA_SET_ELEM_KEY)
	v := m.open(unix.NFTA_DATA_VALUE)
	var err error
	if m.b, err = appendConcat(m.b, st.key, key); err != nil {
		m.b = m.b[:at]
		return err
	}
	m.end(v)
	m.end(k)
	if st.isMap && !del {
		if value == "" {
			m.b = m.b[:at]
			return fmt.Errorf("%q: no value", key)
		}
		d := m.begin(unix.NFTA_SET_ELEM_DATA)
		if st.verdict {
			code, chain, err := verdictData(value)
			if err != nil {
				m.b = m.b[:at]
				return err
			}
			vb := m.begin(unix.NFTA_DATA_VERDICT)
			m.u32(unix.NFTA_VERDICT_CODE, uint32(code))
			if chain != "" {
				m.str(unix.NFTA_VERDICT_CHAIN, chain)
			}
			m.end(vb)
		} else {
			dv := m.open(unix.NFTA_DATA_VALUE)
			if m.b, err = appendConcat(m.b, st.data, value); err != nil {
				m.b = m.b[:at]
				return err
			}
			m.end(dv)
		}
		m.end(d)
	}
	if comment != "" && !del {
		if len(comment) > knftables.CommentLengthMax {
			m.b = m.b[:at]
			return fmt.Errorf("%q: comment longer than %d bytes", key, knftables.CommentLengthMax)
		}
		m.attr(unix.NFTA_SET_ELEM_USERDATA, udataTLV(nil, 0, append([]byte(comment), 0))) // NFTNL_UDATA_SET_ELEM_COMMENT
	}
	m.end(el)
	return nil
}

// emitGroup closes the group's message and appends it to the batch.
func (e *encoder) emitGroup(k groupKey) {
	g := e.groups[k]
	if g == nil || g.count == 0 {
		return
	}
	g.m.end(g.list)
	msg := unix.NFT_MSG_NEWSETELEM
	var flags uint16 = unix.NLM_F_CREATE
	switch k.op {
	case elemCreate:
		flags |= unix.NLM_F_EXCL
	case elemDelete:
		msg, flags = unix.NFT_MSG_DELSETELEM, 0
	}
	e.b.nft(msg, flags, g.m.b, k.set)
	g.count = 0
}

// flushSet emits what is pending for one set.
func (e *encoder) flushSet(name string) {
	e.emitGroup(groupKey{name, elemDelete})
	e.emitGroup(groupKey{name, elemAdd})
	e.emitGroup(groupKey{name, elemCreate})
}

// flushGroups emits every pending element message, in the order the
// groups were opened, and drops their buffers.
func (e *encoder) flushGroups() {
	for _, k := range e.order {
		e.emitGroup(k)
	}
	e.order = e.order[:0]
	clear(e.groups)
}
