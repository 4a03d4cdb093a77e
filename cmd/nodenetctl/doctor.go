package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/containernetworking/cni/libcni"
	"k8s.io/client-go/kubernetes"

	"github.com/nodenet/nodenet/agent/status"
	"github.com/nodenet/nodenet/cni"
	"github.com/nodenet/nodenet/overlay"
)

const doctorUsage = `Usage: nodenetctl doctor [--kubeconfig FILE] [flags]

  Check that the parts of nodenet on this node agree, and say what to fix:
  the agent answers; its network is ready; the CNI conflist on disk is the
  one the runtime loads and matches the agent's network and socket; the
  CNI socket exists; the proxy runs, is healthy and synced recently; DSR
  suits the dataplane. On Windows (and the simulator): the host's HNS
  version and Windows build, which HNS features nodenet uses and which it
  does without (with the HNS versions that have them), and the backends
  per load balancer. With --kubeconfig, also this Node's flannel
  annotations and NetworkUnavailable condition, and that every peer uses
  the same backend and VNI. Each check prints "ok" or "FAIL: ... → fix:
  ..."; the exit status is 1 when one fails.

Flags:
`

// Check results.
const (
	resultOK   = "ok"
	resultFail = "FAIL"
	resultWarn = "warn"
	resultSkip = "skip"
)

// check is one doctor finding.
type check struct {
	Name   string `json:"name"`
	Result string `json:"result"`
	Detail string `json:"detail"`
	Fix    string `json:"fix,omitempty"`
}

// diagnosis is doctor's -o json/yaml answer.
type diagnosis struct {
	Checks []check `json:"checks"`
	Failed int     `json:"failed"`
}

func passed(name, format string, a ...any) check {
	return check{Name: name, Result: resultOK, Detail: fmt.Sprintf(format, a...)}
}

func failed(name, detail, fix string) check {
	return check{Name: name, Result: resultFail, Detail: detail, Fix: fix}
}

func warned(name, detail, fix string) check {
	return check{Name: name, Result: resultWarn, Detail: detail, Fix: fix}
}

// doctorOptions are doctor's inputs besides the agent's answers.
type doctorOptions struct {
	// kube is the API client; nil skips the Node checks.
	kube kubernetes.Interface
	// maxSyncAge is how old the proxy's last sync may be.
	maxSyncAge time.Duration
	now        time.Time
}

func (c *ctl) doctor(args []string) int {
	var f agentFlags
	var kubeconfig string
	var maxSyncAge time.Duration
	fs := c.flagSet("doctor", doctorUsage, &f)
	fs.StringVar(&kubeconfig, "kubeconfig", "", "also check this Node and its peers in the API server, with this kubeconfig")
	fs.DurationVar(&maxSyncAge, "max-sync-age", 2*time.Minute, "fail when the proxy's last sync is older (it resyncs every proxy.syncPeriod, 30s by default)")
	if code, ok := c.parse(fs, &f, args, 0); !ok {
		return code
	}
	opts := doctorOptions{maxSyncAge: maxSyncAge, now: c.now()}
	if kubeconfig != "" {
		kube, err := c.newKube(kubeconfig, f.timeout)
		if err != nil {
			return c.fail("doctor", err)
		}
		opts.kube = kube
	}
	checks := diagnose(context.Background(), f.client(), opts)
	d := diagnosis{Checks: checks}
	for _, ch := range checks {
		if ch.Result == resultFail {
			d.Failed++
		}
	}
	if err := printAs(c.stdout, f.output, d, func(w io.Writer) { printDiagnosis(w, d) }); err != nil {
		return c.fail("doctor", err)
	}
	if d.Failed > 0 {
		return exitFailed
	}
	return exitOK
}

func printDiagnosis(w io.Writer, d diagnosis) {
	warnings := 0
	for _, ch := range d.Checks {
		label := ch.Result
		switch ch.Result {
		case resultFail, resultWarn:
			label += ":"
		}
		if ch.Result == resultWarn {
			warnings++
		}
		line := fmt.Sprintf("%-5s %s: %s", label, ch.Name, ch.Detail)
		if ch.Fix != "" {
			line += " → fix: " + ch.Fix
		}
		fmt.Fprintln(w, line)
	}
	switch {
	case d.Failed > 0:
		fmt.Fprintf(w, "\n%d of %s failed", d.Failed, plural(len(d.Checks), "check"))
	default:
		fmt.Fprintf(w, "\nall %s passed", plural(len(d.Checks), "check"))
	}
	if warnings > 0 {
		fmt.Fprintf(w, ", %s", plural(warnings, "warning"))
	}
	fmt.Fprintln(w)
}

