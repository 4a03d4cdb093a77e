package agent

import (
	"context"
	"errors"
	"fmt"

	"github.com/nodenet/nodenet/hns"
	"github.com/nodenet/nodenet/overlay/hostroute"
)

// buildHostHNS builds the Windows dataplane on the host's HNS (the client
// New opened to probe its features).
func buildHostHNS(in buildInputs) (*dataplane, error) {
	if in.hostHNS == nil {
		return nil, errors.New("no HNS client")
	}
	return buildHNS(hnsParts{hns: in.hostHNS, routes: hostroute.New()}, in)
}

// openHostHNS opens the host's HNS and reads its version and features.
func openHostHNS(ctx context.Context) (hns.Interface, hns.Features, hns.Version, error) {
	h, err := hns.NewClient()
	if err != nil {
		return nil, hns.Features{}, hns.Version{}, fmt.Errorf("open HNS: %w", err)
	}
	v, err := h.Version(ctx)
	if err != nil {
		return nil, hns.Features{}, hns.Version{}, fmt.Errorf("read the HNS version: %w", err)
	}
	f, err := h.Features(ctx)
	if err != nil {
		return nil, hns.Features{}, hns.Version{}, fmt.Errorf("read the HNS features: %w", err)
	}
	return h, f, v, nil
}
