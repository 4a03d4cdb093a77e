// Package plugin is the nodenet-cni binary's logic: it forwards each CNI
// request to the agent and prints the agent's answer, keeping no state.
// Transport failures become CNI codes: agent not reachable → 11 (try again
// later), or 50 (not available) for STATUS.
package plugin

import (
	"context"
	"encoding/json"
	"io"
	"os"
	"time"

	"github.com/containernetworking/cni/pkg/skel"
	"github.com/containernetworking/cni/pkg/types"
	current "github.com/containernetworking/cni/pkg/types/100"

	"github.com/nodenet/nodenet/cni/api"
)

// DefaultPluginTimeout bounds one forwarded request. It is longer than the
// server's default request timeout (cni.DefaultRequestTimeout, 2m) so that
// the server's own, more precise answer arrives first.
const DefaultPluginTimeout = 2*time.Minute + 30*time.Second

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
		Add:    p.forwarder(api.CommandAdd),
		Del:    p.forwarder(api.CommandDel),
		Check:  p.forwarder(api.CommandCheck),
		GC:     p.forwarder(api.CommandGC),
		Status: p.forwarder(api.CommandStatus),
	}, api.SupportedVersions, "nodenet-cni: hands CNI requests to the nodenet agent on this node")
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
		return api.Errorf(types.ErrDecodingFailure, "network config is not valid JSON: %v", err)
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

	resp, err := api.Send(ctx, socket, &api.Request{
		Command: command, ContainerID: args.ContainerID, Netns: args.Netns, IfName: args.IfName,
		Args: args.Args, Path: args.Path, Config: args.StdinData,
	})
	if err != nil {
		code := types.ErrTryAgainLater
		if command == api.CommandStatus {
			code = types.ErrPluginNotAvailable
		}
		return api.Errorf(code, "the nodenet agent is not reachable on %s: %v; the runtime will retry. Check that the nodenet-agent pod on this node is running", socket, err)
	}
	if resp.Error != nil {
		return resp.Error
	}
	if command != api.CommandAdd {
		return nil
	}
	if len(resp.Result) == 0 {
		return api.Errorf(types.ErrInternal, "the nodenet agent returned no result for ADD")
	}
	res, err := current.NewResult(resp.Result)
	if err != nil {
		return api.Errorf(types.ErrDecodingFailure, "decode the agent's result: %v", err)
	}
	out, err := res.GetAsVersion(conf.CNIVersion)
	if err != nil {
		return api.Errorf(types.ErrIncompatibleCNIVersion, "convert the result to cniVersion %s: %v", conf.CNIVersion, err)
	}
	stdout := p.Stdout
	if stdout == nil {
		stdout = os.Stdout
	}
	data, err := json.Marshal(out)
	if err != nil {
		return api.Errorf(types.ErrInternal, "encode result: %v", err)
	}
	if _, err := stdout.Write(data); err != nil {
		return api.Errorf(types.ErrIOFailure, "write result: %v", err)
	}
	return nil
}

func (p *Plugin) defaultSocketPath() string {
	if p.DefaultSocketPath != "" {
		return p.DefaultSocketPath
	}
	return api.DefaultSocketPath
}
