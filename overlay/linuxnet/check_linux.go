package linuxnet

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"

	"github.com/vishvananda/netlink"
)

// Check implements overlay.Interface with reads only: the bridge is up
// with its gateways and, in overlay mode, the vxlan device is up with the
// settings and address EnsureLocal gave it.
func (n *Network) Check(ctx context.Context) error {
	if n.local == nil {
		return errors.New("check: EnsureLocal has not succeeded yet")
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	st := n.local
	var problems []error
	br, err := n.nl.LinkByName(st.spec.Name)
	switch {
	case isNotFound(err):
		problems = append(problems, fmt.Errorf("bridge %s is missing", st.spec.Name))
	case err != nil:
		return fmt.Errorf("read bridge %s: %w", st.spec.Name, err)
	case br.Type() != "bridge":
		problems = append(problems, fmt.Errorf("%s is a %s, not a bridge", st.spec.Name, br.Type()))
	default:
		problems = append(problems, n.checkLink(br, gatewayPrefixes(st.spec)...)...)
	}
	if isOverlay(st.spec.Mode) {
		problems = append(problems, n.checkVXLAN(st)...)
	}
	return errors.Join(problems...)
}

func (n *Network) checkVXLAN(st *localState) []error {
	l, err := n.nl.LinkByName(st.vxlan)
	if isNotFound(err) {
		return []error{fmt.Errorf("vxlan device %s is missing", st.vxlan)}
	}
	if err != nil {
		return []error{fmt.Errorf("read vxlan device %s: %w", st.vxlan, err)}
	}
	up, err := n.nl.LinkByIndex(st.upIndex)
	if err != nil {
		return []error{fmt.Errorf("read uplink %s: %w", st.uplink, err)}
	}
	w := vxlanWant{name: st.vxlan, vni: st.spec.VNI, port: st.spec.Port, local: st.spec.NodeIP, uplink: up}
	if mm := w.mismatch(l); mm != nil {
		return []error{fmt.Errorf("vxlan device %s has %s %s, want %s", st.vxlan, mm.Field, mm.Have, mm.Want)}
	}
	return n.checkLink(l, st.vxlanIP)
}

// checkLink reports a link that is down or lacks one of addrs.
func (n *Network) checkLink(l netlink.Link, addrs ...netip.Prefix) []error {
	var problems []error
	name := l.Attrs().Name
	if l.Attrs().Flags&net.FlagUp == 0 {
		problems = append(problems, fmt.Errorf("%s is down", name))
	}
	have, err := n.nl.AddrList(l, netlink.FAMILY_ALL)
	if err != nil {
		return append(problems, fmt.Errorf("list addresses of %s: %w", name, err))
	}
	set := addrSet(have)
	for _, a := range addrs {
		if !set[a] {
			problems = append(problems, fmt.Errorf("%s lacks address %v", name, a))
		}
	}
	return problems
}
