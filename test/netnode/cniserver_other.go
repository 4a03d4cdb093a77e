//go:build !linux

package netnode

// RunChild does nothing: netnode's child processes need Linux.
func RunChild() {}
