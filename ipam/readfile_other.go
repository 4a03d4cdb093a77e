//go:build !unix

package ipam

import "os"

// readSmallFile reads an allocation file; see readfile_unix.go for why
// Unix does it differently.
func readSmallFile(path string) ([]byte, error) {
	return os.ReadFile(path)
}
