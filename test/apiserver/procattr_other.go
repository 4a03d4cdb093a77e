//go:build !linux

package apiserver

import "syscall"

// sysProcAttr has no parent-death signal outside Linux; Stop is the only
// cleanup there.
func sysProcAttr() *syscall.SysProcAttr { return nil }
