package ipam

import (
	"errors"
	"net/netip"
	"path/filepath"
)

// Release gives back every address the attachment holds, in any range,
// current or not. It is idempotent: an attachment holding nothing is not
// an error. Every file is attempted even when one fails.
func (a *Allocator) Release(containerID, ifName string) error {
	if err := validateAttachment(containerID, ifName); err != nil {
		return err
	}
	return a.withRecords(func(recs []record) error {
		var errs []error
		for _, r := range recs {
			if r.ownedBy(containerID, ifName) {
				errs = append(errs, removeFile(filepath.Join(a.dir, r.file)))
			}
		}
		return errors.Join(errs...)
	})
}

// ReleaseUnowned removes ip's allocation file if it names no owner: its
// writer (this agent, or host-local) died between creating the file and
// writing the container ID into it, so no DEL or GC will ever release it.
// Writers fill the file while holding the store's lock, which this takes
// too, so an empty file seen here is never one being written. It reports
// whether it removed the file; a missing file, or one that names an owner,
// is left alone and is not an error.
func (a *Allocator) ReleaseUnowned(ip netip.Addr) (released bool, err error) {
	err = a.withRecords(func(recs []record) error {
		for _, r := range recs {
			if r.ip == ip.Unmap() && r.containerID == "" {
				released = true
				return removeFile(filepath.Join(a.dir, r.file))
			}
		}
		return nil
	})
	if err != nil {
		return false, err
	}
	return released, nil
}
