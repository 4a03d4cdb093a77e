//go:build !linux

// Command conformance is Linux only: its nodes are network namespaces.
package main

import (
	"fmt"
	"os"
)

func main() {
	fmt.Fprintln(os.Stderr, "conformance runs on Linux only (network namespaces, kubelet, containerd; as root)")
	os.Exit(1)
}
