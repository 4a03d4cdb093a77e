package nftnl

import (
	"fmt"

	"sigs.k8s.io/knftables"
)

// Verb is what a transaction does to an object.
type Verb uint8

const (
	// VerbAdd adds an object, or keeps it if it is there (nft add); a
	// rule is appended to its chain.
	VerbAdd Verb = iota
	// VerbCreate adds an object that must not be there (nft create).
	VerbCreate
	// VerbDelete deletes an object that must be there (nft delete).
	VerbDelete
	// VerbFlush empties a chain or set (nft flush).
	VerbFlush
)

// Op is one operation of a recorded transaction.
type Op struct {
	Verb Verb
	Obj  knftables.Object
}

// Tx is one atomic transaction on a table: a sequence of knftables
// objects used as plain descriptions (knftables runs nothing here). A
// Conn's Tx is streamed: each operation is encoded into the netlink batch
// as it is added, so a large transaction never exists as objects. A
// recorded Tx (NewRecording, or a Knftables Interface's) keeps the
// operations, for knftables (its Fake in tests) and for text. The first
// error of an operation is kept and reported when the transaction runs,
// as knftables does.
type Tx struct {
	table string
	n     int
	ops   []Op
	enc   *encoder // a streamed Tx's
	err   error
	ran   bool
}

// NewRecording returns an empty recorded transaction on table: it runs
// through a Knftables Interface or a Conn, and prints as nft commands.
func NewRecording(table string) *Tx { return &Tx{table: table} }

func (t *Tx) op(v Verb, o knftables.Object) {
	t.n++
	if t.enc == nil {
		t.ops = append(t.ops, Op{v, o})
		return
	}
	if t.err == nil {
		t.err = t.enc.add(v, o)
	}
}

// Add adds o (nft's "add": no error if it exists; a rule is appended).
func (t *Tx) Add(o knftables.Object) { t.op(VerbAdd, o) }

// Create adds o, which must not exist yet (nft's "create").
func (t *Tx) Create(o knftables.Object) { t.op(VerbCreate, o) }

// Delete deletes o, which must exist.
func (t *Tx) Delete(o knftables.Object) { t.op(VerbDelete, o) }

// Flush empties a chain or set.
func (t *Tx) Flush(o knftables.Object) { t.op(VerbFlush, o) }

// Element adds (or, with del, deletes) the element of set with key and
// value as nft spells them (one string each, concatenations joined with
// " . "; value "" for a set): straight into the batch of a streamed Tx,
// without an object per element.
func (t *Tx) Element(del bool, set, key, value string, isMap bool) {
	if t.enc == nil {
		v := VerbAdd
		if del {
			v, value = VerbDelete, ""
		}
		t.op(v, newElement(set, key, value, isMap))
		return
	}
	t.n++
	if t.err == nil {
		op := elemAdd
		if del {
			op = elemDelete
		}
		t.err = t.enc.element(op, set, key, value, "")
	}
}

// newElement returns the element of set with key and value.
func newElement(set, key, value string, isMap bool) *knftables.Element {
	e := &knftables.Element{Key: []string{key}}
	if isMap {
		e.Map = set
		if value != "" {
			e.Value = []string{value}
		}
	} else {
		e.Set = set
	}
	return e
}

// NumOperations is the number of operations added.
func (t *Tx) NumOperations() int { return t.n }

// Err is the first error of an operation added so far.
func (t *Tx) Err() error { return t.err }

// Ops returns a recorded transaction's operations (nil for a streamed
// one).
func (t *Tx) Ops() []Op { return t.ops }

// Knftables copies a recorded transaction into a knftables transaction
// of nft.
func (t *Tx) Knftables(nft knftables.Interface) *knftables.Transaction {
	tx := nft.NewTransaction()
	for _, o := range t.ops {
		switch o.Verb {
		case VerbAdd:
			tx.Add(o.Obj)
		case VerbCreate:
			tx.Create(o.Obj)
		case VerbDelete:
			tx.Delete(o.Obj)
		case VerbFlush:
			tx.Flush(o.Obj)
		}
	}
	return tx
}

// String renders a recorded transaction as the nft commands it stands
// for; it runs nothing.
func (t *Tx) String() string {
	if t.enc != nil {
		return fmt.Sprintf("(%d operations, streamed)", t.n)
	}
	return t.Knftables(knftables.NewFake(knftables.InetFamily, t.table)).String()
}

// Discard finishes encoding a streamed transaction and drops it unsent,
// reporting the size of its batch: what a benchmark of the encoding
// measures. The transaction cannot run after it.
func (t *Tx) Discard() (messages, bytes int, err error) {
	if t.enc == nil {
		return 0, 0, fmt.Errorf("nftnl: Discard of a recorded transaction")
	}
	e := t.enc
	t.enc, t.ran = nil, true
	defer e.b.release()
	if t.err != nil {
		return 0, 0, t.err
	}
	e.flushGroups()
	e.b.finish()
	return e.b.n, e.b.bytes(), nil
}
