package nftables

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"syscall"

	"sigs.k8s.io/knftables"
)

// txVerb is what a transaction does to an object.
type txVerb uint8

const (
	verbAdd txVerb = iota
	verbDelete
	verbFlush
)

// txn is one atomic nftables transaction as the backend builds it: a
// sequence of knftables objects (used as plain descriptions; knftables
// runs nothing here). A recording txn keeps the operations, for
// knftables (tests, nodenetctl render) and for text; a streaming txn
// hands each operation to a sink as it is added (the netlink encoder),
// so a full sync never holds its plan as objects. The first error of the
// sink is kept and reported when the transaction runs.
type txn struct {
	n    int
	ops  []txOp
	sink func(txVerb, knftables.Object) error
	enc  *encoder // the sink's, for netlinkTransport.run
	err  error
}

type txOp struct {
	verb txVerb
	obj  knftables.Object
}

func (t *txn) op(v txVerb, o knftables.Object) {
	t.n++
	if t.sink == nil {
		t.ops = append(t.ops, txOp{v, o})
		return
	}
	if t.err == nil {
		t.err = t.sink(v, o)
	}
}

// Add adds o (nft's "add": no error if it exists).
func (t *txn) Add(o knftables.Object) { t.op(verbAdd, o) }

// Delete deletes o.
func (t *txn) Delete(o knftables.Object) { t.op(verbDelete, o) }

// Flush empties a chain or set.
func (t *txn) Flush(o knftables.Object) { t.op(verbFlush, o) }

// elem adds (or, with del, deletes) a set or map element: straight to
// the encoder when streaming, without an object per element.
func (t *txn) elem(del bool, e element, isMap bool) {
	if t.sink == nil {
		v := verbAdd
		if del {
			v, e.value = verbDelete, ""
		}
		t.op(v, newElement(e.set, e.key, e.value, isMap))
		return
	}
	t.n++
	if t.err == nil {
		t.err = t.enc.element(del, e.set, e.key, e.value)
	}
}

// NumOperations is the number of operations added.
func (t *txn) NumOperations() int { return t.n }

// knftables copies a recording txn into a knftables transaction of nft.
func (t *txn) knftables(nft knftables.Interface) *knftables.Transaction {
	tx := nft.NewTransaction()
	for _, o := range t.ops {
		switch o.verb {
		case verbAdd:
			tx.Add(o.obj)
		case verbDelete:
			tx.Delete(o.obj)
		case verbFlush:
			tx.Flush(o.obj)
		}
	}
	return tx
}

// textNFT renders transactions as nft text; it runs nothing.
var textNFT = knftables.NewFake(knftables.InetFamily, TableName)

// String renders a recording txn as the nft commands it stands for.
func (t *txn) String() string {
	if t.sink != nil {
		return fmt.Sprintf("(%d operations, streamed)", t.n)
	}
	return t.knftables(textNFT).String()
}

// transport programs nodenet's table: netlink from inside the process
// in production, knftables (its Fake in tests) when Options.NFT is set.
type transport interface {
	// newTxn returns an empty transaction for run.
	newTxn() *txn
	// run commits tx atomically: all of it or nothing.
	run(ctx context.Context, tx *txn) error
	// list returns the names of the table's chains, sets and maps under
	// "chain", "set" and "map" (anonymous sets left out), or an error
	// for which isNotFound holds if there is no table.
	list(ctx context.Context) (map[string][]string, error)
}

// isNotFound tells whether err says an object (or the table) is missing.
func isNotFound(err error) bool {
	return knftables.IsNotFound(err) || errors.Is(err, syscall.ENOENT)
}

// knftablesTransport runs transactions through a knftables.Interface.
type knftablesTransport struct{ nft knftables.Interface }

func (k knftablesTransport) newTxn() *txn { return &txn{} }

func (k knftablesTransport) run(ctx context.Context, tx *txn) error {
	return k.nft.Run(ctx, tx.knftables(k.nft))
}

func (k knftablesTransport) list(ctx context.Context) (map[string][]string, error) {
	listed, err := k.nft.ListAll(ctx)
	if err != nil && !knftables.IsNotFound(err) {
		// knftables' netlink lister fails on a missing table with an
		// error that does not say so, but lists no chain in it.
		if chains, cerr := k.nft.List(ctx, "chains"); cerr == nil && len(chains) == 0 {
			return nil, syscall.ENOENT
		}
	}
	if err != nil {
		return nil, err
	}
	out := map[string][]string{}
	for typ, names := range listed {
		if typ == "table" {
			continue
		}
		for _, name := range names {
			// Netlink lists the anonymous sets of rules ("{ a, b }") as
			// __set<n>.
			if (typ == "set" || typ == "map") && strings.HasPrefix(name, "__") {
				continue
			}
			out[typ] = append(out[typ], name)
		}
	}
	return out, nil
}
