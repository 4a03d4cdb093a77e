//go:build unix

package ipam

import (
	"errors"
	"io/fs"
	"syscall"
)

// readSmallFile reads an allocation file with raw system calls. Every
// operation reads every allocation file, and os.ReadFile spends six system
// calls on each (open, a failed poller registration, fstat, two reads,
// close) where four do; on a node with a hundred dual-stack pods that is
// most of an Allocate's time.
func readSmallFile(path string) ([]byte, error) {
	fd, err := retryEINTR(func() (int, error) { return syscall.Open(path, syscall.O_RDONLY|syscall.O_CLOEXEC, 0) })
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: path, Err: err}
	}
	defer syscall.Close(fd)
	buf := make([]byte, 0, 128) // "<64-hex-digit ID>\r\n<ifname>" fits
	for {
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)]
		}
		n, err := retryEINTR(func() (int, error) { return syscall.Read(fd, buf[len(buf):cap(buf)]) })
		if err != nil {
			return nil, &fs.PathError{Op: "read", Path: path, Err: err}
		}
		if n == 0 {
			return buf, nil
		}
		buf = buf[:len(buf)+n]
	}
}

func retryEINTR(fn func() (int, error)) (int, error) {
	for {
		n, err := fn()
		if !errors.Is(err, syscall.EINTR) {
			return n, err
		}
	}
}