// diagnose runs every check. When the agent doesn't answer, that is the
// only finding: every other check compares against its answer.
func diagnose(ctx context.Context, client *status.Client, opts doctorOptions) []check {
	st, err := client.Status(ctx)
	if err != nil {
		return []check{agentUnreachable(err)}
	}
	checks := []check{
		passed("agent", "%s answers on %s (dataplane %s, version %s, started %s)",
			st.NodeName, client.SocketPath(), st.Dataplane, orNone(st.Version), ago(opts.now, st.StartedAt)),
		checkNetwork(st),
		checkCNISocket(st),
	}
	checks = append(checks, checkConflist(st)...)
	checks = append(checks, checkProxy(st, opts), checkSettings(st))
	checks = append(checks, checkHNS(st)...)
	if opts.kube == nil {
		return append(checks, check{Name: "node", Result: resultSkip, Detail: "pass --kubeconfig to check this Node and its peers in the API server"})
	}
	return append(checks, checkNode(ctx, opts.kube, st)...)
}

func agentUnreachable(err error) check {
	fix := "check the agent's log (its DaemonSet pod on this node)"
	switch {
	case errors.Is(err, fs.ErrNotExist):
		fix = "start the nodenet agent on this node (its DaemonSet pod), or pass --socket if cni.socketPath is not the default"
	case errors.Is(err, fs.ErrPermission):
		fix = "run nodenetctl as root"
		if runtime.GOOS == "windows" {
			fix = "run nodenetctl from an elevated prompt"
		}
	case errors.Is(err, context.DeadlineExceeded):
		fix = "the agent is stuck: read its log, then restart its pod (the dataplane stays programmed)"
	case status.IsUnreachable(err):
		fix = "the agent is not running: read why in its pod's previous log, then restart it"
	}
	return failed("agent", err.Error(), fix)
}

// Fixes for the network's NetworkUnavailable reasons (overlay.Reason*).
var networkFixes = map[string]string{
	overlay.ReasonNoPodCIDR:            "give the Node a pod CIDR: run kube-controller-manager with --allocate-node-cidrs, or set the Node's spec.podCIDRs",
	overlay.ReasonInvalidPodCIDR:       "set a valid spec.podCIDRs on the Node",
	overlay.ReasonNoNodeIP:             "the Node needs an InternalIP address (kubelet --node-ip), or set nodeIPOverride in the agent's config",
	overlay.ReasonNetworkMismatch:      "a network of that name exists with other settings (and may carry pods): set network.allowRecreate: true to let the agent replace it, or pick another network.name",
	overlay.ReasonInvalidNetworkConfig: "fix the network section of the config (nodenetctl config validate)",
	overlay.ReasonNetworkError:         "read the agent's log: the dataplane refused the network",
}

func checkNetwork(st *status.Status) check {
	n := st.Network
	if !n.Ready {
		fix, known := networkFixes[n.Reason]
		if !known {
			fix = "read the agent's log"
		}
		return failed("network", fmt.Sprintf("%s network %q is not ready: %s", n.Mode, n.Name, networkDetail(n)), fix)
	}
	return passed("network", "%s network %q is ready (pod CIDRs %s, node IP %s, %s)",
		n.Mode, n.Name, orNone(strings.Join(n.PodCIDRs, ", ")), orNone(n.NodeIP), plural(n.RemoteNodes, "remote node"))
}

func checkCNISocket(st *status.Status) check {
	path := st.CNI.SocketPath
	if path == "" {
		return failed("cni", "the agent reports no CNI socket path", "upgrade nodenetctl to the agent's version")
	}
	info, err := os.Stat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return failed("cni", "no CNI socket at "+path, "the agent creates it at start: check cni.socketPath, and that its folder is the host's (a hostPath mount)")
	case err != nil:
		return failed("cni", err.Error(), "run nodenetctl as root")
	case runtime.GOOS != "windows" && info.Mode().Type() != fs.ModeSocket:
		return failed("cni", path+" is not a socket", "delete it and restart the agent, which recreates it")
	case !st.CNI.Ready:
		return failed("cni", "the CNI server on "+path+" is not ready: pods get \"try again later\"", "it gets ready with the network: fix the network check")
	}
	return passed("cni", "the CNI server is ready on %s", path)
}

// conflistExtensions are the files a runtime reads from its CNI conf
// folder (libcni, containerd, CRI-O).
var conflistExtensions = []string{".conf", ".conflist", ".json"}

