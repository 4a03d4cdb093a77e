package main

import (
	"errors"
	"fmt"
	"io"
	"net/netip"

	"github.com/spf13/pflag"

	"github.com/nodenet/nodenet/config"
)

const proxyUsage = `Usage: nodenetctl proxy render --config FILE --manifests DIR [flags]

  render   compute what this node's service proxy programs for a folder of
           Service, EndpointSlice and Node manifests, without a cluster
           (KEP-2104's files source), and print it: the nftables ruleset
           (-o nft, what "nft -f" would load) or the node-local state per
           service port (-o state)

Flags:
`

type proxyFlags struct {
	configFile string
	manifests  string
	node       string
	nodeIPs    []string
	podCIDRs   []string
	output     string
	verbose    bool
}

func runProxy(args []string, stdout, stderr io.Writer) int {
	var flags proxyFlags
	fs := pflag.NewFlagSet("proxy render", pflag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(stderr, proxyUsage)
		fs.PrintDefaults()
	}
	fs.StringVar(&flags.configFile, "config", "", "the AgentConfiguration (or kube-proxy/flannel config) to render with (required)")
	fs.StringVar(&flags.manifests, "manifests", "", "the folder of YAML/JSON manifests (required)")
	fs.StringVar(&flags.node, "node", "", "this node's name: decides which endpoints are local (default: the config's nodeName)")
	fs.StringSliceVar(&flags.nodeIPs, "node-ip", nil, "this node's primary IP per family, for nodePortAddresses \"primary\"")
	fs.StringSliceVar(&flags.podCIDRs, "pod-cidr", nil, "this node's pod CIDRs, for detectLocal mode NodeCIDR")
	fs.StringVarP(&flags.output, "output", "o", "nft", "what to print: nft or state")
	fs.BoolVarP(&flags.verbose, "verbose", "v", false, "log what the source, brain and backend do to stderr")
	if len(args) == 0 || isHelp(args[0]) {
		fs.Usage()
		if len(args) == 0 {
			return exitUsage
		}
		return exitOK
	}
	if args[0] != "render" {
		fmt.Fprintf(stderr, "nodenetctl proxy: unknown command %q\n\n", args[0])
		fs.Usage()
		return exitUsage
	}
	if err := fs.Parse(args[1:]); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return exitOK
		}
		fmt.Fprintf(stderr, "nodenetctl proxy render: %v\n", err)
		fs.Usage()
		return exitUsage
	}
	if msg := flags.check(fs.NArg()); msg != "" {
		fmt.Fprintf(stderr, "nodenetctl proxy render: %s\n", msg)
		fs.Usage()
		return exitUsage
	}
	cfg, _, err := config.LoadFile(flags.configFile, config.LoadOptions{OS: config.OSLinux, Shared: true})
	if err != nil {
		fmt.Fprintf(stderr, "nodenetctl proxy render: %v\n", err)
		return exitInvalid
	}
	if flags.node == "" {
		flags.node = cfg.NodeName
	}
	if flags.node == "" {
		fmt.Fprintln(stderr, "nodenetctl proxy render: --node is required when the config has no nodeName")
		return exitUsage
	}
	return render(cfg, flags, stdout, stderr)
}

func (f proxyFlags) check(nargs int) string {
	switch {
	case nargs > 0:
		return "unexpected arguments"
	case f.configFile == "":
		return "--config is required"
	case f.manifests == "":
		return "--manifests is required"
	case f.output != "nft" && f.output != "state":
		return fmt.Sprintf("-o must be nft or state, not %q", f.output)
	}
	for _, ip := range f.nodeIPs {
		if _, err := netip.ParseAddr(ip); err != nil {
			return fmt.Sprintf("--node-ip: %v", err)
		}
	}
	for _, cidr := range f.podCIDRs {
		if _, err := netip.ParsePrefix(cidr); err != nil {
			return fmt.Sprintf("--pod-cidr: %v", err)
		}
	}
	return ""
}
