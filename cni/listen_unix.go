//go:build !windows

package cni

import (
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"syscall"
	"time"
)

// listenUnix listens on path so that only root can talk to the agent: the
// socket is mode 0600 and owned by the agent's user, its directory is
// created 0700 when missing and refused when anyone may write to it
// (someone could swap the socket). A stale socket from a previous agent is
// replaced; a live one is an error (two agents on one node).
func listenUnix(path string) (net.Listener, error) {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("create socket directory %s: %w", dir, err)
	}
	if err := checkSocketDir(dir); err != nil {
		return nil, err
	}
	if err := removeStaleSocket(path); err != nil {
		return nil, err
	}
	l, err := net.Listen("unix", path)
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w", path, err)
	}
	// Don't remove the path on Close: a new agent may already own it.
	l.(*net.UnixListener).SetUnlinkOnClose(false)
	if err := os.Chmod(path, 0o600); err != nil {
		l.Close()
		return nil, fmt.Errorf("restrict socket %s: %w", path, err)
	}
	return l, nil
}

func checkSocketDir(dir string) error {
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

// removeStaleSocket removes a socket nobody answers on.
func removeStaleSocket(path string) error {
	fi, err := os.Lstat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if fi.Mode()&fs.ModeSocket == 0 {
		return fmt.Errorf("%s exists and is not a socket; remove it or choose another cni.socketPath", path)
	}
	if c, err := net.DialTimeout("unix", path, time.Second); err == nil {
		c.Close()
		return fmt.Errorf("another process is serving on %s: is a second nodenet agent running on this node?", path)
	}
	if err := os.Remove(path); err != nil {
		return fmt.Errorf("remove stale socket %s: %w", path, err)
	}
	return nil
}
