package main

import (
	"errors"
	"fmt"
	"io"
	"net/netip"
	"slices"
	"strings"
	"time"

	"github.com/go-logr/logr/funcr"
	"github.com/spf13/pflag"
	"k8s.io/klog/v2"

	"github.com/nodenet/nodenet/agent"
	"github.com/nodenet/nodenet/config"
	"github.com/nodenet/nodenet/hns"
	"github.com/nodenet/nodenet/proxy/source"
)

const proxyUsage = `Usage: nodenetctl proxy render --config FILE --manifests DIR [flags]

  render   compute what this node programs for a folder of manifests,
           without a cluster, and print it. The folder stands in for the
           API server: Nodes (this node's and its peers', with pod CIDRs
           and flannel annotations), Pods (spec.nodeName, status.podIP),
           Services and EndpointSlices. The agent's own parts run on it:
             -o nft     the nftables ruleset a Linux node loads ("nft -f")
             -o state   the node-local state per service port
             -o hns     the HNS networks, endpoints and load balancers a
                        Windows node would hold, on the HNS simulator of the
                        version asked for (--hns-version, --windows-server),
                        with each of this node's Pods wired as CNI would
             -o json    the same as JSON (hnsdiag's objects)
           A manifest that is malformed, names a Node no manifest declares,
           or gives pod CIDRs that overlap another Node's is an error
           naming its file and object; nothing comes of that object, the
           rest is rendered, and the exit status is 1.

Flags:
`

// renderTimeout bounds the one sync render waits for; reading a folder
// takes milliseconds.
const renderTimeout = 30 * time.Second

type proxyFlags struct {
	configFile    string
	manifests     string
	node          string
	nodeIPs       []string
	podCIDRs      []string
	output        string
	hnsVersion    string
	windowsServer string
	verbose       bool
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
	fs.StringVar(&flags.node, "node", "", "this node's name: decides which endpoints and Pods are local (default: the config's nodeName)")
	fs.StringSliceVar(&flags.nodeIPs, "node-ip", nil, "this node's primary IP per family (default: the config's nodeIPOverride, else the Node's InternalIPs)")
	fs.StringSliceVar(&flags.podCIDRs, "pod-cidr", nil, "this node's pod CIDRs (default: the Node's spec.podCIDRs)")
	fs.StringVarP(&flags.output, "output", "o", "nft", "what to print: nft, state, hns or json")
	fs.StringVar(&flags.hnsVersion, "hns-version", "", "-o hns/json: the Windows host's HNS version, major.minor (default: the config's windows.hnsVersion, else "+hns.VersionDefault.String()+")")
	fs.StringVar(&flags.windowsServer, "windows-server", "", "-o hns/json: the Windows Server release instead of --hns-version: "+strings.Join(releaseNames(), ", "))
	fs.BoolVarP(&flags.verbose, "verbose", "v", false, "log what the source, network, brain and backend do to stderr")
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
	if flags.windows() {
		return renderWindows(flags, stdout, stderr)
	}
	cfg, _, err := config.LoadFile(flags.configFile, config.LoadOptions{OS: config.OSLinux, Shared: true})
	if err != nil {
		fmt.Fprintf(stderr, "nodenetctl proxy render: %v\n", err)
		return exitInvalid
	}
	if !flags.defaultNode(cfg, stderr) {
		return exitUsage
	}
	return render(cfg, flags, stdout, stderr)
}

// defaultNode fills --node from the config's nodeName; false (said on
// stderr) when neither names one.
func (f *proxyFlags) defaultNode(cfg *config.AgentConfiguration, stderr io.Writer) bool {
	if f.node == "" {
		f.node = cfg.NodeName
	}
	if f.node == "" {
		fmt.Fprintln(stderr, "nodenetctl proxy render: --node is required when the config has no nodeName")
		return false
	}
	return true
}

// windows reports whether the output is what a Windows node holds.
func (f proxyFlags) windows() bool { return f.output == "hns" || f.output == "json" }

func (f proxyFlags) check(nargs int) string {
	switch {
	case nargs > 0:
		return "unexpected arguments"
	case f.configFile == "":
		return "--config is required"
	case f.manifests == "":
		return "--manifests is required"
	case !slices.Contains([]string{"nft", "state", "hns", "json"}, f.output):
		return fmt.Sprintf("-o must be nft, state, hns or json, not %q", f.output)
	case (f.hnsVersion != "" || f.windowsServer != "") && !f.windows():
		return "--hns-version and --windows-server need -o hns or -o json"
	case f.hnsVersion != "" && f.windowsServer != "":
		return "give --hns-version or --windows-server, not both"
	}
	if f.hnsVersion != "" {
		if _, err := hns.ParseVersion(f.hnsVersion); err != nil {
			return fmt.Sprintf("--hns-version: %v", err)
		}
	}
	if f.windowsServer != "" {
		if _, ok := releaseByName(f.windowsServer); !ok {
			return fmt.Sprintf("--windows-server %q: want one of %s", f.windowsServer, strings.Join(releaseNames(), ", "))
		}
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

// releaseName is the --windows-server spelling of a modelled release:
// "Windows Server 2019, patched" is 2019-patched.
func releaseName(r hns.Release) string {
	name := strings.TrimPrefix(r.Name, "Windows Server ")
	name, patched := strings.CutSuffix(name, ", patched")
	if patched {
		name += "-patched"
	}
	return name
}

func releaseNames() []string {
	var out []string
	for _, r := range hns.Releases {
		out = append(out, fmt.Sprintf("%s (HNS %s)", releaseName(r), r.Version))
	}
	return out
}

func releaseByName(name string) (hns.Release, bool) {
	for _, r := range hns.Releases {
		if releaseName(r) == name {
			return r, true
		}
	}
	return hns.Release{}, false
}

// renderLogger logs to stderr with -v, else nowhere.
func renderLogger(verbose bool) klog.Logger {
	if verbose {
		return klog.Background()
	}
	// A sink that drops everything: logr.Discard's nil sink would read as
	// "unset" and fall back to klog.
	return funcr.New(func(string, string) {}, funcr.Options{})
}

// printProblems prints the folder's problems on stderr and says whether
// there were any.
func printProblems(stderr io.Writer, problems []error) bool {
	for _, p := range problems {
		fmt.Fprintf(stderr, "error: %v\n", p)
	}
	return len(problems) > 0
}

// nodeFacts fills in this node's IPs and pod CIDRs the flags leave out,
// from the config's nodeIPOverride and the Node in the folder, as the
// agent takes them.
func nodeFacts(cfg *config.AgentConfiguration, flags *proxyFlags, nodes source.FolderNodes) {
	n, err := nodes.Get(flags.node)
	if err != nil {
		n = nil
	}
	if len(flags.nodeIPs) == 0 {
		for _, ip := range agent.NodeIPs(cfg, n) {
			flags.nodeIPs = append(flags.nodeIPs, ip.String())
		}
	}
	if len(flags.podCIDRs) == 0 && n != nil {
		flags.podCIDRs = slices.Clone(n.Spec.PodCIDRs)
		if len(flags.podCIDRs) == 0 && n.Spec.PodCIDR != "" {
			flags.podCIDRs = []string{n.Spec.PodCIDR}
		}
		flags.podCIDRs = slices.DeleteFunc(flags.podCIDRs, func(s string) bool {
			_, err := netip.ParsePrefix(s)
			return err != nil
		})
	}
}
