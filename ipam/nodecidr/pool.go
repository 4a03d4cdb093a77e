package nodecidr

import (
	"cmp"
	"fmt"
	"math/big"
	"net/netip"
	"slices"
)

// Pool is one cluster CIDR cut into node subnets of one prefix length.
// It holds no state: the subnets in use are passed to Next.
type Pool struct {
	cidr netip.Prefix
	bits int
}

// NewPool checks that cidr holds at least one subnet of prefix length
// bits.
func NewPool(cidr netip.Prefix, bits int) (Pool, error) {
	if !cidr.IsValid() {
		return Pool{}, fmt.Errorf("cluster CIDR %v is not a valid prefix", cidr)
	}
	cidr = cidr.Masked()
	if bits < cidr.Bits() || bits > cidr.Addr().BitLen() {
		return Pool{}, fmt.Errorf("node mask size /%d does not fit cluster CIDR %s: it must be between %d and %d",
			bits, cidr, cidr.Bits(), cidr.Addr().BitLen())
	}
	return Pool{cidr: cidr, bits: bits}, nil
}

// CIDR is the cluster CIDR.
func (p Pool) CIDR() netip.Prefix { return p.cidr }

// Bits is the node subnets' prefix length.
func (p Pool) Bits() int { return p.bits }

// Size is how many node subnets the pool holds, as text (an IPv6 pool can
// hold more than any integer type).
func (p Pool) Size() string {
	return new(big.Int).Lsh(big.NewInt(1), uint(p.bits-p.cidr.Bits())).String()
}

// Next returns the lowest node subnet of p that overlaps nothing in used,
// and false when there is none. used may hold prefixes of any length and
// family (a hand-set pod CIDR need not be aligned to p's subnets); the
// ones outside p are ignored.
func (p Pool) Next(used []netip.Prefix) (netip.Prefix, bool) {
	var inside []netip.Prefix
	for _, u := range used {
		if u.IsValid() && u.Addr().BitLen() == p.cidr.Addr().BitLen() && u.Overlaps(p.cidr) {
			inside = append(inside, u.Masked())
		}
	}
	slices.SortFunc(inside, func(a, b netip.Prefix) int { return cmp.Or(a.Addr().Compare(b.Addr()), a.Bits()-b.Bits()) })
	cand := netip.PrefixFrom(p.cidr.Addr(), p.bits)
	for _, u := range inside {
		if !u.Overlaps(cand) {
			if last(u).Less(cand.Addr()) {
				continue // wholly before the candidate
			}
			break // sorted: this and every later one start after it
		}
		next, ok := p.after(last(u))
		if !ok {
			return netip.Prefix{}, false
		}
		cand = next
	}
	return cand, true
}

// after returns the first subnet of p that starts after addr.
func (p Pool) after(addr netip.Addr) (netip.Prefix, bool) {
	n := toInt(addr)
	size := new(big.Int).Lsh(big.NewInt(1), uint(addr.BitLen()-p.bits))
	// Round addr+1 up to a multiple of size.
	n.Add(n, size)
	n.Div(n, size)
	n.Mul(n, size)
	next, ok := fromInt(n, addr.Is4())
	if !ok || !p.cidr.Contains(next) {
		return netip.Prefix{}, false
	}
	return netip.PrefixFrom(next, p.bits), true
}

// last is the highest address of p.
func last(p netip.Prefix) netip.Addr {
	n := toInt(p.Addr())
	host := new(big.Int).Lsh(big.NewInt(1), uint(p.Addr().BitLen()-p.Bits()))
	n.Add(n, host.Sub(host, big.NewInt(1)))
	a, _ := fromInt(n, p.Addr().Is4())
	return a
}

func toInt(a netip.Addr) *big.Int { return new(big.Int).SetBytes(a.AsSlice()) }

// fromInt is the address n, false when n does not fit the family.
func fromInt(n *big.Int, v4 bool) (netip.Addr, bool) {
	width := 16
	if v4 {
		width = 4
	}
	if n.Sign() < 0 || n.BitLen() > width*8 {
		return netip.Addr{}, false
	}
	b := n.FillBytes(make([]byte, width))
	a, _ := netip.AddrFromSlice(b)
	return a, true
}
