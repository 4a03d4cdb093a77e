package agent

import (
	"context"
	"testing"

	"github.com/nodenet/nodenet/config"
	"github.com/nodenet/nodenet/overlay"
)

func TestDataplanesWithoutPodEgressSkipTheStep(t *testing.T) {
	a := &Agent{cfg: testConfig(t, config.OSWindows, config.NetworkModeOverlay, nil)}
	if err := a.syncPodEgress(context.Background(), &dataplane{}, &overlay.LocalNetwork{}); err != nil {
		t.Errorf("syncPodEgress on a dataplane without pod egress (HNS: outbound NAT comes from endpoint policies): %v", err)
	}
}
