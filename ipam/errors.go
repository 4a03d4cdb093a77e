package ipam

import (
	"errors"
	"fmt"
	"net/netip"
)

// ErrClosed is returned by every operation on a closed Allocator.
var ErrClosed = errors.New("ipam allocator is closed")

// ExhaustedError says a range has no free address left. It is transient:
// the next released address makes room.
type ExhaustedError struct {
	Subnet netip.Prefix
	// Usable counts the addresses the range can ever hand out (its size
	// minus the reserved ones), saturated at MaxUint64 for huge IPv6 ranges.
	Usable uint64
	// Allocated counts the usable addresses currently held.
	Allocated uint64
}

func (e *ExhaustedError) Error() string {
	return fmt.Sprintf("no free address in %s: %d of %d usable addresses are allocated", e.Subnet, e.Allocated, e.Usable)
}

// IsExhausted reports whether err (or an error it wraps) is an
// *ExhaustedError.
func IsExhausted(err error) bool {
	var e *ExhaustedError
	return errors.As(err, &e)
}
