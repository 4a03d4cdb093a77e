//go:build !windows

package apiaddr

// DefaultKubeletKubeconfigs are the kubelet kubeconfigs step 2 tries:
// kubeadm's, as the Linux DaemonSet mounts it.
func DefaultKubeletKubeconfigs() []string { return LinuxKubeletKubeconfigs() }
