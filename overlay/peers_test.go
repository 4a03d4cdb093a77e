package overlay

// Address plan: cluster CIDR 10.244.0.0/16 (IPv4) and fd00:10:244::/56;
// peers' pod CIDRs 10.244.2.0/24 and fd00:10:244:2::/64; underlay
// 192.168.77.0/24 (node IPs .12, .99 for overrides).

import (
	"net"
	"net/netip"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodenet/nodenet/config"
)

func peerNode(annotations map[string]string, podCIDRs ...string) *v1.Node {
	n := &v1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: "n2", Annotations: annotations},
		Spec:       v1.NodeSpec{PodCIDRs: podCIDRs},
		Status: v1.NodeStatus{Addresses: []v1.NodeAddress{
			{Type: v1.NodeHostName, Address: "n2"},
			{Type: v1.NodeInternalIP, Address: "192.168.77.12"},
		}},
	}
	if len(podCIDRs) > 0 {
		n.Spec.PodCIDR = podCIDRs[0]
	}
	return n
}

func vxlanAnnotations(data string) map[string]string {
	return map[string]string{
		AnnotationKubeSubnetManager: "true",
		AnnotationBackendType:       BackendVXLAN,
		AnnotationBackendData:       data,
		AnnotationPublicIP:          "192.168.77.12",
	}
}

