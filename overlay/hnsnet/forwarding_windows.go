//go:build windows

package hnsnet

import (
	"context"
	"fmt"
	"unsafe"

	"golang.org/x/sys/windows"
)

// SystemForwarding turns IPv4 forwarding on with iphlpapi:
// GetIpInterfaceEntry reads the interface, SetIpInterfaceEntry writes it
// only when forwarding is off. flannel runs PowerShell's
// Set-NetIPInterface -Forwarding Enabled for the same (pkg/ip
// iface_windows.go); the API call needs no PowerShell in the agent's
// HostProcess container, costs no process start per ensure, returns a
// typed error, and its read makes a repeated ensure change nothing.
type SystemForwarding struct {
	// set is iphlpapi's SetIpInterfaceEntry, which x/sys/windows does not
	// wrap (it has GetIpInterfaceEntry and MibIpInterfaceRow).
	set *windows.LazyProc
}

// NewSystemForwarding returns the host's Forwarding.
func NewSystemForwarding() *SystemForwarding {
	return &SystemForwarding{set: windows.NewLazySystemDLL("iphlpapi.dll").NewProc("SetIpInterfaceEntry")}
}

func systemForwarding() Forwarding { return NewSystemForwarding() }

// EnableForwarding implements Forwarding for interface a.Index.
func (f *SystemForwarding) EnableForwarding(ctx context.Context, a Adapter) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	row := windows.MibIpInterfaceRow{Family: windows.AF_INET, InterfaceIndex: uint32(a.Index)}
	if err := windows.GetIpInterfaceEntry(&row); err != nil {
		return fmt.Errorf("GetIpInterfaceEntry(index %d): %w", a.Index, err)
	}
	if !forwardingRow(&row) {
		return nil
	}
	if err := f.set.Find(); err != nil {
		return fmt.Errorf("iphlpapi: %w", err)
	}
	if rc, _, _ := f.set.Call(uintptr(unsafe.Pointer(&row))); rc != 0 {
		return fmt.Errorf("SetIpInterfaceEntry(index %d): %w", a.Index, windows.Errno(rc))
	}
	return nil
}

// forwardingRow prepares a row read by GetIpInterfaceEntry for
// SetIpInterfaceEntry with forwarding on; it reports false when
// forwarding is on already (nothing to write). For IPv4 the row's
// SitePrefixLength must be 0 on a set (SetIpInterfaceEntry remarks,
// Microsoft Learn netioapi).
func forwardingRow(row *windows.MibIpInterfaceRow) bool {
	if row.ForwardingEnabled != 0 {
		return false
	}
	row.ForwardingEnabled = 1
	if row.Family == windows.AF_INET {
		row.SitePrefixLength = 0
	}
	return true
}
