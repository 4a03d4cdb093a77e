package nftables

import (
	"context"
	"encoding/binary"
	"fmt"
	"net/netip"
	"strconv"
	"time"

	"github.com/google/nftables/expr"
	"golang.org/x/sys/unix"
	"sigs.k8s.io/knftables"
)

// netlinkTransport programs the table over a NETLINK_NETFILTER socket of
// this process: no nft process, no text.
type netlinkTransport struct {
	sock *nlSocket
	// types are the declared types of the sets and maps whose elements
	// the backend writes (the skeleton's), by name: an element's key
	// and value are encoded by them.
	types map[string]*setType
}

func newNetlinkTransport() (*netlinkTransport, error) {
	s, err := openNetlink()
	if err != nil {
		return nil, err
	}
	return &netlinkTransport{sock: s, types: map[string]*setType{}}, nil
}

// learn records the types of the sets and maps tx declares.
func (n *netlinkTransport) learn(tx *txn) error {
	for _, o := range tx.ops {
		if o.verb != verbAdd {
			continue
		}
		switch o := o.obj.(type) {
		case *knftables.Set:
			st, err := parseSetType(o.Type, o.TypeOf, false)
			if err != nil {
				return fmt.Errorf("set %s: %w", o.Name, err)
			}
			st.interval = hasFlag(o.Flags, knftables.IntervalFlag)
			n.types[o.Name] = st
		case *knftables.Map:
			st, err := parseSetType(o.Type, o.TypeOf, true)
			if err != nil {
				return fmt.Errorf("map %s: %w", o.Name, err)
			}
			n.types[o.Name] = st
		}
	}
	return nil
}

func hasFlag(fs []knftables.SetFlag, f knftables.SetFlag) bool {
	for _, x := range fs {
		if x == f {
			return true
		}
	}
	return false
}

func (n *netlinkTransport) newTxn() *txn {
	e := &encoder{t: n, b: newBatch(n.sock.seq + 1), groups: map[groupKey]*elemGroup{}}
	return &txn{sink: e.add, enc: e}
}

func (n *netlinkTransport) run(ctx context.Context, tx *txn) error {
	e := tx.enc
	if tx.err != nil {
		e.b.release()
		return tx.err
	}
	e.flushGroups()
	e.b.finish()
	err := n.sock.send(ctx, e.b)
	e.b.release()
	tx.enc = nil // the batch's buffers go with it
	return err
}

