package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/nodenet/nodenet/agent/status"
	"github.com/nodenet/nodenet/cni"
	"github.com/nodenet/nodenet/config"
)

const cleanupUsage = `Usage: nodenetctl cleanup [--config FILE] [--dry-run] [--force]

  Remove what nodenet-agent left on this Linux node, once its DaemonSet
  is gone (kubectl delete -k deploy/) and the node is drained:

    CNI          the conflist cni.confDir/cni.conflistName (first, so the
                 runtime stops using nodenet), the plugin
                 cni.binDir/nodenet-cni
    nftables     the tables inet nodenet (service proxy), inet
                 nodenet-hostport (hostPorts), inet nodenet-egress (pod
                 egress masquerading), over netlink
    links        the host ends of pods' veths, the vxlan device
                 <network.name>.<VNI> (its routes, neighbours and FDB
                 entries go with it) and the bridge <network.name>
    routes       those nodenet added elsewhere (protocol 78: host-gw routes
                 to other nodes over the uplink)
    files        the CNI and local API sockets beside cni.socketPath, the
                 IPAM store cni.dataDir/ipam, and those two directories
                 once nothing else is in them

  It reads the agent's config: --config is the nodenet-config ConfigMap's
  config.yaml; without it, the defaults, which name what deploy/ ships
  unless you changed network.name, network.vxlan.vni or the cni paths.
  Links and files that carry the config's names but are not nodenet's are
  left alone and said so.

  It refuses while the agent still runs here, and while pods still use
  the network (addresses in the IPAM store, veths on the bridge): running
  pods keep their network until the node is drained. --force removes
  everything anyway and cuts those pods off.

  Left as they are: net.ipv4.ip_forward, net.ipv6.conf.all.forwarding
  (Kubernetes needs them on) and the conntrack sysctls; cni.confDir and
  cni.binDir (the runtime's); this Node's annotations and condition in the
  API (see deploy/README.md, Uninstall).

  It prints what it removed; a second run finds nothing and succeeds.

Flags:
`

// cleanupFlags are the flags of nodenetctl cleanup.
type cleanupFlags struct {
	configFile string
	dryRun     bool
	force      bool
}

// cleaner runs one cleanup. Its fields are the outside world, which tests
// replace.
type cleaner struct {
	stdout, stderr io.Writer
	// dataplane adds the kernel's traces of the network (nftables tables,
	// links, routes) and the veths pods still use to the plan;
	// inspectDataplane on Linux.
	dataplane func(cfg *config.AgentConfiguration, p *cleanupPlan) error
	// getenv and hostname default the config's nodeName, as the agent's.
	getenv   func(string) string
	hostname func() (string, error)
}

func runCleanup(args []string, stdout, stderr io.Writer) int {
	c := &cleaner{stdout: stdout, stderr: stderr, dataplane: inspectDataplane, getenv: os.Getenv, hostname: os.Hostname}
	return c.run(args)
}

func (c *cleaner) run(args []string) int {
	var f cleanupFlags
	fs := pflag.NewFlagSet("cleanup", pflag.ContinueOnError)
	fs.SetOutput(c.stderr)
	fs.Usage = func() {
		fmt.Fprint(c.stderr, cleanupUsage)
		fs.PrintDefaults()
	}
	fs.StringVar(&f.configFile, "config", "", "the agent's config (an AgentConfiguration, or the kube-proxy/flannel config it reads); without it, the defaults, which name what deploy/ ships")
	fs.BoolVar(&f.dryRun, "dry-run", false, "print what would be removed, and whether cleanup would refuse, without changing anything")
	fs.BoolVar(&f.force, "force", false, "remove everything even while pods still use the network: they lose it")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return exitOK
		}
		fmt.Fprintf(c.stderr, "nodenetctl cleanup: %v\n", err)
		fs.Usage()
		return exitUsage
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(c.stderr, "nodenetctl cleanup: unexpected arguments: %s\n", strings.Join(fs.Args(), " "))
		fs.Usage()
		return exitUsage
	}
	if !cleanupSupported {
		fmt.Fprintln(c.stderr, "nodenetctl cleanup: only Linux nodes are supported yet; on Windows remove the HNS network, the conflist, nodenet-cni.exe and C:\\ProgramData\\nodenet by hand (deploy/README.md, Uninstall)")
		return exitFailed
	}
	cfg, ok := c.loadConfig(f.configFile)
	if !ok {
		return exitInvalid
	}
	p, err := c.inspect(cfg)
	if err != nil {
		fmt.Fprintf(c.stderr, "nodenetctl cleanup: %v\n", err)
		return exitFailed
	}
	return c.apply(p, f)
}

