package apiaddr

// DefaultKubeletKubeconfigs are the kubelet kubeconfigs step 2 tries. A
// HostProcess container sees the host's files, so these are the host's
// paths: sig-windows-tools' kubeadm join (C:\etc\kubernetes\kubelet.conf)
// and the older flannel guides' C:\k\config.
func DefaultKubeletKubeconfigs() []string {
	return []string{`C:\etc\kubernetes\kubelet.conf`, `C:\k\config`}
}
