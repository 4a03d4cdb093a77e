package overlay

import (
	"errors"
	"fmt"
)

// MismatchError says an existing network of the configured name differs
// from the config in a way that cannot be fixed in place. The dataplane
// leaves it alone: it may carry running pods.
type MismatchError struct {
	// Network is the network's (or device's) name.
	Network string
	// Field is what differs ("type", "subnet", "VNI", "VXLAN port",
	// "adapter", ...); Have is what the host has, Want what the config
	// asks for.
	Field      string
	Have, Want string
}

func (e *MismatchError) Error() string {
	return fmt.Sprintf("existing network %q has %s %s but the config wants %s: "+
		"nodenet will not replace it on its own (pods on it would lose connectivity); "+
		"delete it, fix the config, or set network.allowRecreate: true",
		e.Network, e.Field, e.Have, e.Want)
}

// SpecError says the platform cannot run the requested network (a Windows
// overlay VNI below 4096, an uplink adapter that does not exist). Nothing
// was written.
type SpecError struct {
	// Field names the config field at fault, e.g. "network.vxlan.vni".
	Field string
	// Reason says what is wrong and how to fix it.
	Reason string
}

func (e *SpecError) Error() string { return e.Field + ": " + e.Reason }

// IsMismatch reports whether err is (or wraps) a *MismatchError.
func IsMismatch(err error) bool {
	var m *MismatchError
	return errors.As(err, &m)
}

// IsSpecError reports whether err is (or wraps) a *SpecError.
func IsSpecError(err error) bool {
	var s *SpecError
	return errors.As(err, &s)
}
