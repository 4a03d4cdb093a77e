package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/netip"
	"sort"
	"strings"

	"github.com/nodenet/nodenet/agent"
	"github.com/nodenet/nodenet/config"
	"github.com/nodenet/nodenet/hns"
)

// windowsHost is the simulated Windows host a render is for.
type windowsHost struct {
	release string // "Windows Server 2025", or "" for a version no release is modelled with
	version hns.Version
	build   hns.OSBuild
}

func (h windowsHost) String() string {
	s := "HNS " + h.version.String()
	if h.release != "" {
		s += " (" + h.release + ", build " + h.build.String() + ")"
	} else {
		s += " (build " + h.build.String() + ")"
	}
	return s
}

// pickHost is the host --windows-server or --hns-version name, else the
// config's windows.hnsVersion, else the simulator's default.
func pickHost(flags proxyFlags, cfg *config.AgentConfiguration) (windowsHost, error) {
	if flags.windowsServer != "" {
		r, _ := releaseByName(flags.windowsServer)
		return windowsHost{release: r.Name, version: r.Version, build: r.Build}, nil
	}
	v := hns.VersionDefault
	switch {
	case flags.hnsVersion != "":
		v, _ = hns.ParseVersion(flags.hnsVersion)
	case cfg.Windows.HNSVersion != "":
		var err error
		if v, err = hns.ParseVersion(cfg.Windows.HNSVersion); err != nil {
			return windowsHost{}, fmt.Errorf("windows.hnsVersion: %w", err)
		}
	}
	h := windowsHost{version: v, build: hns.BuildFor(v)}
	for _, r := range hns.Releases {
		if r.Version == v {
			h.release, h.build = r.Name, r.Build
		}
	}
	return h, nil
}

// renderWindows is -o hns and -o json: what a Windows node would hold,
// from the agent's own parts on the HNS simulator (agent.RenderHNS).
func renderWindows(flags proxyFlags, stdout, stderr io.Writer) int {
	cfg, err := agent.LoadRenderConfig(flags.configFile)
	if err != nil {
		fmt.Fprintf(stderr, "nodenetctl proxy render: %v\n", err)
		return exitInvalid
	}
	if !flags.defaultNode(cfg, stderr) {
		return exitUsage
	}
	host, err := pickHost(flags, cfg)
	if err != nil {
		fmt.Fprintf(stderr, "nodenetctl proxy render: %v\n", err)
		return exitInvalid
	}
	// What the agent refuses to start with on that host.
	if cfg.Proxy.EnableDSR && !hns.FeaturesFor(host.version).DSR {
		fmt.Fprintf(stderr, "nodenetctl proxy render: %s: proxy.enableDSR: Forbidden: %s does not support DSR\n", flags.configFile, host)
		return exitInvalid
	}
	cfg.Windows.HNSVersion = host.version.String()
	if len(flags.nodeIPs) > 0 {
		cfg.NodeIPOverride = flags.nodeIPs
	}
	var podCIDRs []netip.Prefix
	for _, s := range flags.podCIDRs {
		podCIDRs = append(podCIDRs, netip.MustParsePrefix(s))
	}
	ctx := context.Background()
	r, err := agent.RenderHNS(ctx, agent.RenderOptions{
		Config: cfg, Dir: flags.manifests, NodeName: flags.node,
		Version: host.version, Build: host.build, PodCIDRs: podCIDRs,
		Timeout: renderTimeout, Logger: renderLogger(flags.verbose),
	})
	if err != nil {
		if r != nil {
			printProblems(stderr, r.Problems)
		}
		fmt.Fprintf(stderr, "nodenetctl proxy render: %v\n", err)
		return exitInvalid
	}
	if flags.output == "json" {
		if err := printHNSJSON(ctx, stdout, flags.node, host, r); err != nil {
			fmt.Fprintf(stderr, "nodenetctl proxy render: %v\n", err)
			return exitInvalid
		}
	} else {
		printHNS(stdout, flags, cfg, host, r)
	}
	bad := printProblems(stderr, r.Problems)
	for _, e := range []struct {
		what string
		err  error
	}{{"node network", r.Network}, {"proxy", r.Proxy}} {
		if e.err != nil {
			fmt.Fprintf(stderr, "error: %s: %v\n", e.what, e.err)
			bad = true
		}
	}
	if bad {
		return exitInvalid
	}
	return exitOK
}

