//go:build !windows

package api

// DefaultSocketPath is this OS's default cni.socketPath.
const DefaultSocketPath = DefaultSocketPathLinux
