package cni

import (
	"encoding/json"
	"fmt"
	"net/netip"
	"strings"

	"github.com/containernetworking/cni/pkg/types"
	current "github.com/containernetworking/cni/pkg/types/100"
	"github.com/containernetworking/cni/pkg/utils"
	"github.com/containernetworking/cni/pkg/version"

	"github.com/nodenet/nodenet/cni/api"
)

// PluginType is the "type" of nodenet's entry in the conflist: the plugin
// binary's name.
const PluginType = "nodenet-cni"

// NetConf is nodenet-cni's entry in the conflist, as the runtime sends it
// (with runtimeConfig filled from the capabilities and, for CHECK and DEL,
// prevResult).
type NetConf struct {
	types.PluginConf
	// SocketPath is where the agent's CNI server listens; the agent renders
	// it from its config so the two can't disagree.
	SocketPath string `json:"socketPath,omitempty"`
	// RuntimeConfig carries the capabilities the conflist declares.
	RuntimeConfig RuntimeConfig `json:"runtimeConfig,omitempty"`
}

// RuntimeConfig is what the runtime fills in for the declared
// capabilities: portMappings (hostPort) and dns.
type RuntimeConfig struct {
	PortMappings []RuntimePortMapping `json:"portMappings,omitempty"`
	DNS          *RuntimeDNS          `json:"dns,omitempty"`
}

// RuntimePortMapping is one portMappings entry, spelled as the CNI
// conventions document it.
type RuntimePortMapping struct {
	HostPort      int    `json:"hostPort"`
	ContainerPort int    `json:"containerPort"`
	Protocol      string `json:"protocol,omitempty"`
	HostIP        string `json:"hostIP,omitempty"`
}

// RuntimeDNS is the dns capability's value.
type RuntimeDNS struct {
	Servers  []string `json:"servers,omitempty"`
	Searches []string `json:"searches,omitempty"`
	Options  []string `json:"options,omitempty"`
}

// podArgs are the CNI_ARGS keys kubelet and containerd send.
type podArgs struct {
	types.CommonArgs
	K8S_POD_NAMESPACE          types.UnmarshallableString //nolint:revive // CNI_ARGS key.
	K8S_POD_NAME               types.UnmarshallableString //nolint:revive // CNI_ARGS key.
	K8S_POD_INFRA_CONTAINER_ID types.UnmarshallableString //nolint:revive // CNI_ARGS key.
	K8S_POD_UID                types.UnmarshallableString //nolint:revive // CNI_ARGS key.
}

// ParseNetConf decodes and checks a network config: valid JSON, a
// supported cniVersion, a name, and (when present) a prevResult the
// library can read. Errors are CNI errors with the spec's codes.
func ParseNetConf(data []byte) (*NetConf, *types.Error) {
	if len(data) == 0 {
		return nil, api.Errorf(types.ErrDecodingFailure, "empty network config on stdin")
	}
	conf := &NetConf{}
	if err := json.Unmarshal(data, conf); err != nil {
		return nil, api.Errorf(types.ErrDecodingFailure, "network config is not valid JSON: %v", err)
	}
	if conf.CNIVersion == "" {
		return nil, api.Errorf(types.ErrIncompatibleCNIVersion, "network config has no cniVersion; nodenet-cni supports %s", strings.Join(api.SupportedVersions.SupportedVersions(), ", "))
	}
	if err := (&version.Reconciler{}).Check(conf.CNIVersion, api.SupportedVersions); err != nil {
		return nil, api.Errorf(types.ErrIncompatibleCNIVersion, "cniVersion %q is not supported; nodenet-cni supports %s", conf.CNIVersion, strings.Join(api.SupportedVersions.SupportedVersions(), ", "))
	}
	if conf.Name == "" {
		return nil, api.Errorf(types.ErrInvalidNetworkConfig, "network config has no name")
	}
	if conf.RawPrevResult != nil {
		if err := version.ParsePrevResult(&conf.PluginConf); err != nil {
			return nil, api.Errorf(types.ErrDecodingFailure, "prevResult: %v", err)
		}
	}
	for i, pm := range conf.RuntimeConfig.PortMappings {
		if err := checkPortMapping(pm); err != nil {
			return nil, api.Errorf(types.ErrInvalidNetworkConfig, "runtimeConfig.portMappings[%d]: %v", i, err)
		}
	}
	return conf, nil
}

