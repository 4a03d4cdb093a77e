package cri

import (
	"context"
	"net"

	"github.com/Microsoft/go-winio"

	"github.com/nodenet/nodenet/config"
)

// dialer connects to ep: a named pipe (containerd's default on Windows)
// or an AF_UNIX socket.
func dialer(ep config.RuntimeEndpoint) (func(context.Context) (net.Conn, error), error) {
	if ep.Network == "npipe" {
		return func(ctx context.Context) (net.Conn, error) { return winio.DialPipeContext(ctx, ep.Address) }, nil
	}
	return unixDialer(ep.Address), nil
}
