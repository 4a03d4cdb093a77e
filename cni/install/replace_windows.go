package install

import (
	"fmt"
	"os"
	"path/filepath"
)

// replace renames src over dst. Windows refuses to replace an .exe that
// a runtime is executing, but lets it be renamed: on failure the old one
// is moved aside (dst.old-N, removed when no longer in use, at the next
// install) and src renamed in.
func replace(src, dst string) error {
	if err := os.Rename(src, dst); err == nil {
		return nil
	}
	old, _ := filepath.Glob(dst + ".old-*")
	for _, o := range old {
		_ = os.Remove(o) // fails while still running: kept for next time
	}
	aside := fmt.Sprintf("%s.old-%d", dst, os.Getpid())
	if err := os.Rename(dst, aside); err != nil && !os.IsNotExist(err) {
		return err
	}
	if err := os.Rename(src, dst); err != nil {
		_ = os.Rename(aside, dst)
		return err
	}
	return nil
}
