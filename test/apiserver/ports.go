package apiserver

import (
	"fmt"
	"net"
)

// freePorts returns n distinct ports on host that were free a moment ago.
// All listeners stay open until every port is chosen so the kernel cannot
// hand out the same port twice; a port can still be taken by someone else
// before the child binds it, which Start handles by retrying.
func freePorts(host string, n int) ([]int, error) {
	ports := make([]int, 0, n)
	for range n {
		l, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
		if err != nil {
			return nil, fmt.Errorf("find free port on %s: %w", host, err)
		}
		defer l.Close()
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}
