package apiaddr

import (
	"os"
	"path/filepath"
)

// DefaultKubeletKubeconfigs are the kubelet kubeconfigs step 2 tries. A
// HostProcess container sees the host's files, so these are the host's
// paths: sig-windows-tools' kubeadm PrepareNode.ps1 runs kubelet with
// --kubeconfig=$env:SYSTEMDRIVE/etc/kubernetes/kubelet.conf; Microsoft
// SDN's older start-kubelet.ps1 used c:\k\config.
func DefaultKubeletKubeconfigs() []string {
	drive := os.Getenv("SystemDrive")
	if drive == "" {
		drive = "C:"
	}
	return []string{filepath.Join(drive+`\`, "etc", "kubernetes", "kubelet.conf"), `C:\k\config`}
}
