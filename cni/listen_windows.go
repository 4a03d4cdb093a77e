package cni

import (
	"fmt"

	"golang.org/x/sys/windows"
)

// socketDirSDDL lets only SYSTEM and Administrators into the socket's
// directory (protected: nothing inherited from ProgramData, which lets
// Users create files). Windows checks AF_UNIX connects against the
// socket file's ACL, which it inherits from here.
const socketDirSDDL = "D:P(A;OICI;GA;;;SY)(A;OICI;GA;;;BA)"

// restrictSocket: the socket file inherits the directory's ACL.
func restrictSocket(string) error { return nil }

// secureSocketDir locks the directory's ACL down to SYSTEM and
// Administrators.
func secureSocketDir(dir string) error {
	sd, err := windows.SecurityDescriptorFromString(socketDirSDDL)
	if err != nil {
		return fmt.Errorf("socket directory ACL: %w", err)
	}
	dacl, _, err := sd.DACL()
	if err != nil {
		return fmt.Errorf("socket directory ACL: %w", err)
	}
	err = windows.SetNamedSecurityInfo(dir, windows.SE_FILE_OBJECT,
		windows.DACL_SECURITY_INFORMATION|windows.PROTECTED_DACL_SECURITY_INFORMATION, nil, nil, dacl, nil)
	if err != nil {
		return fmt.Errorf("restrict socket directory %s to SYSTEM and Administrators: %w", dir, err)
	}
	return nil
}
