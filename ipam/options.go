package ipam

import (
	"errors"
	"fmt"
	"net/netip"
	"path/filepath"
	"strings"

	"github.com/nodenet/nodenet/config"
	"github.com/nodenet/nodenet/internal/netaddr"
)

// Range is one pod CIDR to allocate from.
type Range struct {
	// Subnet is the pod CIDR, e.g. 10.244.1.0/24; it must not have host
	// bits set.
	Subnet netip.Prefix
	// Gateway is never handed out and is reported with every allocation.
	// The zero value means the address at config.GatewayOffset
	// (10.244.1.1).
	Gateway netip.Addr
	// Reserved addresses are never handed out either (the agent puts the
	// overlay source VIP here). Each must be inside Subnet.
	Reserved []netip.Addr
}

// Options configures an Allocator.
type Options struct {
	// DataDir is the directory under which the store lives. Required.
	DataDir string
	// Network names the store: it is the directory DataDir/Network, as in
	// host-local. Required; a single path element.
	Network string
	// Ranges holds one range per IP family, primary first. Allocations are
	// returned in this order, and a range's position is its host-local
	// range ID (last_reserved_ip.<position>).
	Ranges []Range
}

// rangeState is a validated Range with what allocation needs precomputed.
type rangeState struct {
	id       string // host-local's rangeID: the position in Options.Ranges
	subnet   netip.Prefix
	gateway  netip.Addr
	reserved map[netip.Addr]bool // network, broadcast, gateway, Reserved
	usable   uint64
}

// validate checks opts and returns the ranges ready for allocation.
func (opts Options) validate() ([]rangeState, error) {
	if opts.DataDir == "" {
		return nil, errors.New("data directory is empty")
	}
	if err := validateNetworkName(opts.Network); err != nil {
		return nil, err
	}
	if len(opts.Ranges) == 0 {
		return nil, errors.New("no ranges: need one pod CIDR per IP family")
	}
	states := make([]rangeState, 0, len(opts.Ranges))
	for i, r := range opts.Ranges {
		st, err := newRangeState(i, r)
		if err != nil {
			return nil, fmt.Errorf("range %d: %w", i, err)
		}
		for _, prev := range states {
			if prev.subnet.Addr().Is4() == st.subnet.Addr().Is4() {
				return nil, fmt.Errorf("range %d: %s is the second range of its IP family (range %s is %s): give one pod CIDR per family", i, st.subnet, prev.id, prev.subnet)
			}
		}
		states = append(states, st)
	}
	return states, nil
}

func validateNetworkName(name string) error {
	switch {
	case name == "":
		return errors.New("network name is empty")
	case name == "." || name == ".." || strings.ContainsAny(name, `/\`) || filepath.Base(name) != name:
		return fmt.Errorf("network name %q must be a single path element", name)
	}
	return nil
}

func newRangeState(i int, r Range) (rangeState, error) {
	p := r.Subnet
	switch {
	case !p.IsValid():
		return rangeState{}, errors.New("subnet is not set")
	case p.Addr().Is4In6():
		return rangeState{}, fmt.Errorf("subnet %s is an IPv4-mapped IPv6 prefix: give it as IPv4", p)
	case p.Addr().Zone() != "":
		return rangeState{}, fmt.Errorf("subnet %s has a zone", p)
	case p != p.Masked():
		return rangeState{}, fmt.Errorf("subnet %s has host bits set (the network is %s)", p, p.Masked())
	case p.Addr().BitLen()-p.Bits() < 2:
		return rangeState{}, fmt.Errorf("subnet %s is too small to allocate from: an IPv4 range needs /30 or larger, an IPv6 range /126 or larger", p)
	}

	st := rangeState{id: fmt.Sprint(i), subnet: p, reserved: map[netip.Addr]bool{p.Addr(): true}}
	if p.Addr().Is4() {
		st.reserved[netaddr.Last(p)] = true // broadcast; IPv6 has none
	}

	st.gateway = r.Gateway.Unmap()
	if !st.gateway.IsValid() {
		st.gateway, _ = netaddr.AtOffset(p, config.GatewayOffset) // exists: p has ≥ 4 addresses
	}
	switch {
	case !p.Contains(st.gateway):
		return rangeState{}, fmt.Errorf("gateway %s is outside %s", st.gateway, p)
	case st.reserved[st.gateway]:
		return rangeState{}, fmt.Errorf("gateway %s is the network or broadcast address of %s", st.gateway, p)
	}
	st.reserved[st.gateway] = true

	for j, a := range r.Reserved {
		a = a.Unmap()
		if !a.IsValid() {
			return rangeState{}, fmt.Errorf("reserved address %d is not set", j)
		}
		if !p.Contains(a) {
			return rangeState{}, fmt.Errorf("reserved address %s is outside %s", a, p)
		}
		st.reserved[a] = true
	}

	st.usable = prefixSize(p) - uint64(len(st.reserved))
	if st.usable == 0 {
		return rangeState{}, fmt.Errorf("subnet %s is too small: no address left after reserving the network, broadcast and gateway addresses and %d more", p, len(r.Reserved))
	}
	return st, nil
}

// contains reports whether a is inside the range's subnet.
func (st *rangeState) contains(a netip.Addr) bool { return st.subnet.Contains(a) }
