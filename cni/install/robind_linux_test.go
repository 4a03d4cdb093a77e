package install

import (
	"testing"

	"golang.org/x/sys/unix"
)

// roBind bind-mounts dir read-only onto itself until the test ends.
func roBind(t *testing.T, dir string) error {
	if err := unix.Mount(dir, dir, "", unix.MS_BIND, ""); err != nil {
		return err
	}
	t.Cleanup(func() { unix.Unmount(dir, unix.MNT_DETACH) })
	return unix.Mount("", dir, "", unix.MS_BIND|unix.MS_REMOUNT|unix.MS_RDONLY, "")
}
