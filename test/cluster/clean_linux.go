package cluster

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/nodenet/nodenet/test/netnode"
)

// Clean removes what clusters whose process died without cleaning up
// left behind: their processes (found by their command line naming the
// cluster's directory), the directories, and the netnode namespaces and
// links of slots nobody holds. Running clusters are not touched. It
// returns what it removed.
func Clean() ([]string, error) {
	var removed []string
	var errs []error
	dirs, err := filepath.Glob(filepath.Join(os.TempDir(), DirPrefix+"*"))
	if err != nil {
		return nil, err
	}
	for _, dir := range dirs {
		if live(dir) {
			continue
		}
		for _, pid := range processesNaming(dir) {
			if err := syscall.Kill(pid, syscall.SIGKILL); err == nil {
				removed = append(removed, fmt.Sprintf("process %d", pid))
			}
		}
		if err := os.RemoveAll(dir); err != nil {
			errs = append(errs, err)
			continue
		}
		removed = append(removed, "directory "+dir)
	}
	gone, err := netnode.CleanStale()
	removed = append(removed, gone...)
	errs = append(errs, err)
	return removed, errors.Join(errs...)
}

// live reports whether a process holds dir's lock.
func live(dir string) bool {
	f, err := os.Open(filepath.Join(dir, lockName))
	if err != nil {
		return false
	}
	defer f.Close()
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		return true
	}
	_ = unix.Flock(int(f.Fd()), unix.LOCK_UN)
	return false
}

// processesNaming returns the processes whose command line mentions dir
// (agents name their config and kubeconfig there, the apiserver and etcd
// their data).
func processesNaming(dir string) []int {
	entries, _ := os.ReadDir("/proc")
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err == nil && bytes.Contains(cmdline, []byte(dir+"/")) {
			pids = append(pids, pid)
		}
	}
	return pids
}
