// Package nsexec runs Go code inside a network namespace (Linux): on a
// locked OS thread of its own goroutine, moved into the namespace and
// always moved back, so no other goroutine ever runs in the wrong one.
package nsexec