func TestRemoteFromNode(t *testing.T) {
	overlay := PeerRules{Mode: config.NetworkModeOverlay, VNI: 4096, Families: []config.IPFamily{config.IPv4}}
	l2bridge := PeerRules{Mode: config.NetworkModeL2Bridge, Families: []config.IPFamily{config.IPv4, config.IPv6}}
	mac, _ := net.ParseMAC("0e:4e:c0:a8:4d:0c")
	flannelPeer := RemoteNode{
		Name: "n2", PodCIDRs: []netip.Prefix{netip.MustParsePrefix("10.244.2.0/24")},
		NodeIP: netip.MustParseAddr("192.168.77.12"), VtepMAC: mac,
	}
	tests := []struct {
		name       string
		node       *v1.Node
		rules      PeerRules
		want       RemoteNode
		wantReason string
	}{
		{
			name:  "a flannel vxlan node is read from its annotations",
			node:  peerNode(vxlanAnnotations(`{"VNI":4096,"VtepMAC":"0e:4e:c0:a8:4d:0c"}`), "10.244.2.0/24"),
			rules: overlay,
			want:  flannelPeer,
		},
		{
			name:  "a Windows-style dashed VTEP MAC is accepted",
			node:  peerNode(vxlanAnnotations(`{"VNI":4096,"VtepMAC":"0E-4E-C0-A8-4D-0C"}`), "10.244.2.0/24"),
			rules: overlay,
			want:  flannelPeer,
		},
		{
			name: "public-ip-overwrite wins over public-ip and the InternalIP",
			node: func() *v1.Node {
				a := vxlanAnnotations(`{"VNI":4096,"VtepMAC":"0e:4e:c0:a8:4d:0c"}`)
				a[AnnotationPublicIPOverwrite] = "192.168.77.99"
				return peerNode(a, "10.244.2.0/24")
			}(),
			rules: overlay,
			want: RemoteNode{Name: "n2", PodCIDRs: flannelPeer.PodCIDRs,
				NodeIP: netip.MustParseAddr("192.168.77.99"), VtepMAC: mac},
		},
		{
			name:  "an overlay peer's IPv6 pod CIDR is ignored",
			node:  peerNode(vxlanAnnotations(`{"VNI":4096,"VtepMAC":"0e:4e:c0:a8:4d:0c"}`), "10.244.2.0/24", "fd00:10:244:2::/64"),
			rules: overlay,
			want:  flannelPeer,
		},
		{
			name:  "an l2bridge peer needs no annotations and keeps both families",
			node:  peerNode(nil, "10.244.2.0/24", "fd00:10:244:2::/64"),
			rules: l2bridge,
			want: RemoteNode{Name: "n2", PodCIDRs: []netip.Prefix{
				netip.MustParsePrefix("10.244.2.0/24"), netip.MustParsePrefix("fd00:10:244:2::/64")},
				NodeIP: netip.MustParseAddr("192.168.77.12")},
		},
		{
			name: "an l2bridge peer's IPv6 pod CIDR is reached via its IPv6 InternalIP",
			node: func() *v1.Node {
				n := peerNode(nil, "10.244.2.0/24", "fd00:10:244:2::/64")
				n.Status.Addresses = append(n.Status.Addresses, v1.NodeAddress{Type: v1.NodeInternalIP, Address: "fd00:77::12"})
				return n
			}(),
			rules: l2bridge,
			want: RemoteNode{Name: "n2", PodCIDRs: []netip.Prefix{
				netip.MustParsePrefix("10.244.2.0/24"), netip.MustParsePrefix("fd00:10:244:2::/64")},
				NodeIP: netip.MustParseAddr("192.168.77.12"), NodeIPv6: netip.MustParseAddr("fd00:77::12")},
		},
		{
			name: "flannel's public-ipv6 wins over the IPv6 InternalIP",
			node: func() *v1.Node {
				n := peerNode(map[string]string{AnnotationPublicIPv6: "fd00:77::99"}, "10.244.2.0/24", "fd00:10:244:2::/64")
				n.Status.Addresses = append(n.Status.Addresses, v1.NodeAddress{Type: v1.NodeInternalIP, Address: "fd00:77::12"})
				return n
			}(),
			rules: l2bridge,
			want: RemoteNode{Name: "n2", PodCIDRs: []netip.Prefix{
				netip.MustParsePrefix("10.244.2.0/24"), netip.MustParsePrefix("fd00:10:244:2::/64")},
				NodeIP: netip.MustParseAddr("192.168.77.12"), NodeIPv6: netip.MustParseAddr("fd00:77::99")},
		},
		{
			name:       "a public-ipv6 that is an IPv4 address is malformed",
			node:       peerNode(map[string]string{AnnotationPublicIPv6: "192.168.77.12"}, "10.244.2.0/24", "fd00:10:244:2::/64"),
			rules:      l2bridge,
			wantReason: PeerMalformedAnnotation,
		},
		{
			name:       "a node with a nil annotations map is not routable yet in overlay mode",
			node:       peerNode(nil, "10.244.2.0/24"),
			rules:      overlay,
			wantReason: PeerMissingAnnotation,
		},
		{
			name:       "a node without a pod CIDR is skipped",
			node:       peerNode(vxlanAnnotations(`{"VNI":4096,"VtepMAC":"0e:4e:c0:a8:4d:0c"}`)),
			rules:      overlay,
			wantReason: PeerNoPodCIDR,
		},
		{
			name:       "a VNI mismatch is reported instead of black-holing",
			node:       peerNode(vxlanAnnotations(`{"VNI":1,"VtepMAC":"0e:4e:c0:a8:4d:0c"}`), "10.244.2.0/24"),
			rules:      overlay,
			wantReason: PeerVNIMismatch,
		},
		{
			name:       "backend-data that is not JSON is malformed",
			node:       peerNode(vxlanAnnotations(`{"VNI":4096,`), "10.244.2.0/24"),
			rules:      overlay,
			wantReason: PeerMalformedAnnotation,
		},
		{
			name:       "a VtepMAC that is not a MAC is malformed",
			node:       peerNode(vxlanAnnotations(`{"VNI":4096,"VtepMAC":"zz:4e:c0:a8:4d:0c"}`), "10.244.2.0/24"),
			rules:      overlay,
			wantReason: PeerMalformedAnnotation,
		},
		{
			name: "a public-ip that is not an IPv4 address is malformed",
			node: func() *v1.Node {
				a := vxlanAnnotations(`{"VNI":4096,"VtepMAC":"0e:4e:c0:a8:4d:0c"}`)
				a[AnnotationPublicIP] = "node-2"
				return peerNode(a, "10.244.2.0/24")
			}(),
			rules:      overlay,
			wantReason: PeerMalformedAnnotation,
		},
		{
			name:       "a host-gw peer can't be reached from an overlay node",
			node:       peerNode(map[string]string{AnnotationBackendType: BackendHostGW, AnnotationBackendData: "null"}, "10.244.2.0/24"),
			rules:      overlay,
			wantReason: PeerBackendMismatch,
		},
		{
			name:       "a vxlan peer can't be reached from an l2bridge node",
			node:       peerNode(vxlanAnnotations(`{"VNI":4096,"VtepMAC":"0e:4e:c0:a8:4d:0c"}`), "10.244.2.0/24"),
			rules:      l2bridge,
			wantReason: PeerBackendMismatch,
		},
		{
			name:       "an unparsable pod CIDR is malformed",
			node:       peerNode(nil, "10.244.2.0"),
			rules:      l2bridge,
			wantReason: PeerMalformedAnnotation,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, problem := RemoteFromNode(tt.node, tt.rules)
			if tt.wantReason != "" {
				if problem == nil || problem.Reason != tt.wantReason {
					t.Fatalf("problem = %v, want reason %s", problem, tt.wantReason)
				}
				if problem.Message == "" || problem.Node != "n2" {
					t.Errorf("problem %+v lacks a node or message", problem)
				}
				return
			}
			if problem != nil {
				t.Fatalf("unexpected problem: %v", problem)
			}
			if diff := cmp.Diff(tt.want, got, netipComparers); diff != "" {
				t.Errorf("RemoteFromNode (-want +got):\n%s", diff)
			}
		})
	}
}