// list dumps the table's chains and sets (nf_tables GETCHAIN and GETSET
// dumps; the kernel dumps every table of the family, so the table is
// checked here).
func (n *netlinkTransport) list(ctx context.Context) (map[string][]string, error) {
	var m msgBuf
	m.str(unix.NFTA_TABLE_NAME, TableName)
	if err := n.sock.request(ctx, unix.NFT_MSG_GETTABLE, 0, m.b, func([]byte) {}); err != nil {
		return nil, err
	}
	out := map[string][]string{}
	m = msgBuf{}
	m.str(unix.NFTA_CHAIN_TABLE, TableName)
	err := n.sock.request(ctx, unix.NFT_MSG_GETCHAIN, unix.NLM_F_DUMP, m.b, func(b []byte) {
		var table, name string
		attrs(b, func(typ uint16, data []byte) {
			switch typ {
			case unix.NFTA_CHAIN_TABLE:
				table = string(trimNul(data))
			case unix.NFTA_CHAIN_NAME:
				name = string(trimNul(data))
			}
		})
		if table == TableName {
			out["chain"] = append(out["chain"], name)
		}
	})
	if err != nil {
		return nil, err
	}
	m = msgBuf{}
	m.str(unix.NFTA_SET_TABLE, TableName)
	err = n.sock.request(ctx, unix.NFT_MSG_GETSET, unix.NLM_F_DUMP, m.b, func(b []byte) {
		var table, name string
		var flags uint32
		attrs(b, func(typ uint16, data []byte) {
			switch typ {
			case unix.NFTA_SET_TABLE:
				table = string(trimNul(data))
			case unix.NFTA_SET_NAME:
				name = string(trimNul(data))
			case unix.NFTA_SET_FLAGS:
				if len(data) == 4 {
					flags = binary.BigEndian.Uint32(data)
				}
			}
		})
		if table != TableName || flags&unix.NFT_SET_ANONYMOUS != 0 {
			return
		}
		typ := "set"
		if flags&unix.NFT_SET_MAP != 0 {
			typ = "map"
		}
		out[typ] = append(out[typ], name)
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// encoder writes a transaction's operations into a batch as they come.
// Set elements are gathered per set and operation into NEWSETELEM and
// DELSETELEM messages as large as the kernel takes (the element list is
// one attribute, whose length is 16 bits), so a full sync of 100k
// elements is about a hundred messages, not 100k.
type encoder struct {
	t      *netlinkTransport
	b      *batch
	groups map[groupKey]*elemGroup
	order  []groupKey // groups in the order they were opened
	anonID uint32
	m      msgBuf // scratch for one message's attributes
	// rules caches the encoded expressions of rule texts this batch
	// already compiled: a full sync writes the same few texts (a goto to
	// a pick chain, the masquerade mark) thousands of times.
	rules map[string][]byte
}

type groupKey struct {
	set string
	del bool
}

// elemGroup is a NEWSETELEM/DELSETELEM message being filled.
type elemGroup struct {
	m     msgBuf
	list  int // offset of the open element list
	count int
}

func (e *encoder) add(v txVerb, o knftables.Object) error {
	switch o := o.(type) {
	case *knftables.Table:
		return e.table(v, o)
	case *knftables.Chain:
		return e.chain(v, o)
	case *knftables.Rule:
		if v != verbAdd || o.Index != nil || o.Handle != nil {
			return fmt.Errorf("netlink: only appending rules is supported (chain %s)", o.Chain)
		}
		return e.rule(o)
	case *knftables.Set:
		return e.set(v, o.Name, o.Type, o.TypeOf, false, o.Flags, o.Timeout, o.Comment)
	case *knftables.Map:
		return e.set(v, o.Name, o.Type, o.TypeOf, true, o.Flags, o.Timeout, o.Comment)
	case *knftables.Element:
		if v == verbFlush {
			return fmt.Errorf("netlink: cannot flush an element")
		}
		name := o.Set
		if o.Map != "" {
			name = o.Map
		}
		if len(o.Key) != 1 || len(o.Value) > 1 {
			return fmt.Errorf("netlink: element of %s: want one key and at most one value string", name)
		}
		value := ""
		if len(o.Value) == 1 {
			value = o.Value[0]
		}
		return e.element(v == verbDelete, name, o.Key[0], value)
	}
	return fmt.Errorf("netlink: unsupported object %T", o)
}

func (e *encoder) reset() *msgBuf {
	e.m.b = e.m.b[:0]
	return &e.m
}

func (e *encoder) table(v txVerb, o *knftables.Table) error {
	m := e.reset()
	m.str(unix.NFTA_TABLE_NAME, TableName)
	switch v {
	case verbAdd:
		m.u32(unix.NFTA_TABLE_FLAGS, 0)
		if o.Comment != nil {
			m.attr(nftaTableUserdata, udataTLV(nil, 0, append([]byte(*o.Comment), 0))) // NFTNL_UDATA_TABLE_COMMENT
		}
		e.b.nft(unix.NFT_MSG_NEWTABLE, unix.NLM_F_CREATE, m.b, TableName)
	case verbDelete:
		e.flushGroups()
		e.b.nft(unix.NFT_MSG_DELTABLE, 0, m.b, TableName)
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

func (e *encoder) chain(v txVerb, o *knftables.Chain) error {
	m := e.reset()
	switch v {
	case verbAdd:
		m.str(unix.NFTA_CHAIN_TABLE, TableName)
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
		e.b.nft(unix.NFT_MSG_NEWCHAIN, unix.NLM_F_CREATE, m.b, o.Name)
	case verbFlush:
		m.str(unix.NFTA_RULE_TABLE, TableName)
		m.str(unix.NFTA_RULE_CHAIN, o.Name)
		e.b.nft(unix.NFT_MSG_DELRULE, 0, m.b, o.Name)
	case verbDelete:
		// Elements may still point at it until their deletion is sent.
		e.flushGroups()
		m.str(unix.NFTA_CHAIN_TABLE, TableName)
		m.str(unix.NFTA_CHAIN_NAME, o.Name)
		e.b.nft(unix.NFT_MSG_DELCHAIN, 0, m.b, o.Name)
	}
	return nil
}

func (e *encoder) rule(o *knftables.Rule) error {
	list, ok := e.rules[o.Rule]
	if !ok {
		exprs, anon, err := compileRule(o.Rule, func() uint32 { e.anonID++; return e.anonID })
		if err != nil {
			return err
		}
		for _, as := range anon {
			e.anonSet(as)
		}
		var lm msgBuf
		for _, x := range exprs {
			data, err := expr.Marshal(unix.NFPROTO_INET, x)
			if err != nil {
				return fmt.Errorf("rule %q: %w", o.Rule, err)
			}
			lm.attr(unix.NFTA_LIST_ELEM|nlaFNested, data)
		}
		list = lm.b
		// A rule with an anonymous set refers to it by its id: not
		// reusable.
		if len(anon) == 0 {
			if e.rules == nil {
				e.rules = map[string][]byte{}
			}
			e.rules[o.Rule] = list
		}
	}
	m := e.reset()
	m.str(unix.NFTA_RULE_TABLE, TableName)
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
	m.str(unix.NFTA_SET_TABLE, TableName)
	m.str(unix.NFTA_SET_NAME, "__set%d")
	m.u32(unix.NFTA_SET_FLAGS, flags)
	m.u32(unix.NFTA_SET_KEY_TYPE, key.typeID)
	m.u32(unix.NFTA_SET_KEY_LEN, uint32(key.len))
	m.u32(unix.NFTA_SET_ID, as.id)
	m.attr(unix.NFTA_SET_USERDATA, udataU32(nil, 0, 2))
	e.b.nft(unix.NFT_MSG_NEWSET, unix.NLM_F_CREATE, m.b, "(anonymous)")

	m = e.reset()
	m.str(unix.NFTA_SET_ELEM_LIST_TABLE, TableName)
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

func (e *encoder) set(v txVerb, name, typ, typeOf string, isMap bool, flags []knftables.SetFlag, timeout *time.Duration, comment *string) error {
	m := e.reset()
	switch v {
	case verbFlush:
		// A DELSETELEM without elements flushes the set; what is
		// pending for it goes first.
		e.flushSet(name)
		m.str(unix.NFTA_SET_ELEM_LIST_TABLE, TableName)
		m.str(unix.NFTA_SET_ELEM_LIST_SET, name)
		e.b.nft(unix.NFT_MSG_DELSETELEM, 0, m.b, name+" (flush)")
		return nil
	case verbDelete:
		e.flushSet(name)
		m.str(unix.NFTA_SET_TABLE, TableName)
		m.str(unix.NFTA_SET_NAME, name)
		e.b.nft(unix.NFT_MSG_DELSET, 0, m.b, name)
		return nil
	}
	st, err := parseSetType(typ, typeOf, isMap)
	if err != nil {
		return fmt.Errorf("netlink: set %s: %w", name, err)
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
	m.str(unix.NFTA_SET_TABLE, TableName)
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
	e.b.nft(unix.NFT_MSG_NEWSET, unix.NLM_F_CREATE, m.b, name)
	return nil
}

// element adds (or deletes) one element to its set's open message.
func (e *encoder) element(del bool, name, key, value string) error {
	st := e.t.types[name]
	if st == nil {
		return fmt.Errorf("netlink: element of %s: not a set this backend declares", name)
	}
	// Deleting then adding a key (a changed value) must stay in order.
	if other := e.groups[groupKey{name, !del}]; other != nil && other.count > 0 {
		e.emitGroup(groupKey{name, !del})
	}
	k := groupKey{name, del}
	g := e.groups[k]
	if g == nil {
		g = &elemGroup{}
		e.groups[k] = g
	}
	if g.count == 0 {
		g.m.b = g.m.b[:0]
		g.m.str(unix.NFTA_SET_ELEM_LIST_TABLE, TableName)
		g.m.str(unix.NFTA_SET_ELEM_LIST_SET, name)
		g.list = g.m.begin(unix.NFTA_SET_ELEM_LIST_ELEMENTS)
		e.order = append(e.order, k)
	}
	if err := encodeElement(&g.m, st, key, value, del); err != nil {
		return fmt.Errorf("netlink: element of %s: %w", name, err)
	}
	g.count++
	if len(g.m.b)-g.list > elemListMax {
		e.emitGroup(k)
	}
	return nil
}

func encodeElement(m *msgBuf, st *setType, key, value string, del bool) error {
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
	if k.del {
		msg, flags = unix.NFT_MSG_DELSETELEM, 0
	}
	e.b.nft(msg, flags, g.m.b, k.set)
	g.count = 0
}

// flushSet emits what is pending for one set.
func (e *encoder) flushSet(name string) {
	e.emitGroup(groupKey{name, true})
	e.emitGroup(groupKey{name, false})
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
