package apiserver

import "syscall"

// sysProcAttr makes the kernel kill children if the test binary dies without
// running cleanups (a test timeout panics past t.Cleanup).
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