// loadConfig loads the config as the agent on this node does (Linux
// rules, nodeName and paths defaulted for this node), or the defaults
// without a file. Problems in fields cleanup does not use are warnings:
// only the names and paths matter here.
func (c *cleaner) loadConfig(file string) (*config.AgentConfiguration, bool) {
	opts := config.LoadOptions{OS: config.OSLinux, Getenv: c.getenv, Hostname: c.hostname}
	if file == "" {
		cfg := &config.AgentConfiguration{}
		config.SetDefaults(cfg, config.DefaultingOptions{OS: opts.OS, Getenv: opts.Getenv, Hostname: opts.Hostname})
		return cfg, true
	}
	cfg, _, err := config.LoadFile(file, opts)
	if cfg == nil {
		fmt.Fprintf(c.stderr, "nodenetctl cleanup: %v\n", err)
		return nil, false
	}
	var used, other []string
	for _, e := range config.FieldErrors(err) {
		if cleanupUses(e.Field) {
			used = append(used, e.Error())
		} else {
			other = append(other, e.Error())
		}
	}
	if len(used) > 0 {
		fmt.Fprintf(c.stderr, "nodenetctl cleanup: %s: the names and paths cleanup goes by are invalid; fix them to what the agent ran with:\n", file)
		for _, e := range used {
			fmt.Fprintf(c.stderr, "  error: %s\n", e)
		}
		return nil, false
	}
	for _, e := range other {
		fmt.Fprintf(c.stderr, "warning: %s (cleanup does not use it)\n", e)
	}
	return cfg, true
}

// cleanupUses reports whether cleanup goes by the config field at path.
func cleanupUses(path string) bool {
	for _, f := range []string{"network.name", "network.mode", "network.vxlan", "cni"} {
		if path == f || strings.HasPrefix(path, f+".") {
			return true
		}
	}
	return false
}

// cleanupPlan is what cleanup found on the node.
type cleanupPlan struct {
	// agent lists the sockets a live agent answers on.
	agent []string
	// users are what pods still hold: IPAM allocations, veths.
	users []string
	// traces are nodenet's leftovers, in removal order.
	traces []trace
	// kept are things with nodenet's names that are not nodenet's, and
	// why they stay.
	kept []string
}

// trace is one thing nodenet left, and how to remove it. remove treats
// "already gone" as success.
type trace struct {
	what string
	// path is the file or directory removed, if it is one.
	path   string
	remove func() error
}

func (p *cleanupPlan) add(what string, remove func() error) {
	p.traces = append(p.traces, trace{what: what, remove: remove})
}

// addPath adds the removal of a file, socket or directory tree.
func (p *cleanupPlan) addPath(what, path string, remove func() error) {
	p.traces = append(p.traces, trace{what: what, path: path, remove: remove})
}

func (p *cleanupPlan) keep(format string, args ...any) {
	p.kept = append(p.kept, fmt.Sprintf(format, args...))
}

// inspect reads the node: the CNI files first (the runtime stops using
// nodenet once the conflist is gone), then the dataplane, then the
// sockets and the state.
func (c *cleaner) inspect(cfg *config.AgentConfiguration) (*cleanupPlan, error) {
	p := &cleanupPlan{}
	if err := inspectCNIFiles(cfg, p); err != nil {
		return nil, err
	}
	if err := c.dataplane(cfg, p); err != nil {
		return nil, err
	}
	if err := inspectSockets(cfg, p); err != nil {
		return nil, err
	}
	if err := inspectState(cfg, p); err != nil {
		return nil, err
	}
	return p, nil
}

// apply prints the plan and, unless it is a dry run or cleanup must
// refuse, removes each trace.
func (c *cleaner) apply(p *cleanupPlan, f cleanupFlags) int {
	verb := "removed"
	if f.dryRun {
		verb = "would remove"
	}
	refuse := p.refusal(f.force)
	if refuse != "" && !f.dryRun {
		fmt.Fprint(c.stderr, refuse)
		return exitFailed
	}
	if len(p.users) > 0 && f.force {
		fmt.Fprintf(c.stderr, "nodenetctl cleanup: --force: cutting off the pods that still use the network:\n%s", indentLines(p.users))
	}
	var failed int
	for _, t := range p.traces {
		if f.dryRun {
			fmt.Fprintf(c.stdout, "%s %s\n", verb, t.what)
			continue
		}
		if err := t.remove(); err != nil {
			fmt.Fprintf(c.stderr, "nodenetctl cleanup: could not remove %s: %v\n", t.what, err)
			failed++
			continue
		}
		fmt.Fprintf(c.stdout, "%s %s\n", verb, t.what)
	}
	for _, k := range p.kept {
		fmt.Fprintf(c.stdout, "left alone: %s\n", k)
	}
	switch {
	case failed > 0:
		fmt.Fprintf(c.stderr, "nodenetctl cleanup: %s not removed; run cleanup again once fixed\n", plural(failed, "trace"))
		return exitFailed
	case len(p.traces) == 0:
		fmt.Fprintln(c.stdout, "nothing of nodenet's is left on this node")
	}
	if refuse != "" { // a dry run: say what the real run would do
		fmt.Fprint(c.stderr, refuse)
		return exitFailed
	}
	return exitOK
}

