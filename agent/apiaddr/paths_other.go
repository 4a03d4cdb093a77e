//go:build !windows

package apiaddr

// HostRoot is where the Linux DaemonSet mounts the host's /etc/kubernetes
// (read-only): the container's own /etc is the image's.
const HostRoot = "/host"

// DefaultKubeletKubeconfigs are the kubelet kubeconfigs step 2 tries:
// kubeadm's, as the DaemonSet mounts it.
func DefaultKubeletKubeconfigs() []string {
	return []string{HostRoot + "/etc/kubernetes/kubelet.conf"}
}
