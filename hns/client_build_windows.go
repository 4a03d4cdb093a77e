//go:build windows

package hns

import (
	"context"
	"errors"
	"fmt"

	"golang.org/x/sys/windows"
	"golang.org/x/sys/windows/registry"
)

// OSBuild reads the build from Windows: the build number from
// RtlGetVersion (which, unlike GetVersionEx, ignores the manifest), the
// update build revision from the registry's UBR value, which every
// cumulative update sets (absent: revision 0).
func (client) OSBuild(ctx context.Context) (OSBuild, error) {
	if err := ctx.Err(); err != nil {
		return OSBuild{}, err
	}
	b := OSBuild{Number: int(windows.RtlGetVersion().BuildNumber)}
	k, err := registry.OpenKey(registry.LOCAL_MACHINE, `SOFTWARE\Microsoft\Windows NT\CurrentVersion`, registry.QUERY_VALUE)
	if err != nil {
		return OSBuild{}, fmt.Errorf("read the Windows build revision: %w", err)
	}
	defer k.Close()
	ubr, _, err := k.GetIntegerValue("UBR")
	switch {
	case errors.Is(err, registry.ErrNotExist):
	case err != nil:
		return OSBuild{}, fmt.Errorf("read the Windows build revision (UBR): %w", err)
	default:
		b.Revision = int(ubr)
	}
	return b, nil
}
