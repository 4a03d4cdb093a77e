package cni

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/containernetworking/cni/pkg/skel"
	"github.com/containernetworking/cni/pkg/types"
	current "github.com/containernetworking/cni/pkg/types/100"

	"github.com/nodenet/nodenet/agent/config"
)

// DefaultPluginTimeout bounds one forwarded request. It is longer than the
// server's DefaultRequestTimeout so that the server's own, more precise
// answer arrives first.
const DefaultPluginTimeout = DefaultRequestTimeout + 30*time.Second

// Plugin is the nodenet-cni binary: it forwards each CNI request to the
// agent and prints the agent's answer. It keeps no state.
type Plugin struct {
	// Stdout receives ADD's result. Default: os.Stdout.
	Stdout io.Writer
	// Timeout bounds one request. Default: DefaultPluginTimeout.
	Timeout time.Duration
	// DefaultSocketPath is used when the config has no socketPath.
	// Default: this OS's default cni.socketPath.
	DefaultSocketPath string
}

// PluginMain runs the plugin with skel: skel reads the environment and
// stdin, answers VERSION, checks the spec version and prints errors as CNI
// error JSON.
func PluginMain() {
	p := &Plugin{}
	skel.PluginMainFuncs(skel.CNIFuncs{
		Add:    p.forwarder(CommandAdd),
		Del:    p.forwarder(CommandDel),
		Check:  p.forwarder(CommandCheck),
		GC:     p.forwarder(CommandGC),
		Status: p.forwarder(CommandStatus),
	}, SupportedVersions, "nodenet-cni: hands CNI requests to the nodenet agent on this node")
}

// pluginConf is the part of the config the plugin itself reads.
type pluginConf struct {
	CNIVersion string `json:"cniVersion"`
	SocketPath string `json:"socketPath"`
}

func (p *Plugin) forwarder(command string) func(*skel.CmdArgs) error {
	return func(args *skel.CmdArgs) error {
		return p.Forward(command, args)
	}
}

// Forward sends one request to the agent and prints ADD's result in the
// config's cniVersion.
func (p *Plugin) Forward(command string, args *skel.CmdArgs) error {
	var conf pluginConf
	if err := json.Unmarshal(args.StdinData, &conf); err != nil {
		return requestError(types.ErrDecodingFailure, "network config is not valid JSON: %v", err)
	}
	socket := conf.SocketPath
	if socket == "" {
		socket = p.defaultSocketPath()
	}
	timeout := p.Timeout
	if timeout <= 0 {
		timeout = DefaultPluginTimeout
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()

	resp, err := Send(ctx, socket, &Request{
		Command: command, ContainerID: args.ContainerID, Netns: args.Netns, IfName: args.IfName,
		Args: args.Args, Path: args.Path, Config: args.StdinData,
	})
	if err != nil {
		code := types.ErrTryAgainLater
		if command == CommandStatus {
			code = types.ErrPluginNotAvailable
		}
		return requestError(code, "the nodenet agent is not reachable on %s: %v; the runtime will retry. Check that the nodenet-agent pod on this node is running", socket, err)
	}
	if resp.Error != nil {
		return resp.Error
	}
	if command != CommandAdd {
		return nil
	}
	if len(resp.Result) == 0 {
		return requestError(types.ErrInternal, "the nodenet agent returned no result for ADD")
	}
	res, err := current.NewResult(resp.Result)
	if err != nil {
		return requestError(types.ErrDecodingFailure, "decode the agent's result: %v", err)
	}
	out, err := res.GetAsVersion(conf.CNIVersion)
	if err != nil {
		return requestError(types.ErrIncompatibleCNIVersion, "convert the result to cniVersion %s: %v", conf.CNIVersion, err)
	}
	stdout := p.Stdout
	if stdout == nil {
		stdout = os.Stdout
	}
	data, err := json.Marshal(out)
	if err != nil {
		return requestError(types.ErrInternal, "encode result: %v", err)
	}
	if _, err := stdout.Write(data); err != nil {
		return requestError(types.ErrIOFailure, "write result: %v", err)
	}
	return nil
}

func (p *Plugin) defaultSocketPath() string {
	if p.DefaultSocketPath != "" {
		return p.DefaultSocketPath
	}
	return config.DefaultCNIConfiguration(config.HostOS()).SocketPath
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
