//go:build !windows

package apiwait

import "syscall"

// unreachableErrnos are the dial failures that mean no server listens.
var unreachableErrnos = []error{syscall.ECONNREFUSED, syscall.EHOSTUNREACH, syscall.ENETUNREACH}
