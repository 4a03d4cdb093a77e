package main

import (
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/spf13/pflag"

	"github.com/nodenet/nodenet/config"
)

const configUsage = `Usage: nodenetctl config <validate|convert> --config FILE [flags]

  validate   print every warning and error (with its field path); exit 1 on errors
  convert    print the config as an AgentConfiguration on stdout or to -o FILE;
             warnings and errors go to stderr, and errors exit 1 after writing

Flags:
`

// configFlags are the flags every config subcommand takes.
type configFlags struct {
	file      string
	os        string
	nodeLocal bool
	output    string // convert only
}

func runConfig(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || isHelp(args[0]) {
		newConfigFlagSet(args, &configFlags{}, stderr).Usage()
		if len(args) == 0 {
			return exitUsage
		}
		return exitOK
	}
	sub := args[0]
	if sub != "validate" && sub != "convert" {
		fmt.Fprintf(stderr, "nodenetctl config: unknown command %q\n\n%s", sub, configUsage)
		return exitUsage
	}
	var flags configFlags
	fs := newConfigFlagSet(args, &flags, stderr)
	if err := fs.Parse(args[1:]); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return exitOK
		}
		fmt.Fprintf(stderr, "nodenetctl config %s: %v\n", sub, err)
		fs.Usage()
		return exitUsage
	}
	if msg := flags.check(sub, fs.NArg()); msg != "" {
		fmt.Fprintf(stderr, "nodenetctl config %s: %s\n", sub, msg)
		fs.Usage()
		return exitUsage
	}
	if sub == "validate" {
		return validate(flags, stdout)
	}
	return convert(flags, stdout, stderr)
}

func newConfigFlagSet(args []string, flags *configFlags, stderr io.Writer) *pflag.FlagSet {
	name := "config"
	if len(args) > 0 {
		name += " " + args[0]
	}
	fs := pflag.NewFlagSet(name, pflag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(stderr, configUsage)
		fs.PrintDefaults()
	}
	fs.StringVar(&flags.file, "config", "", "the config file: an AgentConfiguration, a KubeProxyConfiguration or a flannel net-conf.json (required)")
	fs.StringVar(&flags.os, "os", string(config.HostOS()), "the OS of the nodes the config is for: linux or windows")
	fs.BoolVar(&flags.nodeLocal, "node-local", false, "load it as this machine's agent would: nodeName from NODE_NAME or the hostname, per-OS paths filled in (default: a config shared by many nodes)")
	if len(args) == 0 || args[0] == "convert" {
		fs.StringVarP(&flags.output, "output", "o", "", "write the AgentConfiguration to this file, atomically, instead of stdout")
	}
	return fs
}

// check returns what is wrong with the flags, or "".
func (f configFlags) check(sub string, nargs int) string {
	switch {
	case nargs > 0:
		return "unexpected arguments; pass the file with --config"
	case f.file == "":
		return "--config is required"
	case f.os != string(config.OSLinux) && f.os != string(config.OSWindows):
		return fmt.Sprintf("--os must be linux or windows, not %q", f.os)
	}
	return ""
}

// loaded is the outcome of loading the --config file.
type loaded struct {
	cfg      *config.AgentConfiguration
	format   config.Format
	warnings config.Warnings
	err      error
}

func load(flags configFlags) loaded {
	data, err := os.ReadFile(flags.file)
	if err != nil {
		return loaded{err: err}
	}
	format, _ := config.DetectFormat(data) // Load reports the same error
	cfg, warnings, err := config.Load(data, config.LoadOptions{OS: config.OS(flags.os), Shared: !flags.nodeLocal})
	return loaded{cfg: cfg, format: format, warnings: warnings, err: err}
}

// report prints the warnings and errors, one per line, and returns how
// many errors there were.
func (l loaded) report(w io.Writer) int {
	for _, warning := range l.warnings {
		fmt.Fprintf(w, "warning: %s\n", warning)
	}
	if l.err == nil {
		return 0
	}
	fieldErrs := config.FieldErrors(l.err)
	if len(fieldErrs) == 0 {
		fmt.Fprintf(w, "error: %v\n", l.err)
		return 1
	}
	for _, e := range fieldErrs {
		fmt.Fprintf(w, "error: %v\n", e)
	}
	return len(fieldErrs)
}

func validate(flags configFlags, stdout io.Writer) int {
	l := load(flags)
	n := l.report(stdout)
	if n > 0 {
		fmt.Fprintf(stdout, "%s: %s\n", flags.file, plural(n, "error"))
		return exitInvalid
	}
	from := ""
	if l.format != config.FormatAgentConfiguration {
		from = fmt.Sprintf("converted from %s, ", l.format)
	}
	fmt.Fprintf(stdout, "%s: valid %s for %s nodes (%s%s)\n",
		flags.file, config.Kind, flags.os, from, plural(len(l.warnings), "warning"))
	return exitOK
}

func convert(flags configFlags, stdout, stderr io.Writer) int {
	l := load(flags)
	n := l.report(stderr)
	if l.cfg == nil {
		return exitInvalid
	}
	out, err := config.Marshal(l.cfg)
	if err != nil {
		fmt.Fprintf(stderr, "error: %v\n", err)
		return exitInvalid
	}
	if flags.output == "" {
		_, err = stdout.Write(out)
	} else {
		err = config.WriteFile(l.cfg, flags.output)
	}
	if err != nil {
		fmt.Fprintf(stderr, "error: %v\n", err)
		return exitInvalid
	}
	if n > 0 {
		fmt.Fprintf(stderr, "%s: converted from %s with %s to fix\n", flags.file, l.format, plural(n, "error"))
		return exitInvalid
	}
	return exitOK
}

func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
