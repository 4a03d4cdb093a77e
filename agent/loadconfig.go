package agent

import (
	"fmt"
	"path/filepath"
	"slices"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/nodenet/nodenet/config"
	"github.com/nodenet/nodenet/hns"
)

// LoadedConfig is a config as the agent loaded it for one dataplane.
type LoadedConfig struct {
	Config   *config.AgentConfiguration
	Warnings config.Warnings
	// Errors are the config's problems, each naming its field. With
	// configHardFail (the default) the agent refuses to start on any.
	Errors field.ErrorList
}

// Err returns the config's problems as one error naming every field, or
// nil.
func (l *LoadedConfig) Err() error {
	if len(l.Errors) == 0 {
		return nil
	}
	return &config.InvalidError{Errors: l.Errors}
}

// LoadConfig reads the config file for dataplane dp: an AgentConfiguration,
// KubeProxyConfiguration or flannel net-conf.json, defaulted and validated
// by the rules of the node dp stands for. An unreadable or undecodable file
// is an error; a decodable one with problems comes back with Errors set.
//
// With the simulator on a non-Windows host, the network and proxy follow
// Windows rules but the files (CNI socket, conflist, data) live on this
// host: paths that are not absolute here get this host's defaults and are
// checked by this host's rules.
func LoadConfig(path string, dp Dataplane, getenv func(string) string, hostname func() (string, error)) (*LoadedConfig, error) {
	cfg, warnings, err := config.LoadFile(path, config.LoadOptions{OS: dp.TargetOS(), Getenv: getenv, Hostname: hostname})
	errs := config.FieldErrors(err)
	if cfg == nil || (err != nil && errs == nil) {
		return nil, err
	}
	if dp.TargetOS() != config.HostOS() {
		errs = localizePaths(cfg, errs, getenv, hostname)
	}
	loaded := &LoadedConfig{Config: cfg, Warnings: warnings, Errors: errs}
	if dp == DataplaneSim {
		loaded.checkCapabilities(simulatorFeatures(cfg))
	}
	return loaded, nil
}

// localPathFields are the config fields that name files on the machine the
// agent runs on.
var localPathFields = []string{"cni.socketPath", "cni.confDir", "cni.binDir", "cni.dataDir"}

// localizePaths gives path fields that are not absolute on this host the
// host's defaults and replaces their errors by this host's rules.
func localizePaths(cfg *config.AgentConfiguration, errs field.ErrorList, getenv func(string) string, hostname func() (string, error)) field.ErrorList {
	host := &config.AgentConfiguration{}
	config.SetDefaults(host, config.DefaultingOptions{OS: config.HostOS(), Getenv: getenv, Hostname: hostname})
	for _, p := range []struct {
		have *string
		def  string
	}{
		{&cfg.CNI.SocketPath, host.CNI.SocketPath},
		{&cfg.CNI.ConfDir, host.CNI.ConfDir},
		{&cfg.CNI.BinDir, host.CNI.BinDir},
		{&cfg.CNI.DataDir, host.CNI.DataDir},
	} {
		if !filepath.IsAbs(*p.have) {
			*p.have = p.def
		}
	}
	var out field.ErrorList
	for _, e := range errs {
		if !slices.Contains(localPathFields, e.Field) {
			out = append(out, e)
		}
	}
	hostErrs, _ := config.Validate(cfg, config.ValidationOptions{OS: config.HostOS()})
	for _, e := range hostErrs {
		if slices.Contains(localPathFields, e.Field) {
			out = append(out, e)
		}
	}
	return out
}

// checkCapabilities adds the config problems a host with features f has:
// DSR on an HNS that lacks it.
func (l *LoadedConfig) checkCapabilities(f hns.Features, version hns.Version) {
	if l.Config.Proxy.EnableDSR && !f.DSR {
		l.Errors = append(l.Errors, field.Forbidden(field.NewPath("proxy", "enableDSR"),
			fmt.Sprintf("HNS %s does not support DSR", version)))
	}
}

// simulatorFeatures is what the simulator reports for the config's
// windows.hnsVersion (the simulator's default when unset or invalid; an
// invalid one is already a config error).
func simulatorFeatures(cfg *config.AgentConfiguration) (hns.Features, hns.Version) {
	v := hns.VersionDefault
	if parsed, err := hns.ParseVersion(cfg.Windows.HNSVersion); cfg.Windows.HNSVersion != "" && err == nil {
		v = parsed
	}
	return hns.FeaturesFor(v), v
}