// printHNS prints the simulated host as `nodenetctl dump hns` shows an
// agent on --dataplane=sim, with what the agent would record and what the
// render could not show.
func printHNS(w io.Writer, flags proxyFlags, cfg *config.AgentConfiguration, host windowsHost, r *agent.Rendered) {
	f := hns.FeaturesFor(host.version)
	dsr := "off"
	if cfg.Proxy.EnableDSR {
		dsr = "on"
	}
	updates := "in place (ModifyLoadBalancer)"
	if !f.ModifyLoadbalancer {
		updates = "delete and create (no usable in-place update on this HNS)"
	}
	fmt.Fprintf(w, "# node %s on %s: what a Windows node would hold for %s\n", flags.node, host, flags.manifests)
	fmt.Fprintf(w, "# network %s %q, DSR %s, load-balancer updates %s, at most %d backends per load balancer\n",
		cfg.Network.Mode, cfg.Network.Name, dsr, updates, maxBackends(cfg, host))
	fmt.Fprint(w, r.HNS.Dump())
	if routes := agent.DumpHostRoutes(context.Background(), r.HostRoutes); routes != "" {
		fmt.Fprintf(w, "Host routes:\n%s", routes)
	}
	printList(w, "Events (the agent records these)", eventLines(r.Events))
	printList(w, "Notes", r.Notes)
}

func maxBackends(cfg *config.AgentConfiguration, host windowsHost) int {
	n := hns.MaxBackendsPerLoadBalancer(host.build)
	if m := int(cfg.Windows.MaxBackendsPerLoadBalancer); m > 0 && m < n {
		n = m
	}
	return n
}

func eventLines(events []agent.Event) []string {
	var out []string
	for _, e := range events {
		out = append(out, e.String())
	}
	return out
}

func printList(w io.Writer, title string, lines []string) {
	if len(lines) == 0 {
		return
	}
	fmt.Fprintf(w, "%s:\n", title)
	for _, l := range lines {
		fmt.Fprintf(w, "  %s\n", l)
	}
}

// renderedJSON is -o json.
type renderedJSON struct {
	Node          string             `json:"node"`
	HNS           hostJSON           `json:"hns"`
	Networks      []hns.Network      `json:"networks"`
	Endpoints     []hns.Endpoint     `json:"endpoints"`
	LoadBalancers []hns.LoadBalancer `json:"loadBalancers"`
	HostRoutes    []string           `json:"hostRoutes"`
	Events        []agent.Event      `json:"events"`
	Problems      []string           `json:"problems"`
	Notes         []string           `json:"notes"`
	NetworkError  string             `json:"networkError,omitempty"`
	ProxyError    string             `json:"proxyError,omitempty"`
}

type hostJSON struct {
	Version        string   `json:"version"`
	WindowsServer  string   `json:"windowsServer,omitempty"`
	Build          string   `json:"build"`
	Features       []string `json:"features"`
	MaxBackendsPer int      `json:"maxBackendsPerLoadBalancer"`
}

func printHNSJSON(ctx context.Context, w io.Writer, node string, host windowsHost, r *agent.Rendered) error {
	out := renderedJSON{
		Node: node,
		HNS: hostJSON{
			Version: host.version.String(), WindowsServer: host.release, Build: host.build.String(),
			Features: []string{}, MaxBackendsPer: hns.MaxBackendsPerLoadBalancer(host.build),
		},
		Events: r.Events, Problems: []string{}, Notes: r.Notes,
	}
	f := hns.FeaturesFor(host.version)
	for _, name := range hns.AllFeatures {
		if f.Has(name) {
			out.HNS.Features = append(out.HNS.Features, string(name))
		}
	}
	var err error
	if out.Networks, err = r.HNS.ListNetworks(ctx); err != nil {
		return err
	}
	if out.Endpoints, err = r.HNS.ListEndpoints(ctx, ""); err != nil {
		return err
	}
	if out.LoadBalancers, err = r.HNS.ListLoadBalancers(ctx); err != nil {
		return err
	}
	routes, err := r.HostRoutes.List(ctx)
	if err != nil {
		return err
	}
	out.HostRoutes = []string{}
	for _, rt := range routes {
		out.HostRoutes = append(out.HostRoutes, rt.String())
	}
	sort.Slice(out.Networks, func(i, j int) bool { return out.Networks[i].ID < out.Networks[j].ID })
	sort.Slice(out.Endpoints, func(i, j int) bool { return out.Endpoints[i].ID < out.Endpoints[j].ID })
	sort.Slice(out.LoadBalancers, func(i, j int) bool { return out.LoadBalancers[i].ID < out.LoadBalancers[j].ID })
	for _, p := range r.Problems {
		out.Problems = append(out.Problems, p.Error())
	}
	if r.Network != nil {
		out.NetworkError = r.Network.Error()
	}
	if r.Proxy != nil {
		out.ProxyError = r.Proxy.Error()
	}
	if out.Events == nil {
		out.Events = []agent.Event{}
	}
	if out.Notes == nil {
		out.Notes = []string{}
	}
	b, err := json.MarshalIndent(out, "", "  ")
	if err != nil {
		return err
	}
	_, err = fmt.Fprintln(w, strings.TrimRight(string(b), "\n"))
	return err
}
