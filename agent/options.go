package agent

import (
	"fmt"
	"runtime"

	"k8s.io/klog/v2"

	"github.com/nodenet/nodenet/config"
)

// Dataplane names a --dataplane value: what the agent programs.
type Dataplane string

const (
	// DataplaneLinux is netlink (bridge, vxlan), veth pods and nftables.
	DataplaneLinux Dataplane = "linux"
	// DataplaneHNS is the host's HNS (Windows only).
	DataplaneHNS Dataplane = "hns"
	// DataplaneSim is the HNS simulator, on any OS: it shows what a Windows
	// node would program. Pods are not wired for real.
	DataplaneSim Dataplane = "sim"
)

// Dataplanes lists the valid --dataplane values.
var Dataplanes = []Dataplane{DataplaneLinux, DataplaneHNS, DataplaneSim}

// DefaultDataplane is this OS's dataplane: hns on Windows, linux elsewhere.
func DefaultDataplane() Dataplane {
	if runtime.GOOS == "windows" {
		return DataplaneHNS
	}
	return DataplaneLinux
}

// ParseDataplane checks a --dataplane value; empty means DefaultDataplane.
func ParseDataplane(s string) (Dataplane, error) {
	if s == "" {
		return DefaultDataplane(), nil
	}
	for _, d := range Dataplanes {
		if string(d) == s {
			return d, nil
		}
	}
	return "", fmt.Errorf("unknown dataplane %q: want linux, hns or sim", s)
}

// TargetOS is the platform whose config rules apply: the simulator stands
// in for a Windows node, so it gets Windows rules (DSR, VNI ≥ 4096).
func (d Dataplane) TargetOS() config.OS {
	if d == DataplaneLinux {
		return config.OSLinux
	}
	return config.OSWindows
}

// ProxyBackend is the proxy backend the dataplane runs.
func (d Dataplane) ProxyBackend() string {
	if d == DataplaneLinux {
		return "nftables"
	}
	return "hns"
}

// Options configure an Agent: the command line of nodenet-agent.
type Options struct {
	// ConfigFile is --config: an AgentConfiguration, a
	// KubeProxyConfiguration or a flannel net-conf.json. Required.
	ConfigFile string
	// Kubeconfig is --kubeconfig; empty means the pod's service account
	// at the address package apiaddr discovers.
	Kubeconfig string
	// APIServer is --apiserver (https://host:port): with no Kubeconfig,
	// the API server address before discovery (package apiaddr).
	APIServer string
	// Dataplane is --dataplane; empty means DefaultDataplane().
	Dataplane Dataplane
	// Source is --source: "kubernetes" (empty) or "files:DIR".
	Source string
	// Version is reported on the local API; empty means the build's.
	Version string
	// Getenv and Hostname feed the config's node-name default (NODE_NAME,
	// then the hostname); nil means the process's.
	Getenv   func(string) string
	Hostname func() (string, error)
	// Logger defaults to klog.Background().
	Logger klog.Logger
}
