package config

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation/field"
	kjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"
)

// Format is a config file format Load reads.
type Format string

// Supported formats.
const (
	// FormatAgentConfiguration is this package's own: apiVersion
	// nodenet.io/v1alpha1, kind AgentConfiguration.
	FormatAgentConfiguration Format = "AgentConfiguration"
	// FormatKubeProxy is kube-proxy's config file: apiVersion
	// kubeproxy.config.k8s.io/v1alpha1, kind KubeProxyConfiguration.
	FormatKubeProxy Format = "KubeProxyConfiguration"
	// FormatFlannel is flannel's net-conf.json: a JSON object with a
	// "Network" string and no apiVersion.
	FormatFlannel Format = "flannel net-conf.json"
)

// Identity of kube-proxy's published config (k8s.io/kube-proxy/config/v1alpha1).
const (
	kubeProxyAPIVersion = "kubeproxy.config.k8s.io/v1alpha1"
	kubeProxyKind       = "KubeProxyConfiguration"
)

// LoadOptions are the inputs of Load.
type LoadOptions struct {
	// OS is the node platform the config is for: OSLinux or OSWindows;
	// empty means HostOS(). It picks per-OS defaults and rules, so a Linux
	// machine can load a Windows node's config.
	OS OS
	// Shared loads a config many nodes will read; see
	// DefaultingOptions.Shared.
	Shared bool
	// Getenv reads an environment variable; nil means os.Getenv.
	Getenv func(key string) string
	// Hostname returns this machine's name; nil means os.Hostname.
	Hostname func() (string, error)
	// Capabilities of the host, when probed; see Capabilities.
	Capabilities Capabilities
}

// Load reads a config in any supported Format (detected from its content),
// converts it to an AgentConfiguration, sets defaults and validates it.
//
// Decoding is strict: YAML duplicate keys and undecodable values are
// errors, and so are fields the format doesn't have (matched
// case-sensitively, except in flannel files, which flannel itself reads
// case-insensitively).
//
// The config is nil only when data can't be decoded at all. Otherwise it is
// returned defaulted, and when it has problems, unknown fields included,
// err is an *InvalidError listing every one with its field path (see
// FieldErrors); the config then holds what was recognized. Whether to run
// with such a config is the caller's decision: nodenet-agent exits when
// ConfigHardFail is true and logs the errors otherwise. Warnings, from
// conversion and validation, come in either case.
func Load(data []byte, opts LoadOptions) (*AgentConfiguration, Warnings, error) {
	target := opts.OS.orHost()
	if !target.supported() {
		return nil, nil, fmt.Errorf("unsupported target OS %q: want %q or %q", opts.OS, OSLinux, OSWindows)
	}
	doc, err := parseDocument(data)
	if err != nil {
		return nil, nil, err
	}
	cfg, warnings, strictErrs, err := doc.decode(target)
	if err != nil {
		return nil, warnings, err
	}
	SetDefaults(cfg, DefaultingOptions{OS: target, Shared: opts.Shared, Getenv: opts.Getenv, Hostname: opts.Hostname})
	errs, more := Validate(cfg, ValidationOptions{OS: target, Shared: opts.Shared, Capabilities: opts.Capabilities})
	warnings = append(warnings, more...)
	if all := append(strictErrs, errs...); len(all) > 0 {
		return cfg, warnings, &InvalidError{Errors: all}
	}
	return cfg, warnings, nil
}

// LoadFile is Load on the contents of the file at path; errors name the
// file.
func LoadFile(path string, opts LoadOptions) (*AgentConfiguration, Warnings, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, nil, fmt.Errorf("reading config: %w", err)
	}
	cfg, warnings, err := Load(data, opts)
	if err != nil {
		return cfg, warnings, fmt.Errorf("%s: %w", path, err)
	}
	return cfg, warnings, nil
}

// DetectFormat tells which supported format data is in, or why it is none.
func DetectFormat(data []byte) (Format, error) {
	doc, err := parseDocument(data)
	return doc.format, err
}

// document is a config converted to JSON, with its detected format.
type document struct {
	format Format
	json   []byte
}

