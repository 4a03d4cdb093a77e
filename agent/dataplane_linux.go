package agent

import (
	"context"
	"fmt"
	"time"

	"k8s.io/klog/v2"

	"github.com/nodenet/nodenet/agent/status"
	"github.com/nodenet/nodenet/cni/hostport"
	"github.com/nodenet/nodenet/cni/vethbridge"
	"github.com/nodenet/nodenet/config"
	"github.com/nodenet/nodenet/internal/nftnl"
	"github.com/nodenet/nodenet/overlay/egress"
	"github.com/nodenet/nodenet/overlay/linuxnet"
	"github.com/nodenet/nodenet/proxy"
	"github.com/nodenet/nodenet/proxy/conntrack"
	"github.com/nodenet/nodenet/proxy/nftables"
	"github.com/nodenet/nodenet/proxy/proxier"
)

// buildLinux builds the Linux dataplane in the agent's own network
// namespace (a host-network pod's: the node's).
func buildLinux(in buildInputs) (*dataplane, error) {
	log := in.logger
	network, err := linuxnet.New(linuxnet.Options{Logger: log})
	if err != nil {
		return nil, fmt.Errorf("linux network: %w", err)
	}
	vethLog := log.WithName("vethbridge")
	veth, err := vethbridge.New(vethbridge.Options{Logger: &vethLog})
	if err != nil {
		network.Close()
		return nil, fmt.Errorf("pod wiring: %w", err)
	}
	hpLog := log.WithName("hostport")
	wiring, err := hostport.New(hostport.Options{Inner: veth, Logger: &hpLog})
	if err != nil {
		network.Close()
		return nil, fmt.Errorf("hostPort wiring: %w", err)
	}
	eg, err := egress.New(egress.Options{Logger: log.WithName("egress")})
	if err != nil {
		network.Close()
		return nil, fmt.Errorf("pod egress: %w", err)
	}
	return &dataplane{
		network:    network,
		wiring:     wiring,
		podEgress:  podEgress(in.cfg, eg),
		newBackend: newNFTablesBackend,
		beforeProxy: func(cfg *config.AgentConfiguration, log klog.Logger) error {
			if err := conntrack.ApplySysctls(conntrackSysctls(cfg.Linux.Conntrack), conntrack.ProcSysNetfilter, log); err != nil {
				return fmt.Errorf("linux.conntrack: %w", err)
			}
			return nil
		},
		dump:             dumpNFTables,
		healthCheckPorts: true,
		close:            network.Close,
	}, nil
}

// newNFTablesBackend is the Linux proxy backend: nftables with conntrack
// cleanup, its transactions observed by the metrics.
func newNFTablesBackend(in backendInputs) (proxy.Backend, error) {
	opts, err := proxier.NFTablesOptions(in.cfg, in.node)
	if err != nil {
		return nil, err
	}
	// No opts.NFT: the backend programs the kernel over netlink itself.
	opts.Conntrack = conntrack.New(conntrack.Options{Logger: in.logger.WithName("conntrack")})
	m := in.metrics
	opts.Observe = func(op string, err error, d time.Duration) { m.ObserveOperation("nftables", op, err, d) }
	opts.Logger = in.logger
	return nftables.New(opts)
}

// dumpTables are the nftables tables the agent owns.
var dumpTables = []string{nftables.TableName, hostport.DefaultTableName, egress.TableName}

// dumpNFTables lists nodenet's nftables tables over netlink, in the
// agent's network namespace: per table its chains (hooks, rule counts,
// rule comments), sets and maps with their elements (nftnl.Conn.Describe;
// `nft list table` shows the rules themselves). It runs no nft: the
// agent's image has none. A table that is missing or cannot be read is
// said so in its section; the dump fails only when ctx ends.
func dumpNFTables(ctx context.Context) ([]status.Section, error) {
	var out []status.Section
	for _, table := range dumpTables {
		text, err := describeTable(ctx, table)
		if err != nil {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			if nftnl.IsNotFound(err) {
				text = "(absent)\n"
			} else {
				text = "(cannot list: " + err.Error() + ")\n"
			}
		}
		out = append(out, status.Section{Title: "nftables table inet " + table, Text: text})
	}
	return out, nil
}

func describeTable(ctx context.Context, table string) (string, error) {
	conn, err := nftnl.Open(table)
	if err != nil {
		return "", err
	}
	defer conn.Close()
	return conn.Describe(ctx)
}
