//go:build !linux

// Command demo is Linux only: it builds nodes from network namespaces.
package main

import (
	"fmt"
	"os"
)

func main() {
	fmt.Fprintln(os.Stderr, "the nodenet demo runs on Linux only (network namespaces, as root)")
	os.Exit(1)
}
