package kubenode

import (
	"fmt"
	"strconv"
	"strings"
)

// containerdSpec is what one node's containerd config says.
type containerdSpec struct {
	Root, State, Socket string
	SandboxImage        string
	Runc                string
	CNIConfDir          string
	CNIBinDir           string
	Snapshotter         string
	// NetnsUnderStateDir puts pod network namespaces under State instead
	// of /var/run/netns (shared by every node's containerd unless each
	// has its own mount namespace).
	NetnsUnderStateDir bool
}

// containerdConfig renders containerd 2.x's config (version 3, the CRI
// plugin split into io.containerd.cri.v1.images/runtime). Facts from
// containerd v2.2's internal/cri/config: restrict_oom_score_adj keeps
// containerd from lowering a container's OOM score below its own (it
// cannot here); netns_mounts_under_state_dir puts pod netns under our
// state dir instead of the shared /var/run/netns; NRI is disabled because
// its socket (/var/run/nri/nri.sock) would be shared by every node's
// containerd.
func containerdConfig(s containerdSpec) string {
	q := strconv.Quote
	var b strings.Builder
	fmt.Fprintf(&b, "version = 3\nroot = %s\nstate = %s\n", q(s.Root), q(s.State))
	b.WriteString("disabled_plugins = [\"io.containerd.nri.v1.nri\"]\n")
	fmt.Fprintf(&b, "\n[grpc]\n  address = %s\n", q(s.Socket))
	fmt.Fprintf(&b, "\n[ttrpc]\n  address = %s\n", q(s.Socket+".ttrpc"))
	const images = "plugins.'io.containerd.cri.v1.images'"
	fmt.Fprintf(&b, "\n[%s]\n  snapshotter = %s\n", images, q(s.Snapshotter))
	fmt.Fprintf(&b, "\n[%s.pinned_images]\n  sandbox = %s\n", images, q(s.SandboxImage))
	const rt = "plugins.'io.containerd.cri.v1.runtime'"
	fmt.Fprintf(&b, "\n[%s]\n  restrict_oom_score_adj = true\n  netns_mounts_under_state_dir = %t\n  enable_selinux = false\n", rt, s.NetnsUnderStateDir)
	fmt.Fprintf(&b, "\n[%s.containerd]\n  default_runtime_name = \"runc\"\n", rt)
	fmt.Fprintf(&b, "\n[%s.containerd.runtimes.runc]\n  runtime_type = \"io.containerd.runc.v2\"\n", rt)
	fmt.Fprintf(&b, "\n[%s.containerd.runtimes.runc.options]\n  BinaryName = %s\n  SystemdCgroup = false\n", rt, q(s.Runc))
	fmt.Fprintf(&b, "\n[%s.cni]\n  bin_dirs = [%s]\n  conf_dir = %s\n", rt, q(s.CNIBinDir), q(s.CNIConfDir))
	fmt.Fprintf(&b, "\n[plugins.'io.containerd.grpc.v1.cri']\n  stream_server_address = \"127.0.0.1\"\n  stream_server_port = \"0\"\n")
	return b.String()
}

// kubeletSpec is what one node's KubeletConfiguration says.
type kubeletSpec struct {
	NodeIP        string
	CgroupRoot    string
	RuntimeSocket string
	ResolvConf    string
	PodLogsDir    string
	ClusterDNS    []string
	MaxPods       int
}

// kubeletConfig renders a KubeletConfiguration (v1beta1). failCgroupV1:
// false because these machines run cgroup v1 and kubelet ≥ 1.35 refuses it
// otherwise (KEP-5573). The API server reaches kubelet (logs, exec,
// port-forward) anonymously: kubelet's serving certificate is
// self-signed and the apiserver does not verify it. Eviction thresholds
// are tiny so a nearly full test disk evicts nothing; swap is tolerated.
func kubeletConfig(s kubeletSpec) string {
	q := strconv.Quote
	var b strings.Builder
	b.WriteString("apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n")
	b.WriteString("failCgroupV1: false\ncgroupDriver: cgroupfs\ncgroupsPerQOS: true\n")
	fmt.Fprintf(&b, "cgroupRoot: %s\n", q(s.CgroupRoot))
	b.WriteString("enforceNodeAllocatable: [\"pods\"]\n")
	fmt.Fprintf(&b, "containerRuntimeEndpoint: %s\n", q("unix://"+s.RuntimeSocket))
	b.WriteString("failSwapOn: false\n")
	b.WriteString("authentication:\n  anonymous:\n    enabled: true\n  webhook:\n    enabled: false\n")
	b.WriteString("authorization:\n  mode: AlwaysAllow\n")
	fmt.Fprintf(&b, "address: %s\nport: 10250\nreadOnlyPort: 0\n", q(s.NodeIP))
	b.WriteString("healthzBindAddress: 127.0.0.1\nhealthzPort: 10248\n")
	fmt.Fprintf(&b, "resolvConf: %s\n", q(s.ResolvConf))
	fmt.Fprintf(&b, "podLogsDir: %s\n", q(s.PodLogsDir))
	b.WriteString("clusterDomain: cluster.local\n")
	if len(s.ClusterDNS) > 0 {
		b.WriteString("clusterDNS:\n")
		for _, ip := range s.ClusterDNS {
			fmt.Fprintf(&b, "- %s\n", q(ip))
		}
	}
	fmt.Fprintf(&b, "maxPods: %d\n", s.MaxPods)
	b.WriteString("evictionHard:\n  memory.available: \"50Mi\"\n  nodefs.available: \"1%\"\n  imagefs.available: \"1%\"\n  nodefs.inodesFree: \"1%\"\n")
	b.WriteString("imageGCHighThresholdPercent: 100\nimageGCLowThresholdPercent: 99\n")
	b.WriteString("serializeImagePulls: false\n")
	// Faster pod status for tests; defaults otherwise.
	b.WriteString("nodeStatusUpdateFrequency: 10s\nsyncFrequency: 10s\n")
	return b.String()
}
