package hnsendpoint

// Address plan: pod IPv4 addresses from 10.244.0.0/16 and 192.168.0.0/16
// only, as MAC derivation inputs; no HNS state.

import (
	"net/netip"
	"testing"

	"github.com/nodenet/nodenet/cni"
)

func TestEndpointNameRoundTrips(t *testing.T) {
	for _, a := range []cni.Attachment{
		{ContainerID: containerA, IfName: "eth0"},
		{ContainerID: "a", IfName: "net1"},
		{ContainerID: "sandbox_1.web-0", IfName: "eth_0.100"},
		{ContainerID: "X", IfName: "abcdefghijklmno"},
	} {
		t.Run(a.ContainerID+" "+a.IfName+" survives a round trip", func(t *testing.T) {
			name, err := EndpointName(a)
			if err != nil {
				t.Fatal(err)
			}
			if want := "nodenet-pod:" + a.ContainerID + ":" + a.IfName; name != want {
				t.Errorf("EndpointName = %q, want %q", name, want)
			}
			got, ok := ParseEndpointName(name)
			if !ok || got != a {
				t.Errorf("ParseEndpointName(%q) = %+v, %t; want %+v", name, got, ok, a)
			}
		})
	}
}

func TestEndpointNameRefusesAttachmentsItCouldNotParse(t *testing.T) {
	for name, a := range map[string]cni.Attachment{
		"an empty container ID":              {IfName: "eth0"},
		"a container ID with a colon":        {ContainerID: "a:b", IfName: "eth0"},
		"a container ID starting with a dot": {ContainerID: ".a", IfName: "eth0"},
		"a container ID with non-ASCII":      {ContainerID: "café", IfName: "eth0"},
		"an empty interface name":            {ContainerID: "a"},
		"an interface name with a colon":     {ContainerID: "a", IfName: "eth:0"},
		"an interface name with a space":     {ContainerID: "a", IfName: "eth 0"},
		"an interface name of 16 characters": {ContainerID: "a", IfName: "abcdefghijklmnop"},
		"the interface name ..":              {ContainerID: "a", IfName: ".."},
	} {
		t.Run(name+" has no endpoint name", func(t *testing.T) {
			if got, err := EndpointName(a); err == nil {
				t.Errorf("EndpointName(%+v) = %q, want an error", a, got)
			}
		})
	}
}

func TestParseEndpointNameIgnoresOtherEndpoints(t *testing.T) {
	for _, name := range []string{
		"",
		"nodenet-source-vip",
		"cbr0_ep",
		containerA + "_cbr0", // the reference plugins' scheme
		"nodenet-pod:",
		"nodenet-pod:" + containerA,
		"nodenet-pod::eth0",
		"nodenet-pod:" + containerA + ":",
		"nodenet-pod:a:b:eth0",
		"NODENET-POD:a:eth0",
		"nodenet-pod:a:eth 0",
	} {
		t.Run(name+" is not a pod endpoint", func(t *testing.T) {
			if a, ok := ParseEndpointName(name); ok {
				t.Errorf("ParseEndpointName(%q) = %+v, want not ours", name, a)
			}
		})
	}
}

func TestMACFromIPFollowsWinOverlay(t *testing.T) {
	for _, tc := range []struct{ ip, want string }{
		{"10.244.1.5", "0E-2A-0A-F4-01-05"},
		{"10.244.255.254", "0E-2A-0A-F4-FF-FE"},
		{"192.168.0.1", "0E-2A-C0-A8-00-01"},
	} {
		t.Run(tc.ip+" becomes "+tc.want, func(t *testing.T) {
			if got := macFromIP(DefaultMACPrefix, netip.MustParseAddr(tc.ip)); got != tc.want {
				t.Errorf("macFromIP(%s) = %s, want %s", tc.ip, got, tc.want)
			}
		})
	}
}
