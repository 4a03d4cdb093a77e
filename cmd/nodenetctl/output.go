package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/util/duration"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/yaml"

	"github.com/nodenet/nodenet/agent/status"
	"github.com/nodenet/nodenet/config"
)

// exitFailed: the agent could not be asked, or a doctor check failed.
const exitFailed = exitInvalid

// Output formats of the agent commands.
const (
	outputTable = "table"
	outputJSON  = "json"
	outputYAML  = "yaml"
)

// ctl runs the commands that ask a running agent (status, services, dump,
// doctor). Its fields are the outside world, which tests replace.
type ctl struct {
	stdout, stderr io.Writer
	now            func() time.Time
	// newKube returns the API client for doctor --kubeconfig.
	newKube func(kubeconfig string, timeout time.Duration) (kubernetes.Interface, error)
}

func newCtl(stdout, stderr io.Writer) *ctl {
	return &ctl{stdout: stdout, stderr: stderr, now: time.Now, newKube: kubeClient}
}

// run dispatches one agent command; args[0] is its name.
func (c *ctl) run(args []string) int {
	switch args[0] {
	case "status":
		return c.status(args[1:])
	case "services":
		return c.services(args[1:])
	case "dump":
		return c.dump(args[1:])
	case "doctor":
		return c.doctor(args[1:])
	}
	fmt.Fprintf(c.stderr, "nodenetctl: unknown command %q\n\n%s", args[0], usage)
	return exitUsage
}

func kubeClient(kubeconfig string, timeout time.Duration) (kubernetes.Interface, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("load kubeconfig: %w", err)
	}
	cfg.Timeout = timeout
	cfg.UserAgent = "nodenetctl"
	return kubernetes.NewForConfig(cfg)
}

// defaultSocketPath is where an agent with the default config serves its
// local API on this OS: next to the default CNI socket.
func defaultSocketPath() string {
	var cfg config.AgentConfiguration
	config.SetDefaults(&cfg, config.DefaultingOptions{
		OS: config.HostOS(),
		// Only the CNI paths matter here: don't read the environment.
		Getenv:   func(string) string { return "" },
		Hostname: func() (string, error) { return "", nil },
	})
	return status.SocketPath(cfg.CNI.SocketPath)
}

// agentFlags are the flags every agent command takes.
type agentFlags struct {
	socket  string
	output  string
	timeout time.Duration
}

// flagSet returns the command's flag set with the common flags; usage is
// printed above the flags' defaults.
func (c *ctl) flagSet(name, usage string, f *agentFlags) *pflag.FlagSet {
	fs := pflag.NewFlagSet(name, pflag.ContinueOnError)
	fs.SetOutput(c.stderr)
	fs.Usage = func() {
		fmt.Fprint(c.stderr, usage)
		fs.PrintDefaults()
	}
	fs.StringVar(&f.socket, "socket", defaultSocketPath(), "the agent's local API socket (agent.sock next to the config's cni.socketPath)")
	fs.StringVarP(&f.output, "output", "o", outputTable, "output format: table, json or yaml")
	fs.DurationVar(&f.timeout, "timeout", status.DefaultTimeout, "how long to wait for each answer")
	return fs
}

// parse parses args; when it returns false, the command is over with
// code (help, or a usage error already printed).
func (c *ctl) parse(fs *pflag.FlagSet, f *agentFlags, args []string, maxArgs int) (code int, ok bool) {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return exitOK, false
		}
		return c.usageError(fs, err.Error()), false
	}
	switch {
	case fs.NArg() > maxArgs:
		return c.usageError(fs, fmt.Sprintf("unexpected arguments: %s", strings.Join(fs.Args()[maxArgs:], " "))), false
	case f.output != outputTable && f.output != outputJSON && f.output != outputYAML:
		return c.usageError(fs, fmt.Sprintf("-o must be table, json or yaml, not %q", f.output)), false
	case f.socket == "":
		return c.usageError(fs, "--socket must not be empty"), false
	}
	return exitOK, true
}

func (c *ctl) usageError(fs *pflag.FlagSet, msg string) int {
	fmt.Fprintf(c.stderr, "nodenetctl %s: %s\n", fs.Name(), msg)
	fs.Usage()
	return exitUsage
}

// fail prints err for command name and returns exitFailed.
func (c *ctl) fail(name string, err error) int {
	fmt.Fprintf(c.stderr, "nodenetctl %s: %v\n", name, err)
	return exitFailed
}

func (f agentFlags) client() *status.Client {
	cl := status.NewClient(f.socket)
	cl.Timeout = f.timeout
	return cl
}

// printAs writes v as JSON or YAML, or calls table for the table format.
func printAs(w io.Writer, format string, v any, table func(w io.Writer)) error {
	switch format {
	case outputJSON:
		out, err := json.MarshalIndent(v, "", "  ")
		if err != nil {
			return err
		}
		_, err = w.Write(append(out, '\n'))
		return err
	case outputYAML:
		out, err := yaml.Marshal(v)
		if err != nil {
			return err
		}
		_, err = w.Write(out)
		return err
	}
	table(w)
	return nil
}

// tabulate lays out rows (cells separated by \t, rows ending in \n)
// written by fill in aligned columns, without trailing spaces.
func tabulate(w io.Writer, fill func(tw io.Writer)) {
	var buf bytes.Buffer
	tw := tabwriter.NewWriter(&buf, 0, 0, 2, ' ', 0)
	fill(tw)
	tw.Flush()
	sc := bufio.NewScanner(&buf)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		fmt.Fprintln(w, strings.TrimRight(sc.Text(), " "))
	}
}

// ago says how long before now t was: "3s ago", "never" for the zero time.
func ago(now, t time.Time) string {
	if t.IsZero() {
		return "never"
	}
	d := now.Sub(t)
	if d < 0 {
		d = 0
	}
	return duration.HumanDuration(d) + " ago"
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

func onOff(b bool) string {
	if b {
		return "on"
	}
	return "off"
}

// orNone returns s, or "none" when it is empty.
func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}
