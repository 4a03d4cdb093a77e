package vethbridge

// Address plan (no address leaves this file's values):
//
//	pod CIDRs  10.244.1.0/24 (gateway 10.244.1.1), fd00:10:244:1::/64 (gateway fd00:10:244:1::1)
//	pod        10.244.1.10/24, fd00:10:244:1::a/64
//	DNS        node fallback 10.96.0.10; the pod's own 10.0.0.53

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/containernetworking/cni/pkg/types"
	"github.com/google/go-cmp/cmp"

	"github.com/nodenet/nodenet/cni"
)

func TestHostVethName(t *testing.T) {
	long := strings.Repeat("f", 64)
	names := map[string]cni.Attachment{}
	for _, a := range []cni.Attachment{
		{ContainerID: long, IfName: "eth0"},
		{ContainerID: long, IfName: "eth1"},
		{ContainerID: long[:63] + "e", IfName: "eth0"},
		{ContainerID: "a", IfName: "b"},
		{ContainerID: "ab", IfName: "c"},
		{ContainerID: "a", IfName: "bc"},
	} {
		name := HostVethName(a)
		if len(name) > 15 || !strings.HasPrefix(name, "nn") {
			t.Errorf("HostVethName(%v) = %q, want \"nn\" and at most 15 characters", a, name)
		}
		if again := HostVethName(a); again != name {
			t.Errorf("HostVethName(%v) is not deterministic: %q then %q", a, name, again)
		}
		if other, dup := names[name]; dup {
			t.Errorf("HostVethName(%v) = HostVethName(%v) = %q", a, other, name)
		}
		names[name] = a
	}
}

func TestParseAlias(t *testing.T) {
	for _, tc := range []struct {
		name   string
		alias  string
		want   cni.Attachment
		wantOK bool
	}{
		{name: "our alias gives back the attachment", alias: linkAlias(cni.Attachment{ContainerID: "abc123", IfName: "eth0"}), want: cni.Attachment{ContainerID: "abc123", IfName: "eth0"}, wantOK: true},
		{name: "a container ID with colons is kept whole", alias: "nodenet:a:b:eth0", want: cni.Attachment{ContainerID: "a:b", IfName: "eth0"}, wantOK: true},
		{name: "an empty alias is not ours", alias: ""},
		{name: "another tool's alias is not ours", alias: "cilium:abc:eth0"},
		{name: "an alias without an ifname is not ours", alias: "nodenet:abc:"},
		{name: "an alias without a container ID is not ours", alias: "nodenet::eth0"},
		{name: "an alias without a separator is not ours", alias: "nodenet:abc"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := parseAlias(tc.alias)
			if ok != tc.wantOK || got != tc.want {
				t.Errorf("parseAlias(%q) = %v, %v; want %v, %v", tc.alias, got, ok, tc.want, tc.wantOK)
			}
		})
	}
}

func TestValidateRequests(t *testing.T) {
	nw := &cni.NodeNetwork{
		Name:     "nn-test",
		PodCIDRs: []netip.Prefix{netip.MustParsePrefix("10.244.1.0/24"), netip.MustParsePrefix("fd00:10:244:1::/64")},
		Gateways: []netip.Addr{netip.MustParseAddr("10.244.1.1"), netip.MustParseAddr("fd00:10:244:1::1")},
	}
	v4 := cni.Address{IP: netip.MustParsePrefix("10.244.1.10/24"), Gateway: netip.MustParseAddr("10.244.1.1")}
	v6 := cni.Address{IP: netip.MustParsePrefix("fd00:10:244:1::a/64"), Gateway: netip.MustParseAddr("fd00:10:244:1::1")}
	ok := cni.Attachment{ContainerID: "abc", IfName: "eth0"}
	for _, tc := range []struct {
		name    string
		att     cni.Attachment
		addrs   []cni.Address
		mtu     int
		wantErr string
	}{
		{name: "a dual-stack pod is valid", att: ok, addrs: []cni.Address{v4, v6}},
		{name: "an empty container ID is refused", att: cni.Attachment{IfName: "eth0"}, addrs: []cni.Address{v4}, wantErr: "empty container ID"},
		{name: "an ifname longer than 15 bytes is refused", att: cni.Attachment{ContainerID: "abc", IfName: "eth0123456789012"}, addrs: []cni.Address{v4}, wantErr: "longer than 15 bytes"},
		{name: "an ifname with a slash is refused", att: cni.Attachment{ContainerID: "abc", IfName: "eth/0"}, addrs: []cni.Address{v4}, wantErr: `contains '/'`},
		{name: "a container ID too long for the alias is refused", att: cni.Attachment{ContainerID: strings.Repeat("a", 250), IfName: "eth0"}, addrs: []cni.Address{v4}, wantErr: "too long"},
		{name: "a pod without addresses is refused", att: ok, wantErr: "has no addresses"},
		{name: "a gateway outside the prefix is refused", att: ok, addrs: []cni.Address{{IP: v4.IP, Gateway: netip.MustParseAddr("10.244.2.1")}}, wantErr: "gateway 10.244.2.1 is outside"},
		{name: "a gateway of the other family is refused", att: ok, addrs: []cni.Address{{IP: v4.IP, Gateway: v6.Gateway}}, wantErr: "of another IP family"},
		{name: "an address twice is refused", att: ok, addrs: []cni.Address{v4, v4}, wantErr: "twice"},
		{name: "IPv6 with an MTU below 1280 is refused", att: ok, addrs: []cni.Address{v6}, mtu: 1200, wantErr: "below IPv6's minimum 1280"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := *nw
			n.MTU = tc.mtu
			err := validateRequest(&n, &cni.Pod{Attachment: tc.att, Addresses: tc.addrs})
			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatalf("validateRequest: %v", err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Fatalf("validateRequest = %v, want an error containing %q", err, tc.wantErr)
			}
		})
	}
}

func TestBuildResultDNS(t *testing.T) {
	nw := &cni.NodeNetwork{DNS: cni.DNS{Nameservers: []string{"10.96.0.10"}}}
	pod := &cni.Pod{
		Attachment: cni.Attachment{ContainerID: "abc", IfName: "eth0"},
		Addresses:  []cni.Address{{IP: netip.MustParsePrefix("10.244.1.10/24"), Gateway: netip.MustParseAddr("10.244.1.1")}},
	}
	for _, tc := range []struct {
		name string
		dns  cni.DNS
		want types.DNS
	}{
		{name: "a pod without DNS gets the node network's", want: types.DNS{Nameservers: []string{"10.96.0.10"}}},
		{name: "a pod's own DNS wins", dns: cni.DNS{Nameservers: []string{"10.0.0.53"}, Search: []string{"x"}}, want: types.DNS{Nameservers: []string{"10.0.0.53"}, Search: []string{"x"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := *pod
			p.DNS = tc.dns
			if diff := cmp.Diff(tc.want, buildResult(nw, &p, "", "").DNS); diff != "" {
				t.Errorf("DNS (-want +got):\n%s", diff)
			}
		})
	}
}
