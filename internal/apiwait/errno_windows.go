package apiwait

import "golang.org/x/sys/windows"

// unreachableErrnos are the dial failures that mean no server listens.
// Winsock reports its own codes, not syscall's invented POSIX ones.
var unreachableErrnos = []error{windows.WSAECONNREFUSED, windows.WSAEHOSTUNREACH, windows.WSAENETUNREACH}
