package main

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"net/netip"
	"slices"
	"strings"
	"time"

	"sigs.k8s.io/knftables"

	"github.com/nodenet/nodenet/config"
	"github.com/nodenet/nodenet/proxy"
	"github.com/nodenet/nodenet/proxy/nftables"
	"github.com/nodenet/nodenet/proxy/proxier"
	"github.com/nodenet/nodenet/proxy/source"
)

// render runs the proxy once over the manifests, with the nftables
// backend writing into knftables' in-memory table, and prints the result.
func render(cfg *config.AgentConfiguration, flags proxyFlags, stdout, stderr io.Writer) int {
	logger := renderLogger(flags.verbose)
	folder := source.NewFolder(source.FilesOptions{Dir: flags.manifests, NodeName: flags.node, Offline: true, Logger: logger})
	if err := folder.Read(); err != nil {
		fmt.Fprintf(stderr, "nodenetctl proxy render: %v\n", err)
		return exitInvalid
	}
	nodeFacts(cfg, &flags, folder.Nodes())
	node := proxier.Node{Name: flags.node}
	for _, s := range flags.nodeIPs {
		node.IPs = append(node.IPs, netip.MustParseAddr(s))
	}
	for _, s := range flags.podCIDRs {
		node.PodCIDRs = append(node.PodCIDRs, netip.MustParsePrefix(s))
	}
	nftOpts, err := proxier.NFTablesOptions(cfg, node)
	if err != nil {
		printProblems(stderr, folder.Problems())
		fmt.Fprintf(stderr, "nodenetctl proxy render: %v (give --node-ip, or an InternalIP on Node %s)\n", err, flags.node)
		return exitInvalid
	}
	fake := knftables.NewFake(knftables.InetFamily, nftables.TableName)
	nftOpts.NFT = fake
	nftOpts.Logger = logger
	backend, err := nftables.New(nftOpts)
	if err != nil {
		fmt.Fprintf(stderr, "nodenetctl proxy render: %v\n", err)
		return exitInvalid
	}
	brainOpts := proxier.BrainOptions(cfg, node)
	brainOpts.Logger = logger
	p, err := proxier.New(proxier.Options{
		Source:     folder.Proxy(),
		Backend:    backend,
		Brain:      brainOpts,
		SyncPeriod: time.Hour,
		Logger:     logger,
	})
	if err != nil {
		fmt.Fprintf(stderr, "nodenetctl proxy render: %v\n", err)
		return exitInvalid
	}
	ctx, cancel := context.WithTimeout(context.Background(), renderTimeout)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()
	for p.Syncs() == 0 {
		select {
		case err := <-done:
			if err == nil {
				err = ctx.Err()
			}
			fmt.Fprintf(stderr, "nodenetctl proxy render: %v\n", err)
			return exitInvalid
		case <-time.After(5 * time.Millisecond):
		}
	}
	cancel()
	<-done
	if flags.output == "state" {
		printState(stdout, p.State())
	} else {
		fmt.Fprint(stdout, fake.Dump())
	}
	if printProblems(stderr, folder.Problems()) {
		return exitInvalid
	}
	return exitOK
}

// printState prints one block per service port, sorted, with its
// frontends and the endpoints each kind of traffic uses.
func printState(w io.Writer, state *proxy.State) {
	keys := make([]proxy.ServicePortKey, 0, len(state.ServicePorts))
	for k := range state.ServicePorts {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b proxy.ServicePortKey) int { return strings.Compare(a.String(), b.String()) })
	fmt.Fprintf(w, "node %s (zone %q): %d service ports\n", state.NodeName, state.Zone, len(keys))
	for _, k := range keys {
		sp := state.ServicePorts[k]
		fmt.Fprintf(w, "\n%s  %s %s:%d", k, sp.Type, sp.ClusterIP, sp.Port)
		if sp.NodePort != 0 {
			fmt.Fprintf(w, " nodePort %d", sp.NodePort)
		}
		fmt.Fprintln(w)
		line := func(label string, v any) { fmt.Fprintf(w, "  %-22s %v\n", label, v) }
		if len(sp.ExternalIPs) > 0 {
			line("external IPs", sp.ExternalIPs)
		}
		if len(sp.LoadBalancerIPs) > 0 {
			line("load-balancer IPs", sp.LoadBalancerIPs)
		}
		if len(sp.LoadBalancerSourceRanges) > 0 {
			line("source ranges", sp.LoadBalancerSourceRanges)
		}
		if sp.SessionAffinity > 0 {
			line("ClientIP affinity", sp.SessionAffinity)
		}
		if sp.HealthCheckNodePort != 0 {
			line("health-check port", fmt.Sprintf("%d (%d local ready)", sp.HealthCheckNodePort, sp.LocalReadyEndpoints))
		}
		if sp.TrafficDistribution != "" || sp.Topology != "" {
			line("traffic distribution", fmt.Sprintf("%s, applied here: %s", cmp.Or(sp.TrafficDistribution, "(hints only)"), cmp.Or(sp.Topology, "every endpoint")))
		}
		line("internal traffic", endpointList(sp.InternalEndpoints, sp.InternalPolicyLocal, sp.HasEndpoints))
		if sp.UsesExternalFrontends() {
			line("external traffic", endpointList(sp.ExternalEndpoints, sp.ExternalPolicyLocal, sp.HasEndpoints))
		}
	}
}

func endpointList(eps []proxy.Endpoint, local, hasEndpoints bool) string {
	policy := "Cluster"
	if local {
		policy = "Local"
	}
	if len(eps) == 0 {
		if hasEndpoints {
			return policy + ": none usable here: dropped"
		}
		return policy + ": no endpoints: rejected"
	}
	parts := make([]string, len(eps))
	for i, ep := range eps {
		parts[i] = ep.String()
		if ep.Local {
			parts[i] += " (local)"
		}
		if ep.Terminating {
			parts[i] += " (terminating)"
		}
	}
	return policy + ": " + strings.Join(parts, ", ")
}
