package config

import (
	"runtime"
	"strings"

	"github.com/nodenet/nodenet/cni/api"
)

// OS is the platform a config is loaded for. It is an input rather than
// runtime.GOOS so that a Linux machine can render and check a Windows
// node's config (nodenetctl --os windows, nodenet-agent --dataplane=sim).
type OS string

// Supported target platforms.
const (
	OSLinux   OS = "linux"
	OSWindows OS = "windows"
)

// HostOS is the platform this binary runs on: windows on Windows, linux
// everywhere else (a developer's macOS renders Linux defaults).
func HostOS() OS {
	if runtime.GOOS == "windows" {
		return OSWindows
	}
	return OSLinux
}

// orHost resolves the empty OS to HostOS.
func (o OS) orHost() OS {
	if o == "" {
		return HostOS()
	}
	return o
}

// rules is the platform whose defaults and rules apply: Windows for
// OSWindows, Linux for anything else.
func (o OS) rules() OS {
	if o.orHost() == OSWindows {
		return OSWindows
	}
	return OSLinux
}

// supported reports whether o is a platform this package knows.
func (o OS) supported() bool {
	return o == OSLinux || o == OSWindows
}

// containerd's CRI endpoints, the defaults of cni.runtimeEndpoint.
const (
	DefaultRuntimeEndpointLinux   = "unix:///run/containerd/containerd.sock"
	DefaultRuntimeEndpointWindows = "npipe:////./pipe/containerd-containerd"
)

// cniDefaults are the per-OS defaults of CNIConfiguration.
func cniDefaults(o OS) CNIConfiguration {
	if o == OSWindows {
		return CNIConfiguration{
			SocketPath:      api.DefaultSocketPathWindows,
			ConfDir:         `C:\etc\cni\net.d`,
			ConflistName:    DefaultConflistName,
			BinDir:          `C:\opt\cni\bin`,
			DataDir:         `C:\ProgramData\nodenet`,
			RuntimeEndpoint: DefaultRuntimeEndpointWindows,
		}
	}
	return CNIConfiguration{
		SocketPath:      api.DefaultSocketPathLinux,
		ConfDir:         "/etc/cni/net.d",
		ConflistName:    DefaultConflistName,
		BinDir:          "/opt/cni/bin",
		DataDir:         "/var/lib/nodenet",
		RuntimeEndpoint: DefaultRuntimeEndpointLinux,
	}
}

// isAbsPath reports whether p is absolute on o. It does not use
// path/filepath, whose rules are the host's, not the target's.
func isAbsPath(o OS, p string) bool {
	if o != OSWindows {
		return strings.HasPrefix(p, "/")
	}
	if strings.HasPrefix(p, `\\`) { // UNC path
		return len(p) > 2
	}
	return len(p) >= 3 && isASCIILetter(p[0]) && p[1] == ':' && (p[2] == '\\' || p[2] == '/')
}

func isASCIILetter(b byte) bool {
	return ('a' <= b && b <= 'z') || ('A' <= b && b <= 'Z')
}