func TestOwnAnnotationsRoundTripThroughRemoteFromNode(t *testing.T) {
	mac, _ := net.ParseMAC("0e:4e:c0:a8:4d:0b")
	local := &LocalNetwork{Mode: config.NetworkModeOverlay, Name: "nodenet", VtepMAC: mac, NodeIP: netip.MustParseAddr("192.168.77.11")}
	a, err := OwnAnnotations(local, 4096)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		AnnotationKubeSubnetManager: "true",
		AnnotationBackendType:       "vxlan",
		AnnotationBackendData:       `{"VNI":4096,"VtepMAC":"0e:4e:c0:a8:4d:0b"}`,
		AnnotationPublicIP:          "192.168.77.11",
	}
	if diff := cmp.Diff(want, a); diff != "" {
		t.Errorf("annotations (-want +got):\n%s", diff)
	}
	n := peerNode(a, "10.244.1.0/24")
	got, problem := RemoteFromNode(n, PeerRules{Mode: config.NetworkModeOverlay, VNI: 4096, Families: []config.IPFamily{config.IPv4}})
	if problem != nil || got.VtepMAC.String() != mac.String() || got.NodeIP != local.NodeIP {
		t.Errorf("a peer reading our annotations got %+v, %v", got, problem)
	}

	t.Run("an overlay network without a VTEP MAC is an error, not an empty annotation", func(t *testing.T) {
		if _, err := OwnAnnotations(&LocalNetwork{Mode: config.NetworkModeOverlay, Name: "nodenet"}, 4096); err == nil {
			t.Error("no error")
		}
	})
	t.Run("l2bridge publishes host-gw with null backend data", func(t *testing.T) {
		a, err := OwnAnnotations(&LocalNetwork{Mode: config.NetworkModeL2Bridge, NodeIP: local.NodeIP}, 0)
		if err != nil || a[AnnotationBackendType] != "host-gw" || a[AnnotationBackendData] != "null" {
			t.Errorf("got %v, %v", a, err)
		}
		if _, ok := a[AnnotationPublicIPv6]; ok {
			t.Errorf("an IPv4-only node published %s", AnnotationPublicIPv6)
		}
	})
	t.Run("a dual-stack l2bridge node publishes its IPv6 address too", func(t *testing.T) {
		a, err := OwnAnnotations(&LocalNetwork{Mode: config.NetworkModeL2Bridge, NodeIP: local.NodeIP, NodeIPv6: netip.MustParseAddr("fd00:77::11")}, 0)
		if err != nil || a[AnnotationPublicIPv6] != "fd00:77::11" {
			t.Errorf("got %v, %v", a, err)
		}
	})
}

// netipComparers lets go-cmp compare netip values (unexported fields).
var netipComparers = cmp.Options{
	cmp.Comparer(func(a, b netip.Addr) bool { return a == b }),
	cmp.Comparer(func(a, b netip.Prefix) bool { return a == b }),
}
