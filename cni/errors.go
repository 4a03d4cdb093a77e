package cni

import (
	"context"
	"errors"
	"fmt"

	"github.com/containernetworking/cni/pkg/types"

	"github.com/nodenet/nodenet/cni/api"
	"github.com/nodenet/nodenet/hns"
	"github.com/nodenet/nodenet/ipam"
)

// errNotReady says the node network isn't there yet; ADD, CHECK and DEL
// answer it with code 11 so the runtime retries, STATUS with code 50.
var errNotReady = errors.New("node network is not ready")

// ErrNetnsNotFound is what a Wiring wraps when the pod's network namespace
// does not exist; the server answers it with code 8 (invalid netns).
var ErrNetnsNotFound = errors.New("network namespace not found")

// toCNIError converts an error from IPAM or the wiring into the CNI error
// the runtime sees. This is the only place internal errors become CNI
// codes.
func toCNIError(op string, err error) *types.Error {
	var cniErr *types.Error
	switch {
	case errors.As(err, &cniErr):
		return cniErr
	case errors.Is(err, errNotReady):
		return api.Errorf(types.ErrTryAgainLater, "%s: %v; the runtime will retry once the nodenet agent has set up the node network", op, err)
	case ipam.IsExhausted(err):
		// Freed by the next pod deletion, so the runtime's retry can succeed.
		return api.Errorf(types.ErrTryAgainLater, "%s: %v; delete pods on this node or give it a larger pod CIDR", op, err)
	case errors.Is(err, ErrNetnsNotFound) || isNetnsError(err):
		return api.Errorf(types.ErrInvalidNetNS, "%s: %v", op, err)
	case hns.IsInUse(err):
		return api.Errorf(types.ErrTryAgainLater, "%s: %v; the service proxy still references it and will release it shortly", op, err)
	case hns.IsTransient(err), errors.Is(err, context.DeadlineExceeded):
		return api.Errorf(types.ErrTryAgainLater, "%s: %v", op, err)
	default:
		return api.Errorf(types.ErrInternal, "%s: %v", op, err)
	}
}

// wrapf is fmt.Errorf for the server's own steps.
func wrapf(err error, format string, args ...any) error {
	return fmt.Errorf(format+": %w", append(args, err)...)
}
