//go:build windows

package hostroute

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"unsafe"

	"golang.org/x/sys/windows"
)

// iphlpapi calls x/sys/windows does not wrap (it has GetIpForwardTable2,
// FreeMibTable and the row types).
type iphlpapi struct {
	create *windows.LazyProc
	delete *windows.LazyProc
}

// MIB_IPFORWARD_ROW2 defaults (netioapi.h, InitializeIpForwardEntry).
const (
	infiniteLifetime  = 0xffffffff
	unspecifiedMetric = 0xffffffff
	mibIPProtoNetMgmt = 3 // MIB_IPPROTO_NETMGMT: a static route
)

// Table is the iphlpapi route table of this host.
type Table struct{ api iphlpapi }

var _ Interface = (*Table)(nil)

// New returns the host's route table.
func New() *Table {
	dll := windows.NewLazySystemDLL("iphlpapi.dll")
	return &Table{api: iphlpapi{
		create: dll.NewProc("CreateIpForwardEntry2"),
		delete: dll.NewProc("DeleteIpForwardEntry2"),
	}}
}

// List implements Interface.
func (t *Table) List(ctx context.Context) ([]Route, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	var table *windows.MibIpForwardTable2
	if err := windows.GetIpForwardTable2(windows.AF_UNSPEC, &table); err != nil {
		return nil, fmt.Errorf("list routes: GetIpForwardTable2: %w", err)
	}
	defer windows.FreeMibTable(unsafe.Pointer(table))
	rows := table.Rows()
	out := make([]Route, 0, len(rows))
	for i := range rows {
		r, ok := fromRow(&rows[i])
		if ok {
			out = append(out, r)
		}
	}
	return out, nil
}

// Add implements Interface.
func (t *Table) Add(ctx context.Context, r Route) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	row, err := t.row(r)
	if err != nil {
		return err
	}
	row.Metric = r.Metric
	row.Protocol = windows.MIB_IPPROTO_NETMGMT // a static route, like route.exe add
	if err := t.call(t.api.create, row); err != nil {
		return fmt.Errorf("add route %s: CreateIpForwardEntry2: %w", r, err)
	}
	return nil
}

// Delete implements Interface.
func (t *Table) Delete(ctx context.Context, r Route) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	row, err := t.row(r)
	if err != nil {
		return err
	}
	if err := t.call(t.api.delete, row); err != nil {
		return fmt.Errorf("delete route %s: DeleteIpForwardEntry2: %w", r, err)
	}
	return nil
}

// row returns an initialized MIB_IPFORWARD_ROW2 holding r's key.
func (t *Table) row(r Route) (*windows.MibIpForwardRow2, error) {
	if !r.Destination.IsValid() || !r.NextHop.IsValid() || r.Destination.Addr().Is4() != r.NextHop.Is4() {
		return nil, fmt.Errorf("route %s: destination and next hop must be valid and of one family: %w", r, ErrInvalid)
	}
	// The defaults InitializeIpForwardEntry documents, set here so the
	// conversion needs no DLL (and runs under Wine, which lacks it):
	// infinite lifetimes, metric left to the interface, a static
	// (NETMGMT) route that survives until deleted.
	row := &windows.MibIpForwardRow2{
		ValidLifetime: infiniteLifetime, PreferredLifetime: infiniteLifetime,
		Metric: unspecifiedMetric, Protocol: mibIPProtoNetMgmt,
		Loopback: 1, AutoconfigureAddress: 1, Immortal: 1,
	}
	row.InterfaceIndex = uint32(r.InterfaceIndex)
	toSockaddr(&row.DestinationPrefix.Prefix, r.Destination.Masked().Addr())
	row.DestinationPrefix.PrefixLength = uint8(r.Destination.Bits())
	toSockaddr(&row.NextHop, r.NextHop)
	return row, nil
}

// call runs a NETIO_STATUS-returning proc and maps its code.
func (t *Table) call(p *windows.LazyProc, row *windows.MibIpForwardRow2) error {
	if err := p.Find(); err != nil {
		return fmt.Errorf("iphlpapi: %w", err)
	}
	rc, _, _ := p.Call(uintptr(unsafe.Pointer(row)))
	return mapStatus(windows.Errno(rc))
}

func mapStatus(code windows.Errno) error {
	switch code {
	case 0:
		return nil
	case windows.ERROR_OBJECT_ALREADY_EXISTS:
		return errors.Join(ErrExists, code)
	case windows.ERROR_NOT_FOUND:
		return errors.Join(ErrNotFound, code)
	case windows.ERROR_INVALID_PARAMETER, windows.ERROR_FILE_NOT_FOUND:
		return errors.Join(ErrInvalid, code)
	}
	return code
}

func fromRow(row *windows.MibIpForwardRow2) (Route, bool) {
	dst, ok := fromSockaddr(&row.DestinationPrefix.Prefix)
	if !ok {
		return Route{}, false
	}
	nh, ok := fromSockaddr(&row.NextHop)
	if !ok {
		return Route{}, false
	}
	pfx, err := dst.Prefix(int(row.DestinationPrefix.PrefixLength))
	if err != nil {
		return Route{}, false
	}
	return Route{Destination: pfx, NextHop: nh, InterfaceIndex: int(row.InterfaceIndex), Metric: row.Metric}, true
}

func fromSockaddr(sa *windows.RawSockaddrInet) (netip.Addr, bool) {
	switch sa.Family {
	case windows.AF_INET:
		v4 := (*windows.RawSockaddrInet4)(unsafe.Pointer(sa))
		return netip.AddrFrom4(v4.Addr), true
	case windows.AF_INET6:
		v6 := (*windows.RawSockaddrInet6)(unsafe.Pointer(sa))
		return netip.AddrFrom16(v6.Addr), true
	}
	return netip.Addr{}, false
}

func toSockaddr(sa *windows.RawSockaddrInet, a netip.Addr) {
	*sa = windows.RawSockaddrInet{}
	if a.Is4() {
		v4 := (*windows.RawSockaddrInet4)(unsafe.Pointer(sa))
		v4.Family = windows.AF_INET
		v4.Addr = a.As4()
		return
	}
	v6 := (*windows.RawSockaddrInet6)(unsafe.Pointer(sa))
	v6.Family = windows.AF_INET6
	v6.Addr = a.As16()
}
