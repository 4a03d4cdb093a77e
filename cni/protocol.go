package cni

import (
	"encoding/json"

	"github.com/containernetworking/cni/pkg/types"
	"github.com/containernetworking/cni/pkg/version"
)

// CNI commands, as CNI_COMMAND spells them.
const (
	CommandAdd     = "ADD"
	CommandDel     = "DEL"
	CommandCheck   = "CHECK"
	CommandGC      = "GC"
	CommandStatus  = "STATUS"
	CommandVersion = "VERSION"
)

// RequestPath is the HTTP path the server answers on.
const RequestPath = "/v1/cni"

// DefaultMaxRequestBytes bounds a request body. A real request is a few
// KiB (a conflist entry plus prevResult); GC's valid-attachments list for
// a full node stays well under this.
const DefaultMaxRequestBytes = 1 << 20

// SupportedVersions are the CNI spec versions the plugin accepts. Older
// runtimes still send 0.3.x and 0.4.0; results are converted to the
// version the config asks for.
var SupportedVersions = version.PluginSupports("0.3.0", "0.3.1", "0.4.0", "1.0.0", "1.1.0")

// Request is one CNI invocation, forwarded by the plugin as it got it:
// the CNI_* environment and the network config from stdin.
type Request struct {
	Command     string `json:"command"`
	ContainerID string `json:"containerID,omitempty"`
	Netns       string `json:"netns,omitempty"`
	IfName      string `json:"ifName,omitempty"`
	Args        string `json:"args,omitempty"`
	Path        string `json:"path,omitempty"`
	// Config is the plugin's network config (stdin).
	Config json.RawMessage `json:"config"`
}

// Response answers a Request: Error when it failed, else Result (for ADD)
// in the current CNI version, or neither.
type Response struct {
	Result json.RawMessage `json:"result,omitempty"`
	Error  *types.Error    `json:"error,omitempty"`
}
