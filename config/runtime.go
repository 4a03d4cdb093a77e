package config

import (
	"errors"
	"fmt"
	"strings"
)

// RuntimeEndpoint is a parsed cni.runtimeEndpoint: where to dial the
// container runtime's CRI.
type RuntimeEndpoint struct {
	// Network is "unix" (a unix socket) or "npipe" (a Windows named pipe).
	Network string
	// Address is the socket's path, or the pipe's name as Windows spells
	// it (\\.\pipe\containerd-containerd).
	Address string
}

// Schemes of cni.runtimeEndpoint, as kubelet's containerRuntimeEndpoint
// spells them.
const (
	runtimeSchemeUnix  = "unix://"
	runtimeSchemeNpipe = "npipe://"
)

// ParseRuntimeEndpoint parses a CRI endpoint by target o's rules:
// "unix://" and an absolute socket path on o (at most MaxSocketPathLength
// bytes), or on Windows "npipe://" and a pipe, "npipe:////./pipe/<name>"
// (kubelet's spelling; "npipe://./pipe/<name>" and backslashes work too).
func ParseRuntimeEndpoint(o OS, endpoint string) (RuntimeEndpoint, error) {
	o = o.rules()
	switch {
	case strings.HasPrefix(endpoint, runtimeSchemeUnix):
		path := strings.TrimPrefix(endpoint, runtimeSchemeUnix)
		if !isAbsPath(o, path) {
			return RuntimeEndpoint{}, fmt.Errorf("must be unix:// and an absolute socket path on %s", o)
		}
		if len(path) > MaxSocketPathLength {
			return RuntimeEndpoint{}, fmt.Errorf("the socket path is longer than %d bytes", MaxSocketPathLength)
		}
		return RuntimeEndpoint{Network: "unix", Address: path}, nil
	case strings.HasPrefix(endpoint, runtimeSchemeNpipe):
		if o != OSWindows {
			return RuntimeEndpoint{}, errors.New("named pipes exist only on Windows; use unix:// and a socket path, e.g. " + DefaultRuntimeEndpointLinux)
		}
		pipe, err := parsePipe(strings.TrimPrefix(endpoint, runtimeSchemeNpipe))
		if err != nil {
			return RuntimeEndpoint{}, err
		}
		return RuntimeEndpoint{Network: "npipe", Address: pipe}, nil
	}
	if o == OSWindows {
		return RuntimeEndpoint{}, errors.New("must start with npipe:// or unix://, e.g. " + DefaultRuntimeEndpointWindows)
	}
	return RuntimeEndpoint{}, errors.New("must start with unix://, e.g. " + DefaultRuntimeEndpointLinux)
}

// parsePipe turns what follows npipe:// into a pipe name: //./pipe/x, or
// ./pipe/x, becomes \\.\pipe\x.
func parsePipe(rest string) (string, error) {
	rest = strings.TrimLeft(strings.ReplaceAll(rest, `\`, "/"), "/")
	host, name, ok := strings.Cut(rest, "/pipe/")
	if !ok || host == "" || strings.Contains(host, "/") || name == "" || strings.Contains(name, "/") {
		return "", fmt.Errorf("must name a pipe as npipe:////<host>/pipe/<name>, e.g. %s", DefaultRuntimeEndpointWindows)
	}
	return `\\` + host + `\pipe\` + name, nil
}
