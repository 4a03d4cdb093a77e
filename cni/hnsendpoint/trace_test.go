package hnsendpoint

// Address plan: see fixture_test.go. The pod under test is 10.244.1.5, a
// second local pod 10.244.1.6; the remote pod 10.244.2.7 lives behind
// 192.168.1.12; 192.168.1.20 is another machine on the node subnet.

import (
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/nodenet/nodenet/config"
	"github.com/nodenet/nodenet/hns"
)

func tcp(src string, sport uint16, dst string, dport uint16) hns.Packet {
	return hns.Packet{Protocol: hns.ProtocolTCP, Src: src, SrcPort: sport, Dst: dst, DstPort: dport}
}

// TestPodTrafficIsNATedOnlyWhenLeavingTheCluster traces packets from a pod
// wired by Add through the simulated host: the policies Add derives from
// the node network decide what is SNATed.
func TestPodTrafficIsNATedOnlyWhenLeavingTheCluster(t *testing.T) {
	const pod5 = "10.244.1.5"
	type flow struct {
		name string
		pkt  hns.Packet
		want func(t *testing.T, h *host) hns.Delivery
	}
	flows := []flow{
		{
			name: "pod to a service CIDR address keeps the pod's source address",
			pkt:  tcp(pod5, 40000, clusterDNS, 53),
			want: func(*testing.T, *host) hns.Delivery {
				return hns.Delivery{Target: hns.TargetExternal, Packet: tcp(pod5, 40000, clusterDNS, 53)}
			},
		},
		{
			name: "pod to the internet is NATed to the node IP",
			pkt:  tcp(pod5, 40000, outsideIP, 443),
			want: func(*testing.T, *host) hns.Delivery {
				return hns.Delivery{Target: hns.TargetExternal, Packet: tcp(nodeIP, 40000, outsideIP, 443)}
			},
		},
		{
			name: "pod to another machine on the node subnet keeps the pod's source address",
			pkt:  tcp(pod5, 40000, neighbourIP, 22),
			want: func(*testing.T, *host) hns.Delivery {
				return hns.Delivery{Target: hns.TargetExternal, Packet: tcp(pod5, 40000, neighbourIP, 22)}
			},
		},
		{
			name: "pod to a remote node's pod keeps the pod's source address",
			pkt:  tcp(pod5, 40000, remotePodIP, 8080),
			want: func(_ *testing.T, h *host) hns.Delivery {
				d := hns.Delivery{Target: hns.TargetExternal, Packet: tcp(pod5, 40000, remotePodIP, 8080)}
				if h.nw.Mode == config.NetworkModeOverlay {
					d.Target = hns.TargetRemoteEndpoint
					d.Encap = &hns.Encapsulation{ProviderAddress: remoteNodeIP, VSID: vsid}
				}
				return d
			},
		},
		{
			name: "pod to a pod on the same node is delivered unchanged",
			pkt:  tcp(pod5, 40000, "10.244.1.6", 8080),
			want: func(t *testing.T, h *host) hns.Delivery {
				return hns.Delivery{Target: hns.TargetLocalEndpoint, EndpointID: h.endpoint(t, pod(containerB, "eth0", "", "10.244.1.6")).ID, Packet: tcp(pod5, 40000, "10.244.1.6", 8080)}
			},
		},
	}
	for _, mode := range modes {
		for _, dsr := range []bool{false, true} {
			for _, f := range flows {
				t.Run(fmt.Sprintf("%s (%s, DSR %t)", f.name, mode, dsr), func(t *testing.T) {
					h := newHost(t, mode, hostOptions{})
					h.nw.EnableDSR = dsr
					h.mustAdd(t, pod(containerA, "eth0", h.namespace(t), pod5))
					h.mustAdd(t, pod(containerB, "eth0", h.namespace(t), "10.244.1.6"))
					tr, err := h.sim.Trace(hns.FromEndpoint, f.pkt)
					if err != nil {
						t.Fatal(err)
					}
					if diff := cmp.Diff([]hns.Delivery{f.want(t, h)}, tr.Deliveries); diff != "" {
						t.Errorf("deliveries (-want +got):\n%s\ntrace:\n%s", diff, tr)
					}
				})
			}
		}
	}
}
