package hnslb

import (
	"slices"
	"testing"

	"github.com/nodenet/nodenet/config"
	"github.com/nodenet/nodenet/hns"
	"github.com/nodenet/nodenet/proxy"
)

// TestSourceVIP traces a pod's connection to a cluster IP (DSR off, so
// the source is rewritten) and checks the address the backend sees.
func TestSourceVIP(t *testing.T) {
	for _, tc := range []struct {
		name     string
		mode     config.NetworkMode
		backends []proxy.Endpoint
		want     string
	}{
		{"(a) a backend outside every cluster CIDR sees the node IP", "",
			[]proxy.Endpoint{ep("203.0.113.80", 8080, false)}, nodeIP},
		{"(b) a hostNetwork backend on another node sees the node IP", "",
			[]proxy.Endpoint{ep(remoteNodeIP(2), 8080, false)}, nodeIP},
		{"(c) a local pod sees the source VIP", "",
			[]proxy.Endpoint{localEP(1)}, sourceVIP},
		{"(c) a remote pod sees the source VIP", "",
			[]proxy.Endpoint{podEP(2, 0)}, sourceVIP},
		{"(c) a hostNetwork backend on this node sees the source VIP", "",
			[]proxy.Endpoint{ep(nodeIP, 8080, true)}, sourceVIP},
		{"one backend outside the cluster gives the whole load balancer the node IP", "",
			[]proxy.Endpoint{localEP(1), podEP(2, 0), ep("203.0.113.80", 8080, false)}, nodeIP},
		{"on l2bridge every backend sees the node IP", config.NetworkModeL2Bridge,
			[]proxy.Endpoint{localEP(1), podEP(2, 0)}, nodeIP},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHost(t, hostOptions{mode: tc.mode})
			h.addPod(localPodIP(0))
			h.addPod(localPodIP(1))
			b := h.backend()
			mustSync(t, b, full(stateOf(svc(1, tc.backends...))))

			tr := h.trace(hns.FromEndpoint, localPodIP(0), "10.96.0.2", 80)
			if len(tr.Deliveries) != len(tc.backends) {
				t.Fatalf("pod -> cluster IP reaches %v, want %d backends\n%s\n%s", seen(tr), len(tc.backends), tr, h.sim.Dump())
			}
			for _, d := range tr.Deliveries {
				if d.Packet.Src != tc.want {
					t.Errorf("backend %s sees source %s, want %s", d.Packet.Dst, d.Packet.Src, tc.want)
				}
			}
		})
	}
}

func TestL2BridgeRemoteEndpointsHaveNoProviderAddress(t *testing.T) {
	h := newHost(t, hostOptions{mode: config.NetworkModeL2Bridge})
	h.addPod(localPodIP(0))
	b := h.backend()
	mustSync(t, b, full(stateOf(svc(1, podEP(2, 0)))))

	eps := h.remoteEndpoints()
	if len(eps) != 1 {
		t.Fatalf("remote endpoints %v, want the pod's only (no cluster-IP endpoint on l2bridge)", eps)
	}
	if ep := eps[remotePodIP(2, 0)]; providerAddress(ep) != "" || len(ep.Policies) != 0 {
		t.Errorf("l2bridge remote endpoint has policies %+v", ep.Policies)
	}
	tr := h.trace(hns.FromEndpoint, localPodIP(0), "10.96.0.2", 80)
	if got, want := seen(tr), []string{nodeIP + " -> " + remotePodIP(2, 0) + ":8080"}; !slices.Equal(got, want) {
		t.Errorf("pod -> cluster IP reaches %v, want %v", got, want)
	}
}
