//go:build ignore

// Command pause is the sandbox container's process for images built by
// hack/build-node-binaries.sh: it holds the pod's namespaces open until it is
// told to stop, and as pid 1 of a shared pid namespace it reaps the zombies
// other containers leave behind. It is built statically (CGO_ENABLED=0) so
// it runs in an image with no libc.
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == "-v" {
		os.Stdout.WriteString("nodenet pause\n")
		return
	}
	sig := make(chan os.Signal, 4)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM, syscall.SIGCHLD)
	for s := range sig {
		if s != syscall.SIGCHLD {
			os.Exit(0)
		}
		// One SIGCHLD may stand for several exits: reap until none is left.
		for {
			var ws syscall.WaitStatus
			pid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil)
			if pid <= 0 || err != nil {
				break
			}
		}
	}
}
