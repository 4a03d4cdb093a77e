package ipam

import (
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/netip"
)

// Allocate gives the attachment one address from each range, in range
// order. It is idempotent: addresses the attachment already holds are
// returned again (the lowest one, if it somehow holds several in a range),
// and only ranges where it holds none get a new one. If any range cannot be
// served, the addresses taken by this call are released and the error is
// returned; an *ExhaustedError when a range is full.
func (a *Allocator) Allocate(containerID, ifName string) ([]Allocation, error) {
	if err := validateAttachment(containerID, ifName); err != nil {
		return nil, err
	}
	var out []Allocation
	err := a.withRecords(func(recs []record) (err error) {
		out, err = a.allocateLocked(recs, containerID, ifName)
		return err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

func (a *Allocator) allocateLocked(recs []record, containerID, ifName string) (_ []Allocation, err error) {
	used := make(map[netip.Addr]bool, len(recs))
	held := make(map[*rangeState]netip.Addr, len(a.ranges))
	for _, r := range recs {
		used[r.ip] = true
		if !r.ownedBy(containerID, ifName) {
			continue
		}
		if rs := a.rangeOf(r.ip); rs != nil {
			if prev, ok := held[rs]; !ok || r.ip.Less(prev) {
				held[rs] = r.ip
			}
		}
	}

	var taken []netip.Addr
	defer func() {
		if err == nil {
			return
		}
		for _, ip := range taken {
			err = errors.Join(err, removeFile(fileOf(a.dir, ip)))
		}
	}()

	out := make([]Allocation, 0, len(a.ranges))
	for i := range a.ranges {
		rs := &a.ranges[i]
		ip, ok := held[rs]
		if !ok {
			ip, err = a.reserve(rs, used, containerID, ifName)
			if err != nil {
				return nil, err
			}
			taken = append(taken, ip)
			used[ip] = true
		}
		out = append(out, Allocation{ContainerID: containerID, IfName: ifName, IP: ip, Subnet: rs.subnet, Gateway: rs.gateway})
	}
	return out, nil
}

// reserve takes the first free address of rs after the one it handed out
// last (round-robin, like host-local), and records it as the new last one.
func (a *Allocator) reserve(rs *rangeState, used map[netip.Addr]bool, containerID, ifName string) (netip.Addr, error) {
	var allocated uint64
	for ip := range used {
		if rs.contains(ip) && !rs.reserved[ip] {
			allocated++
		}
	}
	exhausted := &ExhaustedError{Subnet: rs.subnet, Usable: rs.usable, Allocated: allocated}
	if allocated >= rs.usable {
		return netip.Addr{}, exhausted
	}

	// A free address exists, so the walk ends within len(used)+len(reserved)
	// steps even in an IPv6 /64. The start itself is tried last: it is the
	// most recently handed out address, so it is reused as late as possible.
	start := a.lastReserved(rs)
	for ip := nextInPrefix(rs.subnet, start); ; ip = nextInPrefix(rs.subnet, ip) {
		if !rs.reserved[ip] && !used[ip] {
			ok, err := a.store.Reserve(containerID, ifName, net.IP(ip.AsSlice()), rs.id)
			if err != nil {
				// Reserve may have created the file before failing to
				// record the last address; the caller's rollback can't
				// know, so remove it here.
				return netip.Addr{}, errors.Join(fmt.Errorf("reserve %s: %w", ip, err), a.removeIfOwned(ip, containerID, ifName))
			}
			if ok {
				return ip, nil
			}
			used[ip] = true // taken by a writer that ignores the lock
		}
		if ip == start {
			return netip.Addr{}, exhausted
		}
	}
}

// lastReserved returns where rs's round-robin walk resumes: the address in
// last_reserved_ip.<id>, or the network address when there is none or it
// is outside the range (the pod CIDR or the range order changed).
func (a *Allocator) lastReserved(rs *rangeState) netip.Addr {
	// A missing or unreadable file only costs round-robin order, never
	// correctness, so it is not an error (host-local does the same).
	last, err := a.store.LastReservedIP(rs.id)
	if err != nil {
		return rs.subnet.Addr()
	}
	ip, ok := netip.AddrFromSlice(last)
	if !ok || !rs.contains(ip.Unmap()) {
		return rs.subnet.Addr()
	}
	return ip.Unmap()
}

// removeIfOwned removes ip's file if the attachment holds it.
func (a *Allocator) removeIfOwned(ip netip.Addr, containerID, ifName string) error {
	path := fileOf(a.dir, ip)
	data, err := readSmallFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("check %s after a failed reserve: %w", ip, err)
	}
	if id, ifn := parseOwner(data); id != containerID || ifn != ifName {
		return nil
	}
	return removeFile(path)
}
