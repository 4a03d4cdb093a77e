package nftnl

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"sigs.k8s.io/knftables"
)

// Conn programs and lists one table of the inet family over a
// NETLINK_NETFILTER socket of this process, bound to the network
// namespace Open ran in: no nft process, no text parsed by anyone. It is
// safe for concurrent use; the kernel orders its transactions.
type Conn struct {
	table string
	sock  *socket

	mu sync.Mutex
	// types are the types of the sets and maps whose elements may be
	// written, by name (an element's key and value are encoded by them):
	// declared, or added by a committed transaction and not deleted since.
	types map[string]*setType
}

var _ Interface = (*Conn)(nil)

// Open opens a netlink socket in the caller's network namespace (that of
// its OS thread: see internal/nsexec to open one elsewhere) for table
// inet <table>. It touches no table. Writing needs CAP_NET_ADMIN there.
func Open(table string) (*Conn, error) {
	if table == "" {
		return nil, errors.New("nftnl: no table name")
	}
	s, err := openNetlink()
	if err != nil {
		return nil, err
	}
	return &Conn{table: table, sock: s, types: map[string]*setType{}}, nil
}

// Table is the name of the Conn's table.
func (c *Conn) Table() string { return c.table }

// Close closes the socket. A Conn dropped without Close closes it when
// collected.
func (c *Conn) Close() error { return c.sock.close() }

// Declare records the types of the sets and maps among objs (other
// objects are ignored), so that their elements can be written in a
// transaction that does not add them: sets an earlier run of the agent
// made. A committed transaction that adds a set or map declares it too,
// and one that deletes it (or the table) forgets it.
func (c *Conn) Declare(objs ...knftables.Object) error {
	for _, o := range objs {
		var name string
		var st *setType
		var err error
		switch o := o.(type) {
		case *knftables.Set:
			name = o.Name
			st, err = declaredType(o.Name, o.Type, o.TypeOf, false, o.Flags)
		case *knftables.Map:
			name = o.Name
			st, err = declaredType(o.Name, o.Type, o.TypeOf, true, o.Flags)
		default:
			continue
		}
		if err != nil {
			return fmt.Errorf("nftnl: %w", err)
		}
		c.learn(name, st)
	}
	return nil
}

// declaredType is the type of a set or map as knftables declares it.
func declaredType(name, typ, typeOf string, isMap bool, flags []knftables.SetFlag) (*setType, error) {
	st, err := parseSetType(typ, typeOf, isMap)
	if err != nil {
		kind := "set"
		if isMap {
			kind = "map"
		}
		return nil, fmt.Errorf("%s %s: %w", kind, name, err)
	}
	for _, f := range flags {
		if f == knftables.IntervalFlag {
			st.interval = true
		}
	}
	return st, nil
}

func (c *Conn) learn(name string, st *setType) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.types[name] = st
}

func (c *Conn) typeOf(name string) *setType {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.types[name]
}

// commit takes on the set types a committed batch added and deleted.
func (c *Conn) commit(e *encoder) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e.dropAll {
		clear(c.types)
	}
	for name, st := range e.types {
		if st == nil {
			delete(c.types, name)
		} else {
			c.types[name] = st
		}
	}
}

// NewTx returns an empty streamed transaction for Run.
func (c *Conn) NewTx() *Tx {
	return &Tx{table: c.table, enc: newEncoder(c)}
}

// Run commits tx atomically: all of it or, if the kernel refuses any
// part, none. It sends the whole transaction as one batch with one
// sendmsg and waits for the kernel's one answer (or the errors of the
// messages that failed: the first is returned as an *Error naming its
// object). tx is a Tx of c, or a recorded one; it runs once.
func (c *Conn) Run(ctx context.Context, tx *Tx) error {
	if tx.ran {
		return errors.New("nftnl: the transaction already ran")
	}
	tx.ran = true
	e := tx.enc
	tx.enc = nil // the batch's buffers go with it
	switch {
	case e == nil:
		if tx.err != nil {
			return tx.err
		}
		e = newEncoder(c)
		for _, o := range tx.ops {
			if err := e.add(o.Verb, o.Obj); err != nil {
				e.b.release()
				return err
			}
		}
	case e.c != c:
		e.b.release()
		return errors.New("nftnl: a transaction of another connection")
	case tx.err != nil:
		e.b.release()
		return tx.err
	}
	e.flushGroups()
	e.b.finish()
	err := c.sock.send(ctx, e.b)
	e.b.release()
	if err == nil {
		c.commit(e)
	}
	return err
}
