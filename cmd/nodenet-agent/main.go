// Command nodenet-agent is nodenet's node agent: the DaemonSet process
// that replaces flannel and kube-proxy. It builds this node's network,
// serves the CNI plugin and runs the service proxy, all from one config
// (package agent does the work).
//
//	nodenet-agent --config FILE [--write-config-to FILE] [--kubeconfig FILE] [--apiserver URL]
//	    [--dataplane linux|hns|sim] [--source kubernetes|files:DIR] [--v N]
//	nodenet-agent install-cni --dir DIR [--source FILE]
//	nodenet-agent version
//
// install-cni is the DaemonSet's init container: it copies the CNI plugin
// shipped beside the agent into the host's CNI bin dir atomically (the
// image has no shell to do it). version prints the build's version.
//
// With --source files:DIR and neither --kubeconfig nor --apiserver the
// agent needs no cluster: DIR holds the Nodes too, nothing is written to
// any Node, and Events go to the log (agent.Options.Offline).
//
// Exit status: 0 after a clean shutdown (SIGTERM, SIGINT, a service stop)
// or --write-config-to; 1 when the config is invalid (the error names each
// field, and nothing was touched) or a part failed; 2 for bad flags.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/pflag"
	"k8s.io/klog/v2"

	"github.com/nodenet/nodenet/agent"
	"github.com/nodenet/nodenet/agent/apiaddr"
	"github.com/nodenet/nodenet/config"
	"github.com/nodenet/nodenet/internal/version"
)

// configEventTimeout bounds recording a config error on the Node before
// exiting.
const configEventTimeout = 5 * time.Second

// Exit statuses.
const (
	exitOK     = 0
	exitFailed = 1
	exitUsage  = 2
)

func main() {
	code := run(os.Args[1:], os.Stdout, os.Stderr)
	klog.Flush()
	os.Exit(code)
}

type flags struct {
	config        string
	writeConfigTo string
	kubeconfig    string
	apiserver     string
	dataplane     string
	source        string
}

// run is one nodenet-agent command line (without the program name); it
// returns the exit status.
func run(args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 {
		switch args[0] {
		case "install-cni":
			return installCNI(args[1:], stdout, stderr)
		case "version":
			fmt.Fprintln(stdout, version.Get())
			return exitOK
		}
	}
	var f flags
	fs := pflag.NewFlagSet("nodenet-agent", pflag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(stderr, "Usage: nodenet-agent --config FILE [flags]\n\nFlags:\n")
		fs.PrintDefaults()
	}
	fs.StringVar(&f.config, "config", "", "the config: an AgentConfiguration, a KubeProxyConfiguration or a flannel net-conf.json (detected by content; required)")
	fs.StringVar(&f.writeConfigTo, "write-config-to", "", "write the loaded config as the latest AgentConfiguration to this file and exit")
	fs.StringVar(&f.kubeconfig, "kubeconfig", "", "kubeconfig of the API server (default: the pod's service account, at the address discovery finds)")
	fs.StringVar(&f.apiserver, "apiserver", "", "the API server address (https://host:port) with the pod's service account; default: "+agent.APIServerDiscoveryOrder)
	fs.StringVar(&f.dataplane, "dataplane", string(agent.DefaultDataplane()), "what to program: linux (netlink + nftables), hns (Windows) or sim (the HNS simulator: what a Windows node would get)")
	fs.StringVar(&f.source, "source", "kubernetes", "where the proxy reads Services and EndpointSlices: kubernetes or files:DIR; files:DIR without --kubeconfig or --apiserver runs with no API server at all, Nodes (this node's and its peers') coming from DIR too")
	klogFlags := flag.NewFlagSet("klog", flag.ContinueOnError)
	klog.InitFlags(klogFlags)
	fs.AddGoFlagSet(klogFlags)

	if err := fs.Parse(args); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return exitOK
		}
		fmt.Fprintf(stderr, "nodenet-agent: %v\n", err)
		return exitUsage
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "nodenet-agent: unexpected arguments %q\n", fs.Args())
		return exitUsage
	}
	dp, err := agent.ParseDataplane(f.dataplane)
	if err != nil {
		fmt.Fprintf(stderr, "nodenet-agent: --dataplane: %v\n", err)
		return exitUsage
	}
	if f.apiserver != "" {
		if _, err := apiaddr.ParseAddress(f.apiserver); err != nil {
			fmt.Fprintf(stderr, "nodenet-agent: --apiserver: %v\n", err)
			return exitUsage
		}
	}
	if f.config == "" {
		fmt.Fprintln(stderr, "nodenet-agent: --config is required")
		fs.Usage()
		return exitUsage
	}

	if f.writeConfigTo != "" {
		return writeConfig(f, dp, stdout, stderr)
	}
	opts := agent.Options{
		ConfigFile: f.config,
		Kubeconfig: f.kubeconfig,
		APIServer:  f.apiserver,
		Dataplane:  dp,
		Source:     f.source,
		Logger:     klog.Background(),
	}
	a, err := agent.New(opts)
	if err != nil {
		fmt.Fprintf(stderr, "nodenet-agent: %v\n", err)
		var cfgErr *agent.ConfigError
		if errors.As(err, &cfgErr) {
			if err := agent.RecordConfigError(cfgErr, opts, configEventTimeout); err != nil {
				fmt.Fprintf(stderr, "nodenet-agent: could not record the config error on the Node: %v\n", err)
			}
		}
		return exitFailed
	}
	if a.Config().Windows.RunAsService && serviceSupported {
		err = runAsService(a)
	} else {
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		err = a.Run(ctx)
		stop()
	}
	if err != nil {
		fmt.Fprintf(stderr, "nodenet-agent: %v\n", err)
		return exitFailed
	}
	return exitOK
}

// writeConfig is --write-config-to: the config as loaded for the
// dataplane, defaulted, in the latest apiVersion. Like kube-proxy's, it
// writes what loaded even when the config has problems (a converted
// kube-proxy or flannel config lacks serviceCIDRs): they are listed on
// stderr, to fix before an agent runs it.
func writeConfig(f flags, dp agent.Dataplane, stdout, stderr io.Writer) int {
	loaded, err := agent.LoadConfig(f.config, dp, nil, nil)
	if err != nil {
		fmt.Fprintf(stderr, "nodenet-agent: %v\n", err)
		return exitFailed
	}
	if err := config.WriteFile(loaded.Config, f.writeConfigTo); err != nil {
		fmt.Fprintf(stderr, "nodenet-agent: --write-config-to: %v\n", err)
		return exitFailed
	}
	for _, w := range loaded.Warnings {
		fmt.Fprintf(stderr, "warning: %s\n", w)
	}
	for _, e := range loaded.Errors {
		fmt.Fprintf(stderr, "to fix before an agent runs it: %s\n", e)
	}
	fmt.Fprintf(stdout, "wrote %s\n", f.writeConfigTo)
	return exitOK
}
