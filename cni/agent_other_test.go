//go:build !linux

package cni_test

import (
	"fmt"
	"os"
)

// runTestAgent: the agent-process tests need Linux network namespaces.
func runTestAgent(string) int {
	fmt.Fprintln(os.Stderr, "test agent: Linux only")
	return 2
}
