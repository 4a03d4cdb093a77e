package hnsnet

import (
	"net"
	"strings"
)

// dashMAC writes mac the way HNS does: upper case, dash separated.
func dashMAC(mac net.HardwareAddr) string {
	return strings.ToUpper(strings.ReplaceAll(mac.String(), ":", "-"))
}