// checkConflist checks the conflist the agent keeps: that the runtime
// loads it (it sorts first in its folder) and that it names the agent's
// network, plugin and socket (what cni.RenderConflist writes).
func checkConflist(st *status.Status) []check {
	path := st.CNI.ConflistPath
	const rewrite = "delete it: the agent rewrites it from its config (at once on restart)"
	if path == "" {
		return []check{failed("conflist", "the agent reports no conflist path", "upgrade nodenetctl to the agent's version")}
	}
	data, err := os.ReadFile(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return []check{failed("conflist", "no CNI conflist at "+path,
			"the agent writes it once the network is ready: check cni.confDir is the container runtime's CNI conf folder, mounted from the host")}
	case err != nil:
		return []check{failed("conflist", err.Error(), "run nodenetctl as root")}
	}
	list, err := libcni.NetworkConfFromBytes(data)
	if err != nil {
		return []check{failed("conflist", fmt.Sprintf("%s does not parse: %v", path, err), rewrite)}
	}
	var found check
	switch plugin, err := firstPlugin(list); {
	case err != nil:
		found = failed("conflist", fmt.Sprintf("%s: %v", path, err), rewrite)
	case list.Name != st.Network.Name:
		found = failed("conflist", fmt.Sprintf("%s names network %q, but the agent's network is %q", path, list.Name, st.Network.Name), rewrite)
	case plugin.Type != cni.PluginType:
		found = failed("conflist", fmt.Sprintf("%s calls plugin %q, not %q", path, plugin.Type, cni.PluginType), rewrite)
	case plugin.SocketPath != st.CNI.SocketPath:
		found = failed("conflist", fmt.Sprintf("%s points %s at %s, but the agent listens on %s", path, cni.PluginType, plugin.SocketPath, st.CNI.SocketPath), rewrite)
	default:
		found = passed("conflist", "%s calls %s on %s for network %q", path, cni.PluginType, plugin.SocketPath, list.Name)
	}
	return []check{found, checkConflistOrder(path)}
}

// firstPlugin decodes the conflist's first plugin as nodenet-cni's entry.
func firstPlugin(list *libcni.NetworkConfigList) (*cni.NetConf, error) {
	if len(list.Plugins) == 0 {
		return nil, errors.New("no plugins")
	}
	var conf cni.NetConf
	if err := json.Unmarshal(list.Plugins[0].Bytes, &conf); err != nil {
		return nil, fmt.Errorf("first plugin: %w", err)
	}
	return &conf, nil
}

// checkConflistOrder fails when another network config sorts before ours:
// runtimes load the first one in their folder.
func checkConflistOrder(path string) check {
	dir := filepath.Dir(path)
	files, err := libcni.ConfFiles(dir, conflistExtensions)
	if err != nil {
		return failed("conflist order", err.Error(), "run nodenetctl as root")
	}
	slices.Sort(files)
	if len(files) > 0 && files[0] != path {
		return failed("conflist order", fmt.Sprintf("the container runtime loads %s, which sorts before %s", files[0], filepath.Base(path)),
			fmt.Sprintf("delete %s (left by flannel or another CNI?)", files[0]))
	}
	return passed("conflist order", "%s is the first network config in %s", filepath.Base(path), dir)
}

func checkProxy(st *status.Status, opts doctorOptions) check {
	p := st.Proxy
	detail := proxyDetail(p, opts.now)
	switch {
	case !p.Running:
		return failed("proxy", detail, "the proxy starts once the network is ready: fix the network check")
	case p.LastSync.IsZero():
		return failed("proxy", "never synced: "+detail, "read the agent's log for sync errors")
	case !p.Healthy:
		return failed("proxy", detail, "read the agent's log for sync errors")
	case opts.now.Sub(p.LastSync) > opts.maxSyncAge:
		return failed("proxy", fmt.Sprintf("last synced more than %v ago: %s", opts.maxSyncAge, detail),
			"read the agent's log: the proxy is stuck or cannot reach the API server")
	}
	return passed("proxy", "healthy: %s", detail)
}

// Dataplanes and the proxy backend each one runs.
var proxyBackends = map[string]string{"linux": "nftables", "hns": "hns", "sim": "hns"}

// checkSettings checks that the network mode, dataplane and DSR fit
// together.
func checkSettings(st *status.Status) check {
	const name = "settings"
	n, p := st.Network, st.Proxy
	if n.Mode != "overlay" && n.Mode != "l2bridge" {
		return failed(name, fmt.Sprintf("unknown network mode %q", n.Mode), "set network.mode to overlay or l2bridge")
	}
	if want, known := proxyBackends[st.Dataplane]; known && p.Backend != want {
		return failed(name, fmt.Sprintf("the %s dataplane runs the %s proxy backend, not %s", st.Dataplane, want, p.Backend), "upgrade the agent: this one mixes dataplanes")
	}
	hnsLike := st.Dataplane == "hns" || st.Dataplane == "sim"
	if hnsLike && n.Mode == "overlay" && n.Ready && n.SourceVIP == "" {
		return failed(name, "overlay network without a source VIP: services can't reach remote backends",
			"read the agent's log: it creates the source VIP with the network")
	}
	if st.Dataplane == "linux" && p.DSR {
		return warned(name, "DSR is on, but the Linux dataplane has no DSR: services use plain DNAT here",
			"set proxy.enableDSR only in Windows nodes' config")
	}
	return passed(name, "%s network on the %s dataplane with DSR %s", n.Mode, st.Dataplane, onOff(p.DSR))
}
