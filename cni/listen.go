package cni

import (
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"time"
)

// listenUnix listens on path so that only root (SYSTEM and Administrators
// on Windows) can talk to the agent: the directory is created and locked
// down by secureSocketDir, the socket by restrictSocket. A stale socket
// from a previous agent is replaced; a live one is an error (two agents on
// one node).
func listenUnix(path string) (net.Listener, error) {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("create socket directory %s: %w", dir, err)
	}
	if err := secureSocketDir(dir); err != nil {
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
	if err := restrictSocket(path); err != nil {
		l.Close()
		return nil, err
	}
	return l, nil
}

// removeStaleSocket removes a socket nobody answers on. (Windows reports
// AF_UNIX socket files as ModeSocket too.)
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
