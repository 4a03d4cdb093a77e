package hostport

import (
	"fmt"

	"github.com/containernetworking/plugins/pkg/ns"

	"github.com/nodenet/nodenet/internal/nftnl"
)

// openConn opens a netlink connection for table in the netns at
// netnsPath ("" = the agent's own): the socket is made on a thread inside
// that netns and stays bound to it, so later calls need no thread of the
// netns. It knows the types of the hostPort maps, whose elements it
// writes and lists without declaring them in every transaction.
func openConn(table, netnsPath string) (*nftnl.Conn, error) {
	var conn *nftnl.Conn
	open := func() error {
		var err error
		conn, err = nftnl.Open(table)
		return err
	}
	if netnsPath == "" {
		if err := open(); err != nil {
			return nil, err
		}
	} else {
		target, err := ns.GetNS(netnsPath)
		if err != nil {
			return nil, fmt.Errorf("open netns %s: %w", netnsPath, err)
		}
		err = target.Do(func(ns.NetNS) error { return open() })
		target.Close()
		if err != nil {
			return nil, err
		}
	}
	for _, m := range hostPortMaps(table) {
		if err := conn.Declare(m); err != nil {
			conn.Close()
			return nil, err
		}
	}
	return conn, nil
}
