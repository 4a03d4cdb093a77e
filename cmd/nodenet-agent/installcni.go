package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"

	"github.com/spf13/pflag"

	"github.com/nodenet/nodenet/cni/install"
)

// pluginName is the CNI plugin's file name on this OS.
func pluginName() string {
	if runtime.GOOS == "windows" {
		return "nodenet-cni.exe"
	}
	return "nodenet-cni"
}

// installCNI is `nodenet-agent install-cni`: the plugin shipped beside
// this binary (or --source) into --dir, atomically.
func installCNI(args []string, stdout, stderr io.Writer) int {
	fs := pflag.NewFlagSet("nodenet-agent install-cni", pflag.ContinueOnError)
	fs.SetOutput(stderr)
	dir := fs.String("dir", "", "the runtime's CNI bin dir, as mounted in this container (required)")
	source := fs.String("source", "", "the plugin binary to install (default: "+pluginName()+" beside nodenet-agent)")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return exitOK
		}
		fmt.Fprintf(stderr, "nodenet-agent install-cni: %v\n", err)
		return exitUsage
	}
	if *dir == "" || fs.NArg() > 0 {
		fmt.Fprintln(stderr, "nodenet-agent install-cni: --dir is required and takes no arguments")
		return exitUsage
	}
	src := *source
	if src == "" {
		self, err := os.Executable()
		if err != nil {
			fmt.Fprintf(stderr, "nodenet-agent install-cni: find the plugin: %v\n", err)
			return exitFailed
		}
		src = filepath.Join(filepath.Dir(self), pluginName())
	}
	res, err := install.Plugin(install.Options{Source: src, Dir: *dir, Name: pluginName()})
	if err != nil {
		fmt.Fprintf(stderr, "nodenet-agent install-cni: %v\n", err)
		return exitFailed
	}
	if res.Unchanged {
		fmt.Fprintf(stdout, "%s is up to date\n", res.Path)
	} else {
		fmt.Fprintf(stdout, "installed %s\n", res.Path)
	}
	return exitOK
}
