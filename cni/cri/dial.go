package cri

import (
	"context"
	"net"
)

func unixDialer(path string) func(context.Context) (net.Conn, error) {
	var d net.Dialer
	return func(ctx context.Context) (net.Conn, error) { return d.DialContext(ctx, "unix", path) }
}
