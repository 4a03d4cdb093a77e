package main

import (
	"fmt"
	"io"
	"os"
)

// Exit statuses.
const (
	exitOK      = 0
	exitInvalid = 1 // the config has errors or can't be read
	exitUsage   = 2
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run executes one nodenetctl command line (without the program name) and
// returns its exit status.
func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || isHelp(args[0]) {
		fmt.Fprint(stderr, usage)
		if len(args) == 0 {
			return exitUsage
		}
		return exitOK
	}
	switch args[0] {
	case "config":
		return runConfig(args[1:], stdout, stderr)
	case "proxy":
		return runProxy(args[1:], stdout, stderr)
	case "cleanup":
		return runCleanup(args[1:], stdout, stderr)
	case "status", "services", "dump", "doctor":
		return newCtl(stdout, stderr).run(args)
	}
	fmt.Fprintf(stderr, "nodenetctl: unknown command %q\n\n%s", args[0], usage)
	return exitUsage
}

func isHelp(arg string) bool {
	return arg == "-h" || arg == "--help" || arg == "help"
}

const usage = `Usage: nodenetctl <command> [flags]

Commands:
  status            show this node's agent: network, CNI, proxy, readiness, sync ages
  services          list the service ports programmed on this node, with their backends
  dump [hns|nft]    print what the dataplane holds (HNS objects or the nftables table)
  doctor            check that config, conflist, network, proxy and Node agree; say what to fix
  config validate   check a config and print every warning and error
  config convert    print a kube-proxy, flannel or nodenet config as an AgentConfiguration
  proxy render      print what the service proxy programs for a folder of manifests
  cleanup           remove what nodenet left on this drained Linux node, after uninstall

Run "nodenetctl <command> [<subcommand>] --help" for its flags.
`
