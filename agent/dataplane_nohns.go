//go:build !windows

package agent

import (
	"context"
	"fmt"
	"runtime"

	"github.com/nodenet/nodenet/hns"
)

// buildHostHNS fails: only Windows has HNS.
func buildHostHNS(buildInputs) (*dataplane, error) {
	return nil, hostHNSMissing()
}

func openHostHNS(context.Context) (hns.Interface, hns.Features, hns.Version, error) {
	return nil, hns.Features{}, hns.Version{}, hostHNSMissing()
}

func hostHNSMissing() error {
	return fmt.Errorf("dataplane hns needs Windows, not %s: use --dataplane=sim to see what a Windows node would program", runtime.GOOS)
}
