package ipam

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"net/netip"
	"os"
	"path/filepath"
	"strings"

	"github.com/containernetworking/plugins/plugins/ipam/host-local/backend/disk"
)

// The store's own files, which are not allocations.
const (
	lockFileName     = "lock"
	lastIPFilePrefix = "last_reserved_ip."
)

// record is one allocation file.
type record struct {
	ip          netip.Addr
	file        string // the file's name, as written (escaped on Windows)
	containerID string
	ifName      string // empty in files from before host-local stored it
}

// ownedBy reports whether the attachment holds r. As in host-local, a file
// without an interface name belongs to every interface of its container.
func (r *record) ownedBy(containerID, ifName string) bool {
	return r.containerID == containerID && (r.ifName == ifName || r.ifName == "")
}

// scan reads every allocation file in dir, in one pass. The disk store's
// GetByID and ReleaseByID walk the directory too, once or twice per call
// and dropping read errors; scanning ourselves gives Allocate, Get and
// Release one pass each and lets a failed read fail the operation rather
// than hide an allocation.
func scan(dir string) ([]record, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("read store %s: %w", dir, err)
	}
	recs := make([]record, 0, len(entries))
	for _, e := range entries {
		name := e.Name()
		if e.IsDir() || name == lockFileName || strings.HasPrefix(name, lastIPFilePrefix) {
			continue
		}
		ip, ok := parseFileName(name)
		if !ok {
			continue // not ours: host-local ignores it as well
		}
		data, err := readSmallFile(filepath.Join(dir, name))
		if errors.Is(err, fs.ErrNotExist) {
			continue // released by a writer that ignores the lock
		}
		if err != nil {
			return nil, fmt.Errorf("read allocation %s: %w", name, err)
		}
		id, ifName := parseOwner(data)
		recs = append(recs, record{ip: ip, file: name, containerID: id, ifName: ifName})
	}
	return recs, nil
}

// parseFileName turns an allocation file name back into its address,
// undoing disk.GetEscapedPath's ':' → '_' on Windows. Accepting '_' on
// every OS lets a store copied from Windows be read anywhere; no address
// contains '_' otherwise.
func parseFileName(name string) (netip.Addr, bool) {
	ip, err := netip.ParseAddr(strings.ReplaceAll(name, "_", ":"))
	if err != nil || ip.Zone() != "" {
		return netip.Addr{}, false
	}
	return ip.Unmap(), true
}

// parseOwner splits "<containerID>\r\n<ifname>"; a file from an old
// host-local holds only the container ID.
func parseOwner(data []byte) (containerID, ifName string) {
	id, ifn, _ := bytes.Cut(bytes.TrimSpace(data), []byte(disk.LineBreak))
	return string(bytes.TrimSpace(id)), string(bytes.TrimSpace(ifn))
}

// fileOf returns the path of ip's allocation file.
func fileOf(dir string, ip netip.Addr) string {
	return disk.GetEscapedPath(dir, ip.String())
}

// removeFile deletes an allocation file; one already gone is fine.
func removeFile(path string) error {
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("release %s: %w", filepath.Base(path), err)
	}
	return nil
}
