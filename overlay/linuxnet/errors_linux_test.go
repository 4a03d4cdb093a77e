package linuxnet_test

// Address plan: see nodes_linux_test.go (node 1 at .11 on "eth0", pod
// CIDR 10.244.1.0/24). The underlay's .200 is held by no interface.

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/vishvananda/netlink"

	"github.com/nodenet/nodenet/config"
	"github.com/nodenet/nodenet/overlay"
)

// linkNames lists a namespace's links, to show nothing was created.
func linkNames(t *testing.T, in *node) []string {
	t.Helper()
	links, err := in.nl.LinkList()
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, l := range links {
		out = append(out, l.Type()+" "+l.Attrs().Name)
	}
	slices.Sort(out)
	return out
}

func TestEnsureLocalRefusesWithoutWriting(t *testing.T) {
	t.Run("a vxlan device with another VNI is a MismatchError and is left alone", func(t *testing.T) {
		t.Parallel()
		n := newUnderlay(t).addNode(t, config.NetworkModeOverlay)
		pre := &netlink.Vxlan{LinkAttrs: netlink.LinkAttrs{Name: vxlanName}, VxlanId: 42, Port: testPort, VtepDevIndex: n.link(t, "eth0").Attrs().Index}
		if err := n.nl.LinkAdd(pre); err != nil {
			t.Fatal(err)
		}
		before := readDevice(t, n, vxlanName)
		links := linkNames(t, n)
		_, err := n.nw.EnsureLocal(context.Background(), n.spec)
		var mm *overlay.MismatchError
		if !errors.As(err, &mm) || mm.Field != "VNI" || mm.Have != "42" || mm.Want != "4096" {
			t.Fatalf("EnsureLocal = %v, want a VNI MismatchError 42 vs 4096", err)
		}
		if diff := cmp.Diff(before, readDevice(t, n, vxlanName)); diff != "" {
			t.Errorf("device changed (-before +after):\n%s", diff)
		}
		if diff := cmp.Diff(links, linkNames(t, n)); diff != "" {
			t.Errorf("links changed (-before +after):\n%s", diff)
		}
	})
	t.Run("with AllowRecreate the mismatching vxlan device is replaced", func(t *testing.T) {
		t.Parallel()
		n := newUnderlay(t).addNode(t, config.NetworkModeOverlay)
		pre := &netlink.Vxlan{LinkAttrs: netlink.LinkAttrs{Name: vxlanName}, VxlanId: 42, Port: testPort}
		if err := n.nl.LinkAdd(pre); err != nil {
			t.Fatal(err)
		}
		n.spec.AllowRecreate = true
		n.ensure(t)
		if got := readDevice(t, n, vxlanName); got.VNI != testVNI || got.Uplink != "eth0" {
			t.Errorf("after recreate: VNI %d on %q, want %d on eth0", got.VNI, got.Uplink, testVNI)
		}
	})
	t.Run("a link named like the bridge that is no bridge is a MismatchError", func(t *testing.T) {
		t.Parallel()
		n := newUnderlay(t).addNode(t, config.NetworkModeL2Bridge)
		if err := n.nl.LinkAdd(&netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: bridgeName}, PeerName: "other"}); err != nil {
			t.Fatal(err)
		}
		links := linkNames(t, n)
		_, err := n.nw.EnsureLocal(context.Background(), n.spec)
		var mm *overlay.MismatchError
		if !errors.As(err, &mm) || mm.Field != "type" {
			t.Fatalf("EnsureLocal = %v, want a type MismatchError", err)
		}
		if diff := cmp.Diff(links, linkNames(t, n)); diff != "" {
			t.Errorf("links changed (-before +after):\n%s", diff)
		}
	})
	t.Run("AllowRecreate never deletes a bridge with pods attached", func(t *testing.T) {
		t.Parallel()
		n := newUnderlay(t).addNode(t, config.NetworkModeOverlay)
		if err := n.nl.LinkAdd(&netlink.Bridge{LinkAttrs: netlink.LinkAttrs{Name: vxlanName}}); err != nil {
			t.Fatal(err)
		}
		if err := n.nl.LinkAdd(&netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: "pod0", MasterIndex: n.link(t, vxlanName).Attrs().Index}, PeerName: "pod0p"}); err != nil {
			t.Fatal(err)
		}
		n.spec.AllowRecreate = true
		_, err := n.nw.EnsureLocal(context.Background(), n.spec)
		if err == nil || !strings.Contains(err.Error(), "pods are attached") {
			t.Fatalf("EnsureLocal = %v, want an error saying pods are attached", err)
		}
		if got := n.link(t, vxlanName).Type(); got != "bridge" {
			t.Errorf("%s is now a %s", vxlanName, got)
		}
	})
	for _, tc := range []struct {
		name   string
		change func(*overlay.LocalSpec, *underlay)
	}{
		{"an uplink that does not exist is a SpecError", func(s *overlay.LocalSpec, _ *underlay) { s.ExternalInterface = "nope0" }},
		{"a node IP no interface holds is a SpecError", func(s *overlay.LocalSpec, u *underlay) { s.NodeIP = u.Addr(200) }},
	} {
		t.Run(tc.name+" and nothing is written", func(t *testing.T) {
			t.Parallel()
			u := newUnderlay(t)
			n := u.addNode(t, config.NetworkModeOverlay)
			tc.change(&n.spec, u)
			links := linkNames(t, n)
			l, err := n.nw.EnsureLocal(context.Background(), n.spec)
			var se *overlay.SpecError
			if !errors.As(err, &se) || se.Field != "network.externalInterface" {
				t.Fatalf("EnsureLocal = %v, %v; want a SpecError for network.externalInterface", l, err)
			}
			if diff := cmp.Diff(links, linkNames(t, n)); diff != "" {
				t.Errorf("links changed (-before +after):\n%s", diff)
			}
		})
	}
}
