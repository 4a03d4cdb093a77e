//go:build !windows

package install

import "os"

// replace renames src over dst: atomic on one file system, and allowed
// while dst is being executed.
func replace(src, dst string) error { return os.Rename(src, dst) }
