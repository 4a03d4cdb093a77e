//go:build !linux

package main

import (
	"fmt"
	"io"

	"github.com/nodenet/nodenet/config"
)

// render needs the nftables backend, which only builds on Linux; -o hns
// and -o json render anywhere.
func render(_ *config.AgentConfiguration, _ proxyFlags, _, stderr io.Writer) int {
	fmt.Fprintln(stderr, "nodenetctl proxy render: -o nft and -o state render the nftables backend, which needs a Linux build of nodenetctl; -o hns and -o json work here")
	return exitUsage
}
