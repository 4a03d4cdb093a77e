// Package testroot is for privileged tests: they need root for network
// namespaces, links and nftables. Outside CI they skip when not root; in
// CI (CI=true) they must run, so they fail instead.
package testroot

import (
	"os"
	"testing"
)

// Require skips tb when not root, or fails it when CI=true. what says what
// the test needs root for.
func Require(tb testing.TB, what string) {
	tb.Helper()
	if os.Geteuid() == 0 {
		return
	}
	if os.Getenv("CI") == "true" {
		tb.Fatalf("this test needs root (%s), and CI=true forbids skipping it", what)
	}
	tb.Skipf("needs root: %s", what)
}
