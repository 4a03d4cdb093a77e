//go:build !linux

package agent

import (
	"fmt"
	"runtime"
)

// buildLinux fails: the Linux dataplane needs netlink and nftables.
func buildLinux(buildInputs) (*dataplane, error) {
	return nil, fmt.Errorf("dataplane linux needs Linux, not %s: use --dataplane=hns or sim", runtime.GOOS)
}
