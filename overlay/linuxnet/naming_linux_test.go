package linuxnet_test

// Address plan: 172.30.0.11 and 172.30.0.12 are node IPs; nothing is
// configured on a host.

import (
	"net/netip"
	"testing"

	"github.com/nodenet/nodenet/overlay/linuxnet"
)

func TestVXLANDeviceName(t *testing.T) {
	for _, tc := range []struct {
		name string
		vni  uint32
		want string
	}{
		{"nodenet", 4096, "nodenet.4096"},
		{"averyverylongname", 4096, "averyveryl.4096"},
		{"cbr", 16777215, "cbr.16777215"},
		{"averyverylongname", 16777215, "averyv.16777215"},
	} {
		t.Run(tc.name+" with VNI fits fifteen characters", func(t *testing.T) {
			got := linuxnet.VXLANDeviceName(tc.name, tc.vni)
			if got != tc.want || len(got) > 15 {
				t.Errorf("VXLANDeviceName(%q, %d) = %q, want %q (at most 15 characters)", tc.name, tc.vni, got, tc.want)
			}
		})
	}
}

func TestVTEPMAC(t *testing.T) {
	a := netip.MustParseAddr("172.30.0.11")
	b := netip.MustParseAddr("172.30.0.12")
	t.Run("the same node IP and VNI always give the same MAC", func(t *testing.T) {
		if x, y := linuxnet.VTEPMAC(a, 4096), linuxnet.VTEPMAC(a, 4096); x.String() != y.String() {
			t.Errorf("%s != %s", x, y)
		}
	})
	t.Run("another node IP or VNI gives another MAC", func(t *testing.T) {
		base := linuxnet.VTEPMAC(a, 4096).String()
		if linuxnet.VTEPMAC(b, 4096).String() == base || linuxnet.VTEPMAC(a, 4097).String() == base {
			t.Error("derived MACs collide")
		}
	})
	t.Run("the MAC is unicast and locally administered", func(t *testing.T) {
		for _, ip := range []netip.Addr{a, b} {
			m := linuxnet.VTEPMAC(ip, 4096)
			if len(m) != 6 || m[0]&0x01 != 0 || m[0]&0x02 == 0 {
				t.Errorf("VTEPMAC(%v) = %s: want 6 bytes, unicast, locally administered", ip, m)
			}
		}
	})
}
