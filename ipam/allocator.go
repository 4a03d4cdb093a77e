package ipam

import (
	"errors"
	"fmt"
	"net/netip"
	"path/filepath"
	"strings"
	"sync"
	"time"
	"unicode"

	"github.com/containernetworking/plugins/plugins/ipam/host-local/backend/disk"
)

// Allocator hands out addresses from a node's pod CIDRs. It is safe for
// concurrent use by goroutines and by other processes (other Allocators,
// host-local) on the same directory.
type Allocator struct {
	dir    string
	ranges []rangeState

	// mu serializes this process's operations: the store's file lock is
	// taken on one open file, so it does not exclude goroutines sharing it.
	mu     sync.Mutex
	store  *disk.Store
	closed bool
}

// Allocation is an address held by an attachment (container + interface).
type Allocation struct {
	ContainerID string
	// IfName is empty for a file written by a host-local too old to record
	// it; such an allocation belongs to every interface of the container.
	IfName string
	IP     netip.Addr
	// Subnet and Gateway are those of the range IP belongs to; both are
	// zero when IP is outside every current range (the pod CIDR changed
	// while the pod kept its address).
	Subnet  netip.Prefix
	Gateway netip.Addr
	// Allocated is when the address was handed out: its file's
	// modification time (the file is written once, when Allocate takes
	// the address, and never rewritten). Only List sets it; it is zero in
	// what Allocate and Get return.
	Allocated time.Time
}

// New validates opts, creates the store directory if needed and returns an
// Allocator over it. Close it when done.
func New(opts Options) (*Allocator, error) {
	ranges, err := opts.validate()
	if err != nil {
		return nil, err
	}
	store, err := disk.New(opts.Network, opts.DataDir)
	if err != nil {
		return nil, fmt.Errorf("open store %s: %w", filepath.Join(opts.DataDir, opts.Network), err)
	}
	return &Allocator{dir: filepath.Join(opts.DataDir, opts.Network), ranges: ranges, store: store}, nil
}

// Close releases the store's lock file. Later calls return ErrClosed;
// closing twice is fine.
func (a *Allocator) Close() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.closed {
		return nil
	}
	a.closed = true
	return a.store.Close()
}

// locked runs fn holding both the in-process mutex and the file lock.
func (a *Allocator) locked(fn func() error) (err error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.closed {
		return ErrClosed
	}
	if err := a.store.Lock(); err != nil {
		return fmt.Errorf("lock store %s: %w", a.dir, err)
	}
	defer func() {
		if uerr := a.store.Unlock(); uerr != nil {
			err = errors.Join(err, fmt.Errorf("unlock store %s: %w", a.dir, uerr))
		}
	}()
	return fn()
}

// rangeOf returns the current range holding ip, or nil.
// withRecords runs fn on the store's allocations, read under both locks.
func (a *Allocator) withRecords(fn func(recs []record) error) error {
	return a.locked(func() error {
		recs, err := scan(a.dir)
		if err != nil {
			return err
		}
		return fn(recs)
	})
}

func (a *Allocator) rangeOf(ip netip.Addr) *rangeState {
	for i := range a.ranges {
		if a.ranges[i].contains(ip) {
			return &a.ranges[i]
		}
	}
	return nil
}

// allocationOf describes a record with its range's subnet and gateway.
func (a *Allocator) allocationOf(r record) Allocation {
	al := Allocation{ContainerID: r.containerID, IfName: r.ifName, IP: r.ip}
	if rs := a.rangeOf(r.ip); rs != nil {
		al.Subnet, al.Gateway = rs.subnet, rs.gateway
	}
	return al
}

// validateAttachment rejects IDs the store's line-based files cannot hold.
func validateAttachment(containerID, ifName string) error {
	if containerID == "" {
		return errors.New("container ID is empty")
	}
	if ifName == "" {
		return errors.New("interface name is empty")
	}
	bad := func(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) }
	if strings.ContainsFunc(containerID, bad) {
		return fmt.Errorf("container ID %q contains whitespace or control characters", containerID)
	}
	if strings.ContainsFunc(ifName, bad) {
		return fmt.Errorf("interface name %q contains whitespace or control characters", ifName)
	}
	return nil
}
