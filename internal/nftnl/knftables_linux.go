package nftnl

import (
	"context"
	"errors"
	"fmt"
	"syscall"

	"sigs.k8s.io/knftables"
)

// Interface is what cni/hostport and overlay/egress program their table
// through: a Conn (the agent: netlink), or a knftables.Interface made one
// by Knftables (knftables' Fake in unit tests; knftables.New, which runs
// nft, to compare with what nft writes).
type Interface interface {
	// NewTx returns an empty transaction for Run.
	NewTx() *Tx
	// Run commits tx atomically: all of it or nothing.
	Run(ctx context.Context, tx *Tx) error
	// List returns the names of the table's objects of one type
	// ("chain", "set" or "map"; plurals accepted), anonymous sets left
	// out, or an error for which IsNotFound holds if there is no table.
	List(ctx context.Context, objectType string) ([]string, error)
	// ListElements returns the elements of the set or map name
	// (objectType "set" or "map"), the fields of a concatenation apart,
	// with their comments; IsNotFound if there is no such set.
	ListElements(ctx context.Context, objectType, name string) ([]*knftables.Element, error)
	// ListRules returns the rules of chain, in order, as their handles
	// and comments (their expressions are not read back); IsNotFound if
	// there is no such chain.
	ListRules(ctx context.Context, chain string) ([]Rule, error)
}

// Rule is a rule as ListRules returns it.
type Rule struct {
	Handle uint64
	// Comment is the rule's comment, "" if it has none.
	Comment string
}

// IsNotFound tells whether err says an object (or the table) is missing:
// from the kernel (ENOENT) or from knftables.
func IsNotFound(err error) bool {
	return knftables.IsNotFound(err) || errors.Is(err, syscall.ENOENT)
}

// Knftables returns nft, an Interface bound to family inet and table,
// as an Interface: its transactions are recorded and replayed into
// knftables transactions.
func Knftables(nft knftables.Interface, table string) Interface {
	return knftablesInterface{nft: nft, table: table}
}

type knftablesInterface struct {
	nft   knftables.Interface
	table string
}

func (k knftablesInterface) NewTx() *Tx { return NewRecording(k.table) }

func (k knftablesInterface) Run(ctx context.Context, tx *Tx) error {
	switch {
	case tx.enc != nil:
		return errors.New("nftnl: a netlink transaction run through knftables")
	case tx.ran:
		return errors.New("nftnl: the transaction already ran")
	}
	tx.ran = true
	if tx.err != nil {
		return tx.err
	}
	return k.nft.Run(ctx, tx.Knftables(k.nft))
}

func (k knftablesInterface) List(ctx context.Context, objectType string) ([]string, error) {
	return k.nft.List(ctx, objectType)
}

func (k knftablesInterface) ListElements(ctx context.Context, objectType, name string) ([]*knftables.Element, error) {
	return k.nft.ListElements(ctx, objectType, name)
}

func (k knftablesInterface) ListRules(ctx context.Context, chain string) ([]Rule, error) {
	rules, err := k.nft.ListRules(ctx, chain)
	if err != nil {
		return nil, err
	}
	out := make([]Rule, 0, len(rules))
	for _, r := range rules {
		var x Rule
		if r.Handle == nil {
			return nil, fmt.Errorf("knftables listed a rule of chain %s without a handle", chain)
		}
		x.Handle = uint64(*r.Handle)
		if r.Comment != nil {
			x.Comment = *r.Comment
		}
		out = append(out, x)
	}
	return out, nil
}