// refusal says why cleanup must not run now, or "".
func (p *cleanupPlan) refusal(force bool) string {
	if len(p.agent) > 0 {
		return fmt.Sprintf("nodenetctl cleanup: refusing: nodenet-agent still runs on this node (it answers on %s).\n"+
			"Delete it first (kubectl delete -k deploy/, or the DaemonSet), then run cleanup: a running agent puts back what cleanup removes.\n",
			strings.Join(p.agent, ", "))
	}
	if len(p.users) > 0 && !force {
		return fmt.Sprintf("nodenetctl cleanup: refusing: pods on this node still use nodenet's network:\n%s"+
			"Running pods keep their network until the node is drained; cleanup would cut them off.\n"+
			"Drain the node (kubectl drain NODE --ignore-daemonsets) and wait until its pods are gone, then run cleanup again.\n"+
			"Pods that stopped while no agent ran could not release their address (their CNI DEL found no agent): once\n"+
			"kubectl get pods -A -o wide --field-selector spec.nodeName=NODE lists no pod on the pod network, --force removes everything anyway.\n",
			indentLines(p.users))
	}
	return ""
}

func indentLines(lines []string) string {
	var b strings.Builder
	for _, l := range lines {
		b.WriteString("  " + l + "\n")
	}
	return b.String()
}

// inspectCNIFiles finds the conflist the agent writes and the plugin the
// DaemonSet installs, with what an interrupted write of either leaves.
func inspectCNIFiles(cfg *config.AgentConfiguration, p *cleanupPlan) error {
	conflist := filepath.Join(cfg.CNI.ConfDir, cfg.CNI.ConflistName)
	data, err := os.ReadFile(conflist)
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return fmt.Errorf("read the conflist: %w", err)
	case callsNodenet(data):
		p.addPath("conflist "+conflist, conflist, removeFile(conflist))
	default:
		p.keep("%s: it does not call %s", conflist, cni.PluginType)
	}
	// The agent's temporary conflists (atomicfile: ".<name>.tmp-*"),
	// should a write have been cut short.
	if err := addTemps(filepath.Join(cfg.CNI.ConfDir, "."+cfg.CNI.ConflistName+".tmp-*"), "an unfinished conflist write", p); err != nil {
		return err
	}
	plugin := filepath.Join(cfg.CNI.BinDir, cni.PluginType)
	fi, err := os.Lstat(plugin)
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return err
	case fi.Mode().IsRegular():
		p.addPath("CNI plugin "+plugin, plugin, removeFile(plugin))
	default:
		p.keep("%s: not a regular file", plugin)
	}
	// The install step's temporary copies: ".nodenet-cni.new-*" from
	// nodenet-agent install-cni, ".nodenet-cni.new" from the shell step
	// of earlier DaemonSets.
	return addTemps(filepath.Join(cfg.CNI.BinDir, "."+cni.PluginType+".new*"), "an unfinished plugin install", p)
}

// addTemps adds the regular files matching pattern, written by why.
func addTemps(pattern, why string, p *cleanupPlan) error {
	temps, err := filepath.Glob(pattern)
	if err != nil {
		return err
	}
	for _, tmp := range temps {
		if fi, err := os.Lstat(tmp); err == nil && fi.Mode().IsRegular() {
			p.addPath("file "+tmp+" ("+why+")", tmp, removeFile(tmp))
		}
	}
	return nil
}

// callsNodenet reports whether a conflist has nodenet's plugin in it.
func callsNodenet(data []byte) bool {
	type plugin struct {
		Type string `json:"type"`
	}
	var list struct {
		Plugins []plugin `json:"plugins"`
	}
	if json.Unmarshal(data, &list) != nil {
		return false
	}
	return slices.ContainsFunc(list.Plugins, func(e plugin) bool { return e.Type == cni.PluginType })
}

