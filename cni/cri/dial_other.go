//go:build !windows

package cri

import (
	"context"
	"fmt"
	"net"

	"github.com/nodenet/nodenet/config"
)

// dialer connects to ep, a unix socket (named pipes are Windows only).
func dialer(ep config.RuntimeEndpoint) (func(context.Context) (net.Conn, error), error) {
	if ep.Network != "unix" {
		return nil, fmt.Errorf("%s endpoints are not supported on this OS", ep.Network)
	}
	return unixDialer(ep.Address), nil
}
