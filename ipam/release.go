package ipam

import (
	"errors"
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
