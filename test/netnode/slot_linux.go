package netnode

import (
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strings"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

const (
	lockDir = "/run/nodenet-netnode"
	// maxSlots bounds how many environments run at once on one machine.
	maxSlots = 32
	// firstSubnetOctet is slot 0's third octet: 192.168.77.0/24.
	firstSubnetOctet = 77
)

// slot is an exclusive lease on a set of names and a subnet.
type slot struct {
	index  int
	lock   *os.File
	subnet netip.Prefix
}

// prefix starts every name the slot owns: root-netns links and named
// namespaces.
func (s *slot) prefix() string { return fmt.Sprintf("nnu%d", s.index) }

func (s *slot) release() { s.lock.Close() }

// acquireSlot locks the first free slot whose subnet the host does not
// route, and removes what an earlier holder of it left behind.
func acquireSlot() (*slot, error) {
	if err := os.MkdirAll(lockDir, 0o700); err != nil {
		return nil, fmt.Errorf("make %s: %w", lockDir, err)
	}
	for i := range maxSlots {
		subnet := netip.PrefixFrom(netip.AddrFrom4([4]byte{192, 168, byte(firstSubnetOctet + i), 0}), 24)
		if hostRoutes(subnet) {
			continue
		}
		f, err := os.OpenFile(filepath.Join(lockDir, fmt.Sprintf("slot-%d", i)), os.O_CREATE|os.O_RDWR, 0o600)
		if err != nil {
			return nil, fmt.Errorf("open slot lock: %w", err)
		}
		if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
			f.Close()
			if errors.Is(err, unix.EWOULDBLOCK) {
				continue
			}
			return nil, fmt.Errorf("lock slot %d: %w", i, err)
		}
		s := &slot{index: i, lock: f, subnet: subnet}
		if err := s.clearLeftovers(); err != nil {
			s.release()
			return nil, err
		}
		return s, nil
	}
	return nil, fmt.Errorf("all %d netnode slots are taken (or routed by the host)", maxSlots)
}

// clearLeftovers deletes the slot's root-netns link and namespaces.
func (s *slot) clearLeftovers() error {
	if l, err := netlink.LinkByName(s.prefix()); err == nil {
		if err := netlink.LinkDel(l); err != nil {
			return fmt.Errorf("delete leftover link %s: %w", s.prefix(), err)
		}
	}
	if err := removeNamedWithPrefix(s.prefix() + "-"); err != nil {
		return fmt.Errorf("delete leftover namespaces: %w", err)
	}
	return nil
}

// hostRoutes reports whether the root netns routes anything inside subnet
// (other than through a slot's own link, which clearLeftovers handles);
// the environment must not shadow a real network.
func hostRoutes(subnet netip.Prefix) bool {
	routes, err := netlink.RouteList(nil, netlink.FAMILY_V4)
	if err != nil {
		return true
	}
	for _, r := range routes {
		if r.Dst == nil {
			continue
		}
		dst, ok := netip.AddrFromSlice(r.Dst.IP)
		if !ok {
			continue
		}
		ones, _ := r.Dst.Mask.Size()
		p := netip.PrefixFrom(dst.Unmap(), ones)
		// The default route overlaps everything and shadows nothing.
		if p.Bits() == 0 || !p.Overlaps(subnet) {
			continue
		}
		if l, err := netlink.LinkByIndex(r.LinkIndex); err == nil && isSlotLink(l.Attrs().Name) {
			continue
		}
		return true
	}
	return false
}

func isSlotLink(name string) bool {
	var i int
	n, err := fmt.Sscanf(name, "nnu%d", &i)
	return err == nil && n == 1 && fmt.Sprintf("nnu%d", i) == name
}

// CleanStale removes what environments whose process died without
// cleaning up (killed, or a test binary that timed out) left behind:
// the namespaces and host link of every slot no live process holds. It
// returns what it removed; running environments are not touched.
func CleanStale() ([]string, error) {
	var removed []string
	var errs []error
	for i := range maxSlots {
		f, err := os.OpenFile(filepath.Join(lockDir, fmt.Sprintf("slot-%d", i)), os.O_RDWR, 0)
		if errors.Is(err, os.ErrNotExist) {
			continue // never used since boot
		}
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
			f.Close()
			continue // in use
		}
		s := &slot{index: i, lock: f}
		removed = append(removed, s.leftovers()...)
		if err := s.clearLeftovers(); err != nil {
			errs = append(errs, err)
		}
		s.release()
	}
	return removed, errors.Join(errs...)
}

// leftovers names the slot's root-netns link and namespaces that exist.
func (s *slot) leftovers() []string {
	var out []string
	if _, err := netlink.LinkByName(s.prefix()); err == nil {
		out = append(out, "link "+s.prefix())
	}
	entries, _ := os.ReadDir(netnsDir)
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), s.prefix()+"-") {
			out = append(out, "netns "+e.Name())
		}
	}
	return out
}
