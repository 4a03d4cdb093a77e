// Package atomicfile writes files that readers (a container runtime, an
// operator's editor) see either whole or not at all.
package atomicfile

import (
	"io/fs"
	"os"
	"path/filepath"
)

// Write writes data to path through a temporary file in the same directory
// (so the rename stays on one filesystem), synced, given perm, then renamed
// over path. The temporary file never survives a failure.
func Write(path string, data []byte, perm fs.FileMode) (err error) {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			_ = tmp.Close()
			_ = os.Remove(tmp.Name())
		}
	}()
	if _, err = tmp.Write(data); err != nil {
		return err
	}
	if err = tmp.Sync(); err != nil {
		return err
	}
	if err = tmp.Close(); err != nil {
		return err
	}
	if err = os.Chmod(tmp.Name(), perm); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}
