//go:build !linux

package vethbridge

import (
	"context"
	"errors"
	"runtime"

	current "github.com/containernetworking/cni/pkg/types/100"

	"github.com/nodenet/nodenet/cni"
)

// errUnsupported is what every operation returns off Linux.
var errUnsupported = errors.New("veth+bridge pod wiring needs Linux, not " + runtime.GOOS)

// Wiring is Linux-only; off Linux New fails and every method does too.
type Wiring struct{}

// New fails: the veth+bridge wiring needs Linux.
func New(Options) (*Wiring, error) { return nil, errUnsupported }

// Ready fails off Linux.
func (*Wiring) Ready(context.Context, *cni.NodeNetwork) error { return errUnsupported }

// Add fails off Linux.
func (*Wiring) Add(context.Context, *cni.NodeNetwork, *cni.Pod) (*current.Result, error) {
	return nil, errUnsupported
}

// Check fails off Linux.
func (*Wiring) Check(context.Context, *cni.NodeNetwork, *cni.Pod, *current.Result) error {
	return errUnsupported
}

// Del fails off Linux.
func (*Wiring) Del(context.Context, *cni.NodeNetwork, *cni.Pod) error { return errUnsupported }

// List fails off Linux.
func (*Wiring) List(context.Context, *cni.NodeNetwork) ([]cni.Attachment, error) {
	return nil, errUnsupported
}
