// Address plan: see fixture_test.go. The moved pod is 10.244.1.11 (local
// pod 1), which node-2 (192.168.2.2) held before; the client pod is
// 10.244.1.10 (local pod 0).
package hnslb

import (
	"net/netip"
	"slices"
	"testing"

	"github.com/nodenet/nodenet/hns"
	"github.com/nodenet/nodenet/proxy"
)

// A pod IP that was remote (a pod on node-2) is now a pod here. HNS on
// Windows Server 2019/2022 lets CNI create the local endpoint beside the
// stale remote endpoint (kubernetes PR 138000), and a load balancer still
// on the remote one sends the traffic to the wrong node. The first sync
// after the restart removes the stale remote endpoint and traffic goes to
// the local pod. (Test only: the removal is the shadowing rule in
// sync.go's planEndpointsFull, unchanged.)
func TestAStaleRemoteEndpointBesideALocalPodIsRemoved(t *testing.T) {
	moved := localPodIP(1)
	for _, tc := range []struct {
		name string
		// slice is the moved pod's endpoint as the EndpointSlice has it.
		slice proxy.Endpoint
		// want are the load balancer's backends afterwards.
		want []string
	}{
		{name: "the slice says the pod is here", slice: ep(moved, 8080, true), want: []string{moved, remotePodIP(3, 0)}},
		{name: "the slice still says node-2", slice: ep(moved, 8080, false), want: []string{remotePodIP(3, 0)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHost(t, hostOptions{})
			// Left by the previous run: our remote endpoint for the
			// address (on node-2's provider address) and the cluster IP's
			// load balancer on it.
			stale, err := h.sim.CreateEndpoint(ctx, remoteSpec{ip: netip.MustParseAddr(moved), pa: netip.MustParseAddr(remoteNodeIP(2))}.endpoint(h.networkID(), ""))
			if err != nil {
				t.Fatal(err)
			}
			if _, err := h.sim.CreateLoadBalancer(ctx, &hns.LoadBalancer{
				HostComputeEndpoints: []string{stale.ID}, SourceVIP: sourceVIP, FrontendVIPs: []string{"10.96.0.2"},
				PortMappings: []hns.PortMapping{{Protocol: hns.ProtocolTCP, InternalPort: 8080, ExternalPort: 80}},
			}); err != nil {
				t.Fatal(err)
			}
			// CNI creates the pod's endpoint: HNS accepts the duplicate.
			local := h.addPod(moved)
			h.addPod(localPodIP(0))
			if got := seen(h.trace(hns.FromEndpoint, localPodIP(0), "10.96.0.2", 80)); !slices.Equal(got, []string{sourceVIP + " -> " + moved + ":8080 via " + remoteNodeIP(2)}) {
				t.Fatalf("before the sync the cluster IP reaches %v, want the stale remote endpoint (the hazard)", got)
			}

			b := h.backend()
			mustSync(t, b, full(stateOf(svc(1, tc.slice, podEP(3, 0)))))

			if _, err := h.sim.GetEndpointByID(ctx, stale.ID); !hns.IsNotFound(err) {
				t.Errorf("the stale remote endpoint is still there (%v)", err)
			}
			if _, ok := h.remoteEndpoints()[moved]; ok {
				t.Errorf("a remote endpoint still holds %s, a local pod's address", moved)
			}
			if _, err := h.sim.GetEndpointByID(ctx, local); err != nil {
				t.Errorf("the local pod's endpoint is gone: %v", err)
			}
			tr := h.trace(hns.FromEndpoint, localPodIP(0), "10.96.0.2", 80)
			var got []string
			for _, d := range tr.Deliveries {
				if d.EndpointID == stale.ID {
					t.Errorf("traffic still reaches the stale remote endpoint\n%s", tr)
				}
				got = append(got, d.Packet.Dst)
			}
			slices.Sort(got)
			if !slices.Equal(got, tc.want) {
				t.Errorf("the cluster IP reaches %v, want %v\n%s", got, tc.want, tr)
			}
			if d := tr.Deliveries; slices.Contains(tc.want, moved) && !slices.ContainsFunc(d, func(x hns.Delivery) bool { return x.EndpointID == local && x.Target == hns.TargetLocalEndpoint }) {
				t.Errorf("the moved pod is not reached on its local endpoint %s\n%s", local, tr)
			}
		})
	}
}
