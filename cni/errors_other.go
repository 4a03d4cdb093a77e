//go:build !linux

package cni

// isNetnsError: off Linux the wiring wraps ErrNetnsNotFound itself.
func isNetnsError(error) bool { return false }
