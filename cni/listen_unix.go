//go:build !windows

package cni

import (
	"fmt"
	"os"
	"syscall"
)

// secureSocketDir refuses a directory anyone may write to (someone could
// swap the socket) or that another user owns.
func secureSocketDir(dir string) error {
	fi, err := os.Stat(dir)
	if err != nil {
		return fmt.Errorf("socket directory: %w", err)
	}
	if !fi.IsDir() {
		return fmt.Errorf("socket directory %s is not a directory", dir)
	}
	// Even a sticky world-writable directory (/tmp) lets anyone squat the
	// path while the agent restarts.
	if fi.Mode().Perm()&0o002 != 0 {
		return fmt.Errorf("socket directory %s is world-writable (mode %v); use a directory only root can write, such as /var/run/nodenet", dir, fi.Mode().Perm())
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && int(st.Uid) != os.Geteuid() {
		return fmt.Errorf("socket directory %s is owned by uid %d, not by the agent's uid %d", dir, st.Uid, os.Geteuid())
	}
	return nil
}

// restrictSocket makes the socket the agent's user's alone.
func restrictSocket(path string) error {
	if err := os.Chmod(path, 0o600); err != nil {
		return fmt.Errorf("restrict socket %s: %w", path, err)
	}
	return nil
}
