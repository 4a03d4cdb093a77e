// Command conformance brings up a real-node nodenet cluster
// (test/kubenode) and runs Kubernetes' own e2e suite against it, focused
// on [sig-network] conformance, then writes docs/conformance.md: versions,
// the command, the wall time and every spec's result. `make conformance`
// runs it with the binaries the hack/build-*.sh scripts print.
//
// Binaries beyond test/kubenode's: NODENET_E2E_TEST (e2e.test at the
// apiserver's version), NODENET_GINKGO (optional: without it the specs
// run one at a time), NODENET_KUBECTL (the e2e helpers exec kubectl),
// NODENET_COREDNS (optional: without it the DNS specs are skipped).
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/nodenet/nodenet/test/apiserver"
	"github.com/nodenet/nodenet/test/cluster"
	"github.com/nodenet/nodenet/test/kubenode"
)

const defaultFocus = `\[sig-network\].*\[Conformance\]`

// networkFocus and networkSkips are kube-proxy's own periodic
// sig-network job's (ci-kubernetes-kind-network in kubernetes/test-infra,
// config/jobs/kubernetes/sig-network/sig-network-kind.yaml), limited to
// [sig-network] specs.
const networkFocus = `\[sig-network\]`

var networkSkips = []Skip{
	{Pattern: `\[Feature:(Networking-IPv6|Example|Federation|PerformanceDNS)\]`, Reason: "skipped by kube-proxy's ci-kubernetes-kind-network job (IPv6-only, examples, federation, DNS performance)"},
	{Pattern: `LB.health.check|LoadBalancer|load.balancer|GCE`, Reason: "skipped by ci-kubernetes-kind-network: needs a cloud load balancer"},
	{Pattern: `NetworkPolicy`, Reason: "skipped by ci-kubernetes-kind-network: NetworkPolicy is its own job (nodenet's is a later issue)"},
	{Pattern: `DualStack`, Reason: "skipped by ci-kubernetes-kind-network: this cluster is single-stack IPv4"},
}

// flagSet reports whether the command line set flag name.
func flagSet(name string) bool {
	set := false
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}

// baseSkips are specs this environment cannot run, whatever nodenet does.
var baseSkips = []Skip{}

