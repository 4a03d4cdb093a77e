package config

import (
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strconv"

	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

func (v *validator) validateProxy() {
	p := &v.cfg.Proxy
	path := field.NewPath("proxy")
	v.validateDSR(path.Child("enableDSR"))
	v.validateDetectLocal(path.Child("detectLocal"), &p.DetectLocal)
	v.validateNodePortAddresses(path.Child("nodePortAddresses"), p.NodePortAddresses)
	v.validateBindAddress(path.Child("healthzBindAddress"), p.HealthzBindAddress)
	v.validateBindAddress(path.Child("metricsBindAddress"), p.MetricsBindAddress)
}

// validateDSR applies KEP-5100's rules: DSR is an HNS feature, gated by
// WinDSR, and only usable where the host supports it.
func (v *validator) validateDSR(path *field.Path) {
	if !v.cfg.Proxy.EnableDSR {
		return
	}
	if v.target != OSWindows {
		v.err(field.Forbidden(path, "the Linux dataplane has no DSR; set enableDSR only in Windows nodes' config"))
	}
	if !v.cfg.FeatureEnabled(FeatureWinDSR) {
		v.err(field.Forbidden(path, "DSR needs WinDSR, and featureGates.WinDSR is false"))
	}
	if v.caps.Known && !v.caps.DSR {
		v.err(field.Forbidden(path, "this host's HNS does not support DSR"))
	}
}

func (v *validator) validateDetectLocal(path *field.Path, d *DetectLocalConfiguration) {
	modes := []DetectLocalMode{DetectLocalClusterCIDR, DetectLocalNodeCIDR}
	if !slices.Contains(modes, d.Mode) {
		v.err(field.NotSupported(path.Child("mode"), d.Mode, modes))
	}
	cidrsPath := path.Child("clusterCIDRs")
	if d.Mode == DetectLocalClusterCIDR && len(d.ClusterCIDRs) == 0 && len(v.cfg.ClusterCIDRs) > 0 {
		v.err(field.Required(cidrsPath, "mode ClusterCIDR needs the CIDRs that pod traffic comes from"))
	}
	if !slices.Equal(d.ClusterCIDRs, v.cfg.ClusterCIDRs) { // else reported at clusterCIDRs
		v.optionalCIDRList(cidrsPath, d.ClusterCIDRs)
	}
}

func (v *validator) validateNodePortAddresses(path *field.Path, addrs []string) {
	seen := map[string]bool{}
	for i, s := range addrs {
		p := path.Index(i)
		if seen[s] {
			v.err(field.Duplicate(p, s))
			continue
		}
		seen[s] = true
		if s == NodePortAddressPrimary {
			continue
		}
		if _, err := netip.ParsePrefix(s); err != nil {
			v.err(field.Invalid(p, s, fmt.Sprintf("must be %q or a CIDR", NodePortAddressPrimary)))
			continue
		}
		v.errList(validation.IsValidCIDR(p, s))
	}
}

// validateBindAddress checks an IP:port listen address; port 0 means the
// server is off.
func (v *validator) validateBindAddress(path *field.Path, addr string) {
	if addr == "" {
		v.err(field.Required(path, "an IP:port; port 0 disables the server"))
		return
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		v.err(field.Invalid(path, addr, "must be IP:port, e.g. 0.0.0.0:10256 or [::]:10256"))
		return
	}
	if errs := validation.IsValidIP(path, host); len(errs) > 0 {
		v.err(field.Invalid(path, addr, fmt.Sprintf("host %q must be an IP address", host)))
	}
	n, err := strconv.Atoi(port)
	if err != nil || n < 0 || n > 65535 {
		v.err(field.Invalid(path, addr, fmt.Sprintf("port %q must be 0..65535 (0 disables the server)", port)))
	}
}
