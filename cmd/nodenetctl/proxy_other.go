//go:build !linux

package main

import (
	"fmt"
	"io"

	"github.com/nodenet/nodenet/config"
)

// render needs the nftables backend, which only builds on Linux.
func render(_ *config.AgentConfiguration, _ proxyFlags, _, stderr io.Writer) int {
	fmt.Fprintln(stderr, "nodenetctl proxy render: renders the nftables backend, which needs a Linux build of nodenetctl")
	return exitUsage
}
