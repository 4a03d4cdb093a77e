//go:build !windows

package hnsnet

// systemForwarding has no host to turn forwarding on for off Windows.
func systemForwarding() Forwarding { return nil }
