package hnslb

import (
	"slices"
	"testing"

	"github.com/nodenet/nodenet/hns"
)

// HNS deletes a pod's endpoint even while a load balancer uses it, and the
// load balancer stays, degraded, pointing at nothing (microsoft/wcnscripts
// PR 21, kubernetes issue 76316). CNI DEL does that whenever a pod goes
// before the proxy has seen its EndpointSlice change. When the pod comes
// back with the same IP (a new endpoint ID), the proxy's next sync must
// point the load balancer at the new endpoint.
func TestADegradedLoadBalancerIsRepaired(t *testing.T) {
	for _, tc := range []struct {
		name string
		sync func(t *testing.T, h *host, b *Backend)
	}{
		{"by the periodic full sync, the slice unchanged", func(t *testing.T, h *host, b *Backend) {
			mustSync(t, b, full(stateOf(svc(1, localEP(1)))))
		}},
		{"by the partial syncs of the slice dropping and re-adding the pod", func(t *testing.T, h *host, b *Backend) {
			st, changed := with(stateOf(svc(1, localEP(1))), svc(1))
			mustSync(t, b, partial(st, changed))
			st, changed = with(st, svc(1, localEP(1)))
			mustSync(t, b, partial(st, changed))
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHost(t, hostOptions{version: hnsFixedModify})
			old := h.addPod(localPodIP(1))
			b := h.backend()
			st := stateOf(svc(1, localEP(1)))
			mustSync(t, b, full(st))

			// CNI DEL, then ADD of the pod's next sandbox with the same IP.
			if err := h.sim.DeleteEndpoint(ctx, old); err != nil {
				t.Fatalf("HNS refused to delete a backend's endpoint: %v", err)
			}
			if tr := h.trace(hns.FromHost, "192.168.1.1", "10.96.0.2", 80); len(tr.Deliveries) != 0 {
				t.Fatalf("the degraded load balancer delivered: %v", seen(tr))
			}
			now := h.addPod(localPodIP(1))

			tc.sync(t, h, b)
			if got := h.lbFor("10.96.0.2", 80).HostComputeEndpoints; !slices.Equal(got, []string{now}) {
				t.Errorf("load balancer backends = %v, want the new endpoint %s (old %s)", got, now, old)
			}
			if got := h.trace(hns.FromHost, "192.168.1.1", "10.96.0.2", 80).Backends(); !slices.Equal(got, []string{now}) {
				t.Errorf("traffic reaches %v, want %s", got, now)
			}
			diffCanon(t, "after the repair", h.canon(), fresh(t, hostOptions{version: hnsFixedModify}, st, 2))
		})
	}
}