func main() {
	bin := flag.String("bin", "bin", "directory holding nodenet-agent, nodenet-cni and nodenetctl (make build)")
	nodes := flag.Int("nodes", 2, "how many nodes")
	out := flag.String("out", "docs/conformance.md", "where to write the report (empty: nowhere)")
	work := flag.String("work", "", "work dir (logs are kept there); default a new dir under /tmp")
	procs := flag.Int("procs", 3, "parallel ginkgo processes (with NODENET_GINKGO)")
	focus := flag.String("focus", defaultFocus, "which specs")
	timeout := flag.Duration("timeout", 90*time.Minute, "bound on the e2e run")
	note := flag.String("note", "", "what of the environment differs from the build scripts' (goes into the report)")
	profile := flag.String("profile", "conformance", "which specs: conformance ([sig-network] conformance specs) or network (kube-proxy's own periodic job, ci-kubernetes-kind-network: every [sig-network] spec but its skips); -focus overrides")
	mode := flag.String("mode", "install", "how nodenet runs: install (make image, then kubectl apply -k deploy/: the DaemonSet, as users install it) or process (nodenet-agent processes the harness starts, for debugging)")
	flag.Parse()
	var extraSkips []Skip
	switch *profile {
	case "conformance":
	case "network":
		if !flagSet("focus") {
			*focus = networkFocus
		}
		extraSkips = networkSkips
	default:
		fmt.Fprintf(os.Stderr, "conformance: -profile %q: want conformance or network\n", *profile)
		os.Exit(2)
	}
	if *mode != "install" && *mode != "process" {
		fmt.Fprintf(os.Stderr, "conformance: -mode %q: want install or process\n", *mode)
		os.Exit(2)
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if *work == "" {
		dir, err := os.MkdirTemp("", "nnconf-")
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		*work = dir
	}
	var failed bool
	err := cluster.RunProgram(ctx, os.Stderr, func(p *cluster.Program) {
		failed = run(p, config{mode: *mode, profile: *profile, skips: extraSkips, bin: *bin, nodes: *nodes, out: *out, work: *work, procs: *procs, focus: *focus, timeout: *timeout, note: *note})
	})
	fmt.Fprintf(os.Stderr, "conformance: logs in %s\n", *work)
	if err != nil {
		fmt.Fprintln(os.Stderr, "conformance:", err)
		os.Exit(1)
	}
	if failed {
		os.Exit(1)
	}
}

type config struct {
	mode, profile, bin, out, work, focus, note string
	skips                                      []Skip
	nodes, procs                               int
	timeout                                    time.Duration
}

// run returns whether any spec failed.
func run(p *cluster.Program, cfg config) bool {
	e2eTest := os.Getenv("NODENET_E2E_TEST")
	if e2eTest == "" {
		p.Fatalf("NODENET_E2E_TEST not set (hack/build-e2e.sh --print-env)")
	}
	ginkgo := os.Getenv("NODENET_GINKGO")
	kubectl := os.Getenv("NODENET_KUBECTL")
	coredns := os.Getenv("NODENET_COREDNS")
	skips := append(append([]Skip(nil), baseSkips...), cfg.skips...)
	if coredns == "" {
		skips = append(skips, Skip{Pattern: `\[sig-network\] DNS`, Reason: "CoreDNS not built (NODENET_COREDNS unset), so the cluster has no DNS"})
	}

	start := time.Now()
	opts := kubenode.Options{
		Nodes:      cfg.nodes,
		BinDir:     cfg.bin,
		ClusterDNS: coredns != "",
		Dir:        filepath.Join(cfg.work, "cluster"),
		KeepLogs:   true,
		Progress:   func(s string) { p.Logf("conformance: %s", s) },
	}
	installed := "nodenet-agent processes the harness starts (-mode process)"
	if cfg.mode == "install" {
		if kubectl == "" {
			p.Fatalf("NODENET_KUBECTL not set (hack/build-kubectl.sh --print-env): -mode install applies deploy/ with it")
		}
		p.Logf("conformance: building the image (make image, this platform)")
		archive, ref, err := kubenode.BuildImage(p.Context(), filepath.Join(cfg.work, "image"), imageVersion())
		if err != nil {
			p.Fatalf("%v", err)
		}
		deploy, err := kubenode.DeployDir(p.Context())
		if err != nil {
			p.Fatalf("%v", err)
		}
		opts.Install = &kubenode.Install{ImageArchive: archive, Image: ref, DeployDir: deploy, Kubectl: kubectl}
		installed = "the DaemonSet: image " + ref + " built by make image, installed with kubectl apply -k on an overlay of deploy/ that only sets the image"
	}
	c := kubenode.New(p, opts)
	if coredns != "" {
		if err := startCoreDNS(p, c, coredns); err != nil {
			p.Fatalf("CoreDNS: %v", err)
		}
	}
	setup := time.Since(start)
	p.Logf("conformance: cluster up in %s", setup.Round(time.Second))

	reportDir := filepath.Join(cfg.work, "report")
	if err := os.MkdirAll(reportDir, 0o755); err != nil {
		p.Fatalf("%v", err)
	}
	e2eArgs := []string{
		"--kubeconfig=" + c.Kubeconfig,
		"--provider=local",
		"--report-dir=" + reportDir,
		"--dns-domain=cluster.local",
		"--allowed-not-ready-nodes=0",
		"--minStartupPods=0",
	}
	if kubectl != "" {
		e2eArgs = append(e2eArgs, "--kubectl-path="+kubectl)
	}
	var cmdline []string
	if ginkgo != "" {
		cmdline = append([]string{ginkgo, "--procs=" + strconv.Itoa(cfg.procs), "--timeout=" + cfg.timeout.String(),
			"--no-color", "--focus=" + cfg.focus}, quoteIf("--skip=", skipRegexp(skips))...)
		cmdline = append(cmdline, e2eTest, "--")
		cmdline = append(cmdline, e2eArgs...)
	} else {
		cmdline = append([]string{e2eTest, "--ginkgo.timeout=" + cfg.timeout.String(), "--ginkgo.no-color",
			"--ginkgo.focus=" + cfg.focus}, quoteIf("--ginkgo.skip=", skipRegexp(skips))...)
		cmdline = append(cmdline, e2eArgs...)
	}
	logPath := filepath.Join(cfg.work, "e2e.log")
	p.Logf("conformance: running %s (log %s)", strings.Join(cmdline, " "), logPath)
	e2eStart := time.Now()
	runErr := runLogged(p.Context(), cmdline, logPath, c.Kubeconfig)
	wall := time.Since(e2eStart)
	p.Logf("conformance: e2e finished in %s: %v", wall.Round(time.Second), runErr)

	junitPath := filepath.Join(reportDir, "junit_01.xml")
	f, err := os.Open(junitPath)
	if err != nil {
		p.Fatalf("no JUnit report (%v); e2e: %v; see %s", err, runErr, logPath)
	}
	defer f.Close()
	results, err := parseJUnit(f, regexp.MustCompile(cfg.focus), skips)
	if err != nil {
		p.Fatalf("%v", err)
	}
	verbs := map[string]int{}
	for _, n := range c.Nodes {
		v, err := n.CNIVerbs()
		if err != nil {
			p.Errorf("%v", err)
		}
		for k, x := range v {
			verbs[k] += x
		}
	}
	rep := Report{
		Date:     time.Now(),
		Nodes:    cfg.nodes,
		Versions: versions(c, e2eTest, coredns),
		Command:  fmt.Sprintf("make conformance   # = go run ./test/kubenode/conformance -nodes %d, which runs:\n%s", cfg.nodes, displayCommand(cmdline, c.Kubeconfig, reportDir)),
		Wall:     wall,
		Setup:    setup,
		Results:  results,
		Skips:    skips,
		Verbs:    verbs,
		Notes:    notes,
		EnvNote:  cfg.note,
		Install:  installed,
		Profile:  cfg.profile,
	}
	pass, fail, skip := Counts(results)
	p.Logf("conformance: %d specs: %d passed, %d failed, %d skipped", len(results), pass, fail, skip)
	if cfg.out != "" {
		if err := os.WriteFile(cfg.out, []byte(rep.Markdown()), 0o644); err != nil {
			p.Errorf("%v", err)
		}
		p.Logf("conformance: wrote %s", cfg.out)
	}
	return fail > 0
}

// imageVersion is the version the conformance image reports: the
// commit, as make image names it.
func imageVersion() string {
	out, err := exec.Command("git", "describe", "--always", "--dirty", "--tags").Output()
	if v := strings.TrimSpace(string(out)); err == nil && v != "" {
		return v
	}
	return "conformance"
}

// notes explain failures the environment causes, by spec name fragment;
// filled in as runs show them.
var notes = map[string]string{}

func quoteIf(flag, v string) []string {
	if v == "" {
		return nil
	}
	return []string{flag + v}
}

// displayCommand is cmdline with the run's temporary paths named.
func displayCommand(cmdline []string, kubeconfig, reportDir string) string {
	var out []string
	for _, a := range cmdline {
		a = strings.ReplaceAll(a, kubeconfig, "$KUBECONFIG")
		a = strings.ReplaceAll(a, reportDir, "$REPORT_DIR")
		if strings.ContainsAny(a, `\[]|*() `) {
			a = "'" + a + "'"
		}
		out = append(out, a)
	}
	return strings.Join(out, " ")
}

// runLogged runs cmdline with its output going to logPath and stdout.
func runLogged(ctx context.Context, cmdline []string, logPath, kubeconfig string) error {
	log, err := os.Create(logPath)
	if err != nil {
		return err
	}
	defer log.Close()
	cmd := exec.CommandContext(ctx, cmdline[0], cmdline[1:]...)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+kubeconfig)
	w := io.MultiWriter(log, os.Stdout)
	cmd.Stdout, cmd.Stderr = w, w
	// ginkgo runs e2e.test processes of its own: a process group lets an
	// interrupt reach them all, and nothing outlives the run.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGINT) }
	cmd.WaitDelay = 30 * time.Second
	err = cmd.Run()
	if cmd.Process != nil {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}
	return err
}

// versions lists what ran, each binary asked for its own version.
func versions(c *kubenode.Cluster, e2eTest, coredns string) []string {
	ask := func(label, bin string, args ...string) string {
		out, err := exec.Command(bin, args...).CombinedOutput()
		v := strings.TrimSpace(string(out))
		if i := strings.IndexByte(v, '\n'); i >= 0 {
			v = v[:i]
		}
		if err != nil || v == "" {
			v = "(unknown)"
		}
		return label + ": " + v
	}
	vs := []string{
		"kube-apiserver, kube-controller-manager, kube-scheduler, kubelet, e2e.test: " + apiserver.KubeVersion + " (k8s.io/kubernetes from the Go module proxy)",
		ask("kubelet", c.Bins.Kubelet, "--version"),
		ask("containerd", c.Bins.Containerd, "--version"),
		ask("runc", c.Bins.Runc, "--version"),
		"etcd " + apiserver.EtcdVersion,
		"nodenet: this repository at the commit of this file",
	}
	if coredns != "" {
		vs = append(vs, ask("CoreDNS", coredns, "-version"))
	}
	return vs
}
