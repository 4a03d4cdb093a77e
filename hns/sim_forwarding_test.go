package hns

import (
	"strings"
	"testing"
)

// On an L2Bridge network the host reaches its pods only once IPv4
// forwarding is on for the host vNIC; Overlay networks and pod traffic do
// not depend on it.
func TestHostToPodOnL2BridgeNeedsForwardingOnTheHostVNIC(t *testing.T) {
	for _, tc := range []struct {
		name    string
		network func(string) *Network
		from    Entry
		src     string
		enable  string // adapter to enable forwarding on, "" for none
		wantErr bool
		// dropped is a substring of Trace.Dropped; "" means delivered.
		dropped string
	}{
		{name: "l2bridge, forwarding off: the host cannot reach the pod", network: l2bridgeNetwork, from: FromHost, src: nodeIP,
			dropped: "forwarding is off on the host vNIC vEthernet (Ethernet)"},
		{name: "l2bridge, forwarding on: delivered", network: l2bridgeNetwork, from: FromHost, src: nodeIP, enable: "Ethernet"},
		{name: "l2bridge, forwarding on another adapter does not count", network: l2bridgeNetwork, from: FromHost, src: nodeIP, enable: "Ethernet 2",
			dropped: "forwarding is off"},
		{name: "l2bridge, pod to pod needs no host forwarding", network: l2bridgeNetwork, from: FromEndpoint, src: "10.244.1.6"},
		{name: "overlay, the host reaches its pods without it", network: overlayNetwork, from: FromHost, src: nodeIP},
		{name: "an unknown adapter is refused", network: l2bridgeNetwork, from: FromHost, src: nodeIP, enable: "Wi-Fi", wantErr: true,
			dropped: "forwarding is off"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newTestSimulator(t, SimulatorOptions{HostAdapters: []HostAdapter{
				{Name: "Ethernet", IPs: []string{nodeIP}}, {Name: "Ethernet 2", IPs: []string{"10.1.0.4"}}}})
			n := tc.network("nodenet")
			n.Policies = append(n.Policies[:0:0], NetworkPolicy{Type: NetworkPolicyNetAdapterName, NetAdapterName: &NetAdapterNamePolicy{NetworkAdapterName: "Ethernet"}})
			n = mustNetwork(t, s, n)
			pod := mustEndpoint(t, s, localEndpoint(n.ID, "10.244.1.5"))
			mustEndpoint(t, s, localEndpoint(n.ID, "10.244.1.6"))
			if tc.enable != "" {
				err := s.EnableHostForwarding(tc.enable)
				if (err != nil) != tc.wantErr || (err != nil && KindOf(err) != KindNotFound) {
					t.Fatalf("EnableHostForwarding(%q) = %v, want error %t (not found)", tc.enable, err, tc.wantErr)
				}
			}
			tr := mustTrace(t, s, tc.from, tcp(tc.src, 40000, "10.244.1.5", 8080))
			if tc.dropped != "" {
				if len(tr.Deliveries) != 0 || !strings.Contains(tr.Dropped, tc.dropped) {
					t.Fatalf("trace delivered %v (dropped %q), want it dropped: %q\n%s", tr.Backends(), tr.Dropped, tc.dropped, tr)
				}
				return
			}
			if len(tr.Deliveries) != 1 || tr.Deliveries[0].EndpointID != pod.ID {
				t.Fatalf("deliveries %v, want the pod %s\n%s", tr.Backends(), pod.ID, tr)
			}
		})
	}
}
