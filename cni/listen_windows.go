package cni

import (
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"time"

	"golang.org/x/sys/windows"
)

// socketDirSDDL lets only SYSTEM and Administrators into the socket's
// directory (protected: nothing inherited from ProgramData, which lets
// Users create files). Windows checks AF_UNIX connects against the
// socket file's ACL, which it inherits from here.
const socketDirSDDL = "D:P(A;OICI;GA;;;SY)(A;OICI;GA;;;BA)"

// listenUnix listens on path (Windows has AF_UNIX since 1803) after
// locking down its directory's ACL and replacing a stale socket.
func listenUnix(path string) (net.Listener, error) {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("create socket directory %s: %w", dir, err)
	}
	if err := restrictDir(dir); err != nil {
		return nil, err
	}
	if _, err := os.Lstat(path); err == nil {
		if c, err := net.DialTimeout("unix", path, time.Second); err == nil {
			c.Close()
			return nil, fmt.Errorf("another process is serving on %s: is a second nodenet agent running on this node?", path)
		}
		if err := os.Remove(path); err != nil {
			return nil, fmt.Errorf("remove stale socket %s: %w", path, err)
		}
	} else if !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	l, err := net.Listen("unix", path)
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w", path, err)
	}
	l.(*net.UnixListener).SetUnlinkOnClose(false)
	return l, nil
}

func restrictDir(dir string) error {
	sd, err := windows.SecurityDescriptorFromString(socketDirSDDL)
	if err != nil {
		return fmt.Errorf("socket directory ACL: %w", err)
	}
	dacl, _, err := sd.DACL()
	if err != nil {
		return fmt.Errorf("socket directory ACL: %w", err)
	}
	err = windows.SetNamedSecurityInfo(dir, windows.SE_FILE_OBJECT,
		windows.DACL_SECURITY_INFORMATION|windows.PROTECTED_DACL_SECURITY_INFORMATION, nil, nil, dacl, nil)
	if err != nil {
		return fmt.Errorf("restrict socket directory %s to SYSTEM and Administrators: %w", dir, err)
	}
	return nil
}
