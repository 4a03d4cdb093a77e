package ipam

import (
	"cmp"
	"errors"
	"fmt"
	"io/fs"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
)

// Get returns every address the attachment holds: those in the current
// ranges first, in range order, then any outside them (from an earlier pod
// CIDR), by address. It returns nil, nil when the attachment holds none.
func (a *Allocator) Get(containerID, ifName string) ([]Allocation, error) {
	if err := validateAttachment(containerID, ifName); err != nil {
		return nil, err
	}
	var out []Allocation
	err := a.withRecords(func(recs []record) error {
		for _, r := range recs {
			if r.ownedBy(containerID, ifName) {
				out = append(out, a.allocationOf(r))
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	slices.SortFunc(out, func(x, y Allocation) int {
		return cmp.Or(cmp.Compare(a.rangeIndex(x.IP), a.rangeIndex(y.IP)), x.IP.Compare(y.IP))
	})
	return out, nil
}

// rangeIndex returns the position of the range holding ip, or len(ranges)
// when none does.
func (a *Allocator) rangeIndex(ip netip.Addr) int {
	for i := range a.ranges {
		if a.ranges[i].contains(ip) {
			return i
		}
	}
	return len(a.ranges)
}

// List returns every allocation in the store, sorted by address (IPv4
// first), including those outside the current ranges (a pod that kept its
// address when the pod CIDR changed), each with the time it was made
// (Allocation.Allocated). It is what garbage collection, the sandbox
// reconciliation and status read.
func (a *Allocator) List() ([]Allocation, error) {
	var out []Allocation
	err := a.withRecords(func(recs []record) error {
		out = make([]Allocation, 0, len(recs))
		for _, r := range recs {
			fi, err := os.Lstat(filepath.Join(a.dir, r.file))
			if errors.Is(err, fs.ErrNotExist) {
				continue // released by a writer that ignores the lock
			}
			if err != nil {
				return fmt.Errorf("read allocation %s: %w", r.file, err)
			}
			al := a.allocationOf(r)
			al.Allocated = fi.ModTime()
			out = append(out, al)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	slices.SortFunc(out, func(x, y Allocation) int { return x.IP.Compare(y.IP) })
	return out, nil
}

// Free returns how many addresses each range can still hand out, keyed by
// its subnet (saturated at MaxUint64 for huge IPv6 ranges). A range at 0
// makes the next Allocate fail with an *ExhaustedError.
func (a *Allocator) Free() (map[netip.Prefix]uint64, error) {
	free := make(map[netip.Prefix]uint64, len(a.ranges))
	err := a.withRecords(func(recs []record) error {
		for i := range a.ranges {
			rs := &a.ranges[i]
			n := rs.usable
			for _, r := range recs {
				if rs.contains(r.ip) && !rs.reserved[r.ip] {
					n--
				}
			}
			free[rs.subnet] = n
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return free, nil
}
