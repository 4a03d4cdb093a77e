package nftables

import (
	"context"
	"strings"
	"syscall"

	"sigs.k8s.io/knftables"

	"github.com/nodenet/nodenet/internal/nftnl"
)

// txn is one atomic nftables transaction as the backend builds it (see
// nftnl.Tx): streamed into a netlink batch on the netlink transport,
// recorded for knftables (tests, nodenetctl render) and for text.
type txn = nftnl.Tx

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
func isNotFound(err error) bool { return nftnl.IsNotFound(err) }

// netlinkTransport programs the table over a netlink socket of this
// process: no nft process, no text.
type netlinkTransport struct{ conn *nftnl.Conn }

func (n netlinkTransport) newTxn() *txn { return n.conn.NewTx() }

func (n netlinkTransport) run(ctx context.Context, tx *txn) error { return n.conn.Run(ctx, tx) }

func (n netlinkTransport) list(ctx context.Context) (map[string][]string, error) {
	return n.conn.ListAll(ctx)
}

// knftablesTransport runs transactions through a knftables.Interface.
type knftablesTransport struct{ nft knftables.Interface }

func (k knftablesTransport) newTxn() *txn { return nftnl.NewRecording(TableName) }

func (k knftablesTransport) run(ctx context.Context, tx *txn) error {
	if err := tx.Err(); err != nil {
		return err
	}
	return k.nft.Run(ctx, tx.Knftables(k.nft))
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