// socketDialTimeout bounds the check for a live agent.
const socketDialTimeout = time.Second

// inspectSockets finds the CNI socket and the local API's beside it, and
// their directory when nothing else is in it. A socket that answers is a
// running agent.
func inspectSockets(cfg *config.AgentConfiguration, p *cleanupPlan) error {
	sockets := []string{cfg.CNI.SocketPath, status.SocketPath(cfg.CNI.SocketPath)}
	for _, path := range sockets {
		fi, err := os.Lstat(path)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			continue
		case err != nil:
			return err
		case fi.Mode()&fs.ModeSocket == 0:
			p.keep("%s: not a socket", path)
			continue
		}
		if conn, err := net.DialTimeout("unix", path, socketDialTimeout); err == nil {
			conn.Close()
			p.agent = append(p.agent, path)
			continue
		}
		p.addPath("socket "+path, path, removeFile(path))
	}
	// listenUnix made the directory; remove it once it holds nothing else.
	return removableDir(filepath.Dir(cfg.CNI.SocketPath), sockets, "socket directory", p)
}

// inspectState finds the IPAM store, and the data directory when nothing
// else is in it. Each address file in it is a pod's (host-local's layout:
// a file named by the address holding "<containerID>\r\n<ifname>").
func inspectState(cfg *config.AgentConfiguration, p *cleanupPlan) error {
	ipamDir := filepath.Join(cfg.CNI.DataDir, "ipam")
	fi, err := os.Lstat(ipamDir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return removableDir(cfg.CNI.DataDir, nil, "state directory", p)
	case err != nil:
		return err
	case !fi.IsDir():
		p.keep("%s: not a directory", ipamDir)
		return nil
	}
	stores, err := os.ReadDir(ipamDir)
	if err != nil {
		return err
	}
	allocations := 0
	for _, store := range stores {
		if !store.IsDir() {
			continue
		}
		dir := filepath.Join(ipamDir, store.Name())
		entries, err := os.ReadDir(dir)
		if err != nil {
			return err
		}
		for _, e := range entries {
			ip, err := netip.ParseAddr(strings.ReplaceAll(e.Name(), "_", ":"))
			if err != nil || e.IsDir() {
				continue // the lock, last_reserved_ip.N
			}
			allocations++
			owner, _ := os.ReadFile(filepath.Join(dir, e.Name()))
			id, ifName, _ := strings.Cut(strings.TrimSpace(string(owner)), "\r\n")
			p.users = append(p.users, fmt.Sprintf("address %s held by container %s (%s) in the IPAM store %s", ip, shortID(id), strings.TrimSpace(ifName), dir))
		}
	}
	p.addPath(fmt.Sprintf("IPAM store %s (%s)", ipamDir, plural(allocations, "allocation")), ipamDir, func() error { return os.RemoveAll(ipamDir) })
	return removableDir(cfg.CNI.DataDir, []string{ipamDir}, "state directory", p)
}

// removableDir adds dir (the agent made it) to the plan when every entry
// in it is one of goes and the plan removes it; when it also holds
// others, it says so. A top-level directory (/run, /tmp) is never
// removed, whatever the config says.
func removableDir(dir string, goes []string, kind string, p *cleanupPlan) error {
	if filepath.Dir(dir) == dir || filepath.Dir(dir) == string(filepath.Separator) {
		return nil
	}
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	var others []string
	stays := false // one of goes that the plan keeps (a live socket)
	for _, e := range entries {
		path := filepath.Join(dir, e.Name())
		switch {
		case !slices.Contains(goes, path):
			others = append(others, e.Name())
		case !p.removes(path):
			stays = true
		}
	}
	if len(others) > 0 && len(others) < len(entries) {
		p.keep("%s %s: it holds more than nodenet's (%s)", kind, dir, strings.Join(others, ", "))
	}
	if len(others) > 0 || stays {
		return nil
	}
	p.addPath(kind+" "+dir, dir, func() error {
		if err := os.Remove(dir); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		return nil
	})
	return nil
}

// removes reports whether the plan removes path.
func (p *cleanupPlan) removes(path string) bool {
	return slices.ContainsFunc(p.traces, func(t trace) bool { return t.path == path })
}

// removeFile returns a remover of path; one already gone is fine.
func removeFile(path string) func() error {
	return func() error {
		if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		return nil
	}
}

// shortID shortens a container ID as crictl prints it.
func shortID(id string) string {
	if id == "" {
		return "(unknown)"
	}
	if len(id) > 13 {
		return id[:13]
	}
	return id
}
