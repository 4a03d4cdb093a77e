//go:build !windows

package hns

import (
	"errors"
	"runtime"
)

// NewClient returns the real HNS client. HNS exists only on Windows; use
// NewSimulator elsewhere.
func NewClient() (Interface, error) {
	return nil, errors.New("the HNS client needs Windows (this is " + runtime.GOOS + "); use the simulator (--dataplane=sim)")
}
