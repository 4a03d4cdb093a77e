package hostport

import (
	"context"
	"fmt"

	"github.com/containernetworking/plugins/pkg/ns"
	"sigs.k8s.io/knftables"
)

// newNFT returns knftables for table in the netns at netnsPath ("" = the
// agent's own). knftables runs the nft binary for every call, and a child
// process starts in the network namespace of the OS thread that forks it;
// so for another netns each call runs on a thread locked into it
// (ns.NetNS.Do), not just the construction.
func newNFT(table, netnsPath string) (knftables.Interface, error) {
	if netnsPath == "" {
		return knftables.New(knftables.InetFamily, table)
	}
	w := &netnsNFT{path: netnsPath}
	err := w.do(func() error {
		var err error
		w.Interface, err = knftables.New(knftables.InetFamily, table)
		return err
	})
	if err != nil {
		return nil, err
	}
	return w, nil
}

// netnsNFT runs every nft command of the Interface it wraps in the netns
// at path.
type netnsNFT struct {
	knftables.Interface
	path string
}

func (n *netnsNFT) do(f func() error) error {
	target, err := ns.GetNS(n.path)
	if err != nil {
		return fmt.Errorf("open netns %s: %w", n.path, err)
	}
	defer target.Close()
	return target.Do(func(ns.NetNS) error { return f() })
}

func (n *netnsNFT) Run(ctx context.Context, tx *knftables.Transaction) error {
	return n.do(func() error { return n.Interface.Run(ctx, tx) })
}

func (n *netnsNFT) Check(ctx context.Context, tx *knftables.Transaction) error {
	return n.do(func() error { return n.Interface.Check(ctx, tx) })
}

func (n *netnsNFT) ListAll(ctx context.Context) (out map[string][]string, err error) {
	err = n.do(func() error { out, err = n.Interface.ListAll(ctx); return err })
	return out, err
}

func (n *netnsNFT) List(ctx context.Context, objectType string) (out []string, err error) {
	err = n.do(func() error { out, err = n.Interface.List(ctx, objectType); return err })
	return out, err
}

func (n *netnsNFT) ListRules(ctx context.Context, chain string) (out []*knftables.Rule, err error) {
	err = n.do(func() error { out, err = n.Interface.ListRules(ctx, chain); return err })
	return out, err
}

func (n *netnsNFT) ListElements(ctx context.Context, objectType, name string) (out []*knftables.Element, err error) {
	err = n.do(func() error { out, err = n.Interface.ListElements(ctx, objectType, name); return err })
	return out, err
}

func (n *netnsNFT) ListCounters(ctx context.Context) (out []*knftables.Counter, err error) {
	err = n.do(func() error { out, err = n.Interface.ListCounters(ctx); return err })
	return out, err
}