func parseDocument(data []byte) (document, error) {
	if len(bytes.TrimSpace(data)) == 0 {
		return document{}, errors.New("empty config")
	}
	// Strict YAML parsing rejects duplicate keys; JSON is YAML too.
	j, err := yaml.YAMLToJSONStrict(data)
	if err != nil {
		return document{}, fmt.Errorf("parsing config: %w", err)
	}
	var top map[string]json.RawMessage
	if err := json.Unmarshal(j, &top); err != nil || top == nil {
		return document{}, errors.New("parsing config: not a YAML or JSON object")
	}
	format, err := detect(top)
	return document{format: format, json: j}, err
}

func detect(top map[string]json.RawMessage) (Format, error) {
	apiVersion, err := stringField(top, "apiVersion")
	if err != nil {
		return "", err
	}
	kind, err := stringField(top, "kind")
	if err != nil {
		return "", err
	}
	switch {
	case apiVersion == APIVersion && kind == Kind:
		return FormatAgentConfiguration, nil
	case apiVersion == kubeProxyAPIVersion && kind == kubeProxyKind:
		return FormatKubeProxy, nil
	case apiVersion == "" && kind == "" && isFlannelNetConf(top):
		return FormatFlannel, nil
	}
	return "", unsupportedFormatError(apiVersion, kind)
}

func unsupportedFormatError(apiVersion, kind string) error {
	supported := fmt.Sprintf("supported: apiVersion %s kind %s, apiVersion %s kind %s, or a flannel net-conf.json (a JSON object with a \"Network\" string and no apiVersion)",
		APIVersion, Kind, kubeProxyAPIVersion, kubeProxyKind)
	switch {
	case apiVersion == "" && kind == "":
		return fmt.Errorf("config has no apiVersion and kind; %s", supported)
	case kind == "ConfigMap":
		return fmt.Errorf("config is a ConfigMap: pass the file held in its data (config.conf, net-conf.json or the nodenet config); %s", supported)
	}
	return fmt.Errorf("unsupported config apiVersion %q kind %q; %s", apiVersion, kind, supported)
}

// stringField reads an optional top-level string.
func stringField(top map[string]json.RawMessage, name string) (string, error) {
	raw, ok := top[name]
	if !ok {
		return "", nil
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return "", fmt.Errorf("%s must be a string", name)
	}
	return s, nil
}

// isFlannelNetConf reports whether the object has flannel's "Network"
// string (matched case-insensitively, as flannel does; an
// AgentConfiguration's network is an object, not a string).
func isFlannelNetConf(top map[string]json.RawMessage) bool {
	for key, raw := range top {
		var s string
		if strings.EqualFold(key, "Network") && json.Unmarshal(raw, &s) == nil {
			return true
		}
	}
	return false
}

// decode turns the document into an AgentConfiguration, not yet defaulted.
// strictErrs are the fields the format doesn't have.
func (d document) decode(target OS) (cfg *AgentConfiguration, warnings Warnings, strictErrs field.ErrorList, err error) {
	switch d.format {
	case FormatAgentConfiguration:
		cfg = &AgentConfiguration{}
		strictErrs, err = decodeStrict(d.json, cfg)
		if err != nil {
			return nil, nil, nil, fmt.Errorf("decoding %s: %w", Kind, err)
		}
		return cfg, nil, strictErrs, nil
	case FormatKubeProxy:
		return convertKubeProxy(d.json, target)
	case FormatFlannel:
		return convertFlannel(d.json, target)
	}
	return nil, nil, nil, fmt.Errorf("unsupported format %q", d.format)
}

// decodeStrict decodes JSON into a typed struct, case-sensitively, and
// returns the unknown and duplicate fields as field errors; the struct gets
// every field that is known.
func decodeStrict(j []byte, into any) (field.ErrorList, error) {
	strict, err := kjson.UnmarshalStrict(j, into)
	if err != nil {
		return nil, err
	}
	var errs field.ErrorList
	for _, e := range strict {
		errs = append(errs, strictFieldError(e))
	}
	return errs, nil
}

func strictFieldError(e error) *field.Error {
	var fe kjson.FieldError
	if !errors.As(e, &fe) {
		return field.Forbidden(field.NewPath("<root>"), e.Error())
	}
	path := field.NewPath(fe.FieldPath())
	if strings.HasPrefix(e.Error(), "unknown field") {
		return field.Forbidden(path, "unknown field (names are case-sensitive)")
	}
	return field.Forbidden(path, e.Error())
}
