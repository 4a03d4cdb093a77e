package config

import (
	"encoding/json"
	"fmt"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Import of flannel's net-conf.json. flannel reads it with encoding/json,
// so names match case-insensitively (Windows configs write "type" and
// "name"); this importer does the same, but reports names flannel doesn't
// have. Warnings and unknown-field errors use flannel's field names.
//
// The vxlan backend becomes overlay mode, host-gw becomes l2bridge; any
// other backend is an error. VXLAN settings the file leaves out get
// flannel's own defaults for the target OS, because nodes being migrated
// must keep talking to nodes still running flannel: VNI 1 and UDP 8472
// (the kernel's default) on Linux, VNI 4096 and UDP 4789 on Windows. A
// cluster with Windows nodes therefore needs VNI >= 4096 written in the
// file, as flannel's Windows manifests do.

// flannelNetConf is the part of flannel's subnet.Config that matters here.
type flannelNetConf struct {
	EnableIPv4     *bool
	EnableIPv6     bool
	EnableNFTables bool
	Network        string
	IPv6Network    string
	Networks       []string
	IPv6Networks   []string
	SubnetMin      string
	SubnetMax      string
	IPv6SubnetMin  string
	IPv6SubnetMax  string
	SubnetLen      uint
	IPv6SubnetLen  uint
	Backend        json.RawMessage
}

// flannelBackend is the union of the vxlan and host-gw backend settings on
// Linux and Windows.
type flannelBackend struct {
	Type          string
	Name          string
	VNI           *int32
	Port          *int32
	MTU           int32
	GBP           bool
	Learning      bool
	DirectRouting bool
	MacPrefix     string
	DNSServerList string
}

func flannelNetConfFields() []string {
	return []string{"EnableIPv4", "EnableIPv6", "EnableNFTables", "Network", "IPv6Network", "Networks",
		"IPv6Networks", "SubnetMin", "SubnetMax", "IPv6SubnetMin", "IPv6SubnetMax", "SubnetLen", "IPv6SubnetLen", "Backend"}
}

func flannelBackendFields() []string {
	return []string{"Type", "Name", "VNI", "Port", "MTU", "GBP", "Learning", "DirectRouting", "MacPrefix", "DNSServerList"}
}

// flannel's own defaults.
const (
	flannelLinuxVNI       = 1
	flannelLinuxVXLANPort = 8472 // the kernel's default VXLAN port
	flannelWindowsVNI     = 4096
	flannelWindowsPort    = 4789
	flannelHostGWName     = "cbr0"
	flannelDefaultBackend = "udp"
)

func convertFlannel(j []byte, target OS) (*AgentConfiguration, Warnings, field.ErrorList, error) {
	var nc flannelNetConf
	strictErrs, err := decodeCaseInsensitive(j, &nc, nil, flannelNetConfFields())
	if err != nil {
		return nil, nil, nil, fmt.Errorf("decoding %s: %w", FormatFlannel, err)
	}
	backend := flannelBackend{Type: flannelDefaultBackend}
	hasBackend := len(nc.Backend) > 0 && string(nc.Backend) != "null"
	if hasBackend {
		backend.Type = ""
		errs, err := decodeCaseInsensitive(nc.Backend, &backend, field.NewPath("Backend"), flannelBackendFields())
		if err != nil {
			return nil, nil, nil, fmt.Errorf("decoding %s Backend: %w", FormatFlannel, err)
		}
		strictErrs = append(strictErrs, errs...)
	}
	cfg := &AgentConfiguration{TypeMeta: metav1.TypeMeta{APIVersion: APIVersion, Kind: Kind}}
	var w Warnings
	flannelNetworks(&nc, cfg, &w)
	switch backend.Type {
	case "vxlan":
		flannelVXLAN(&backend, cfg, target, &w)
	case "host-gw":
		flannelHostGW(&backend, cfg, target, &w)
	default:
		how := ""
		if !hasBackend {
			how = " (flannel's default when Backend is absent)"
		}
		return nil, w, nil, fmt.Errorf("%s: Backend.Type %q%s is not supported; supported: vxlan, host-gw", FormatFlannel, backend.Type, how)
	}
	return cfg, w, strictErrs, nil
}

// decodeCaseInsensitive decodes a JSON object the way flannel does
// (encoding/json: case-insensitive names) and returns names outside known,
// and names given twice in different cases, as field errors under path.
func decodeCaseInsensitive(j []byte, into any, path *field.Path, known []string) (field.ErrorList, error) {
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(j, &raw); err != nil {
		return nil, err
	}
	var errs field.ErrorList
	seen := map[string]string{}
	for _, key := range sortedKeys(raw) {
		p := childPath(path, key)
		canonical := ""
		for _, k := range known {
			if strings.EqualFold(k, key) {
				canonical = k
			}
		}
		switch first, dup := seen[canonical]; {
		case canonical == "":
			errs = append(errs, field.Forbidden(p, "unknown field"))
		case dup:
			errs = append(errs, field.Forbidden(p, fmt.Sprintf("duplicate of %q (names match case-insensitively)", first)))
		default:
			seen[canonical] = key
		}
	}
	if err := json.Unmarshal(j, into); err != nil {
		return nil, err
	}
	return errs, nil
}

func childPath(path *field.Path, name string) *field.Path {
	if path == nil {
		return field.NewPath(name)
	}
	return path.Child(name)
}

func flannelNetworks(nc *flannelNetConf, cfg *AgentConfiguration, w *Warnings) {
	if nc.EnableIPv4 == nil || *nc.EnableIPv4 { // flannel enables IPv4 by default
		cfg.ClusterCIDRs = append(cfg.ClusterCIDRs, nc.Network)
	}
	if nc.EnableIPv6 {
		cfg.ClusterCIDRs = append(cfg.ClusterCIDRs, nc.IPv6Network)
		if len(cfg.ClusterCIDRs) > 1 {
			cfg.IPFamilyPolicy = IPFamilyPolicyPreferDualStack
		}
	}
	dropped := func(set bool, name, why string) {
		if set {
			w.add(field.NewPath(name), "not carried over: %s", why)
		}
	}
	const fromNode = "pod CIDRs come from Node.spec.podCIDRs (kube-controller-manager --node-cidr-mask-size)"
	dropped(len(nc.Networks) > 0, "Networks", "multiple cluster networks are not supported; Network is used")
	dropped(len(nc.IPv6Networks) > 0, "IPv6Networks", "multiple cluster networks are not supported; IPv6Network is used")
	dropped(nc.SubnetLen != 0, "SubnetLen", fromNode)
	dropped(nc.IPv6SubnetLen != 0, "IPv6SubnetLen", fromNode)
	dropped(nc.SubnetMin != "" || nc.SubnetMax != "", "SubnetMin", fromNode)
	dropped(nc.IPv6SubnetMin != "" || nc.IPv6SubnetMax != "", "IPv6SubnetMin", fromNode)
	dropped(nc.EnableNFTables, "EnableNFTables", "nodenet always uses nftables on Linux")
	dropped(nc.IPv6Network != "" && !nc.EnableIPv6, "IPv6Network", "EnableIPv6 is false")
}

func flannelVXLAN(b *flannelBackend, cfg *AgentConfiguration, target OS, w *Warnings) {
	path := field.NewPath("Backend")
	cfg.Network.Mode = NetworkModeOverlay
	vxlan := &VXLANConfiguration{}
	defVNI, defPort := int32(flannelLinuxVNI), int32(flannelLinuxVXLANPort)
	if target == OSWindows {
		defVNI, defPort = flannelWindowsVNI, flannelWindowsPort
	}
	if b.VNI != nil {
		vxlan.VNI = *b.VNI
	} else {
		vxlan.VNI = defVNI
		w.add(path.Child("VNI"), "not set: carried over as flannel's %s default %d so nodes still running flannel can reach this one", target, defVNI)
	}
	if b.Port != nil {
		vxlan.Port = *b.Port
	} else {
		vxlan.Port = defPort
		w.add(path.Child("Port"), "not set: carried over as flannel's %s default %d so nodes still running flannel can reach this one", target, defPort)
	}
	cfg.Network.VXLAN = vxlan
	cfg.Network.MTU = b.MTU
	cfg.Network.Name = b.Name
	if b.Name == "" && target == OSWindows {
		cfg.Network.Name = fmt.Sprintf("flannel.%d", vxlan.VNI)
		w.add(path.Child("Name"), "not set: flannel on Windows names the HNS network %q; carried over so nodenet finds flannel's network", cfg.Network.Name)
	}
	notSupported := func(set bool, name string) {
		if set {
			w.add(path.Child(name), "not carried over: nodenet's overlay does not support it")
		}
	}
	notSupported(b.GBP, "GBP")
	notSupported(b.Learning, "Learning")
	notSupported(b.DirectRouting, "DirectRouting")
	notSupported(b.MacPrefix != "", "MacPrefix")
	if b.DNSServerList != "" {
		w.add(path.Child("DNSServerList"), "ignored: not a vxlan setting")
	}
}

func flannelHostGW(b *flannelBackend, cfg *AgentConfiguration, target OS, w *Warnings) {
	path := field.NewPath("Backend")
	cfg.Network.Mode = NetworkModeL2Bridge
	cfg.Network.Name = b.Name
	if b.Name == "" && target == OSWindows {
		cfg.Network.Name = flannelHostGWName
		w.add(path.Child("Name"), "not set: flannel on Windows names the HNS network %q; carried over so nodenet finds flannel's network", flannelHostGWName)
	}
	if b.DNSServerList != "" {
		w.add(path.Child("DNSServerList"), "not carried over: pods get DNS servers from kubelet")
	}
	ignored := func(set bool, name string) {
		if set {
			w.add(path.Child(name), "ignored: not a host-gw setting")
		}
	}
	ignored(b.VNI != nil, "VNI")
	ignored(b.Port != nil, "Port")
	ignored(b.MTU != 0, "MTU")
	ignored(b.GBP, "GBP")
	ignored(b.Learning, "Learning")
	ignored(b.DirectRouting, "DirectRouting")
	ignored(b.MacPrefix != "", "MacPrefix")
}
