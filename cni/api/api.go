// Package api is the wire protocol between the nodenet-cni plugin and the
// agent's CNI server: one HTTP POST of a Request (JSON) to RequestPath on
// the agent's unix socket, answered with a Response. It imports nothing
// heavy, because the plugin binary links it and a runtime starts that
// binary for every pod.
package api

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"

	"github.com/containernetworking/cni/pkg/types"
	"github.com/containernetworking/cni/pkg/version"
)

// Default socket paths (cni.socketPath); config takes its defaults
// from here so the plugin needs no config package to find the agent.
const (
	DefaultSocketPathLinux   = "/var/run/nodenet/cni.sock"
	DefaultSocketPathWindows = `C:\ProgramData\nodenet\cni.sock`
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

// Errorf makes a CNI error with code and a formatted message: how both
// sides of the socket turn a failure into what the runtime sees.
func Errorf(code uint, format string, args ...any) *types.Error {
	return types.NewError(code, fmt.Sprintf(format, args...), "")
}

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

// Send posts req to the agent listening on socket and returns its
// Response. An error means the agent could not be asked or did not
// answer in the protocol: the plugin maps it to "try again later".
func Send(ctx context.Context, socket string, req *Request) (*Response, error) {
	body, err := json.Marshal(req)
	if err != nil {
		return nil, err
	}
	client := &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", socket)
		},
		DisableKeepAlives: true,
	}}
	httpReq, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://nodenet-agent"+RequestPath, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	httpReq.Header.Set("Content-Type", "application/json")
	httpResp, err := client.Do(httpReq)
	if err != nil {
		return nil, err
	}
	defer httpResp.Body.Close()
	var resp Response
	if err := json.NewDecoder(io.LimitReader(httpResp.Body, DefaultMaxRequestBytes)).Decode(&resp); err != nil {
		return nil, fmt.Errorf("agent answered HTTP %d without a CNI response: %w", httpResp.StatusCode, err)
	}
	if httpResp.StatusCode != http.StatusOK && resp.Error == nil {
		return nil, fmt.Errorf("agent answered HTTP %d", httpResp.StatusCode)
	}
	return &resp, nil
}