func checkPortMapping(pm RuntimePortMapping) error {
	if pm.HostPort < 1 || pm.HostPort > 65535 {
		return fmt.Errorf("hostPort %d is not in 1-65535", pm.HostPort)
	}
	if pm.ContainerPort < 1 || pm.ContainerPort > 65535 {
		return fmt.Errorf("containerPort %d is not in 1-65535", pm.ContainerPort)
	}
	switch strings.ToLower(pm.Protocol) {
	case "", "tcp", "udp", "sctp":
	default:
		return fmt.Errorf("protocol %q is not tcp, udp or sctp", pm.Protocol)
	}
	if pm.HostIP != "" {
		if _, err := netip.ParseAddr(pm.HostIP); err != nil {
			return fmt.Errorf("hostIP %q is not an IP address", pm.HostIP)
		}
	}
	return nil
}

// checkRequest validates the CNI_* parameters the command needs, the way
// skel does in the plugin: the server can't trust that every caller of
// its socket went through skel.
func checkRequest(req *api.Request) *types.Error {
	switch req.Command {
	case api.CommandAdd, api.CommandCheck, api.CommandDel:
	case api.CommandGC, api.CommandStatus:
		return nil
	case "":
		return api.Errorf(types.ErrInvalidEnvironmentVariables, "CNI_COMMAND is missing")
	default:
		return api.Errorf(types.ErrInvalidEnvironmentVariables, "unknown CNI_COMMAND %q", req.Command)
	}
	if req.ContainerID == "" {
		return api.Errorf(types.ErrInvalidEnvironmentVariables, "CNI_CONTAINERID is missing")
	}
	if err := utils.ValidateContainerID(req.ContainerID); err != nil {
		return err
	}
	if req.IfName == "" {
		return api.Errorf(types.ErrInvalidEnvironmentVariables, "CNI_IFNAME is missing")
	}
	if err := utils.ValidateInterfaceName(req.IfName); err != nil {
		return err
	}
	if req.Netns == "" && req.Command != api.CommandDel {
		return api.Errorf(types.ErrInvalidEnvironmentVariables, "CNI_NETNS is missing: %s needs the pod's network namespace", req.Command)
	}
	return nil
}

// podFromRequest builds the wiring's view of the pod.
func podFromRequest(req *api.Request, conf *NetConf) (*Pod, *types.Error) {
	pod := &Pod{
		Attachment: Attachment{ContainerID: req.ContainerID, IfName: req.IfName},
		Netns:      req.Netns,
	}
	if req.Args != "" {
		var args podArgs
		args.IgnoreUnknown = true
		if err := types.LoadArgs(req.Args, &args); err != nil {
			return nil, api.Errorf(types.ErrInvalidEnvironmentVariables, "CNI_ARGS: %v", err)
		}
		pod.Namespace = string(args.K8S_POD_NAMESPACE)
		pod.Name = string(args.K8S_POD_NAME)
		pod.UID = string(args.K8S_POD_UID)
	}
	for _, pm := range conf.RuntimeConfig.PortMappings {
		proto := strings.ToLower(pm.Protocol)
		if proto == "" {
			proto = "tcp"
		}
		pod.PortMappings = append(pod.PortMappings, PortMapping{
			HostPort: pm.HostPort, ContainerPort: pm.ContainerPort, Protocol: proto, HostIP: pm.HostIP,
		})
	}
	if d := conf.RuntimeConfig.DNS; d != nil {
		pod.DNS = DNS{Nameservers: d.Servers, Search: d.Searches, Options: d.Options}
	}
	return pod, nil
}

// prevResult returns CHECK's prevResult in the current version.
func prevResult(conf *NetConf) (*current.Result, error) {
	if conf.PrevResult == nil {
		return nil, nil
	}
	return current.NewResultFromResult(conf.PrevResult)
}
