package config

// Address plan (every test in this file):
//   cluster CIDRs   10.244.0.0/16, fd00:10:244::/56
//   service CIDR    10.96.0.0/12 (never in a flannel config)

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

func TestFlannelFilesImport(t *testing.T) {
	// Imports carry no service CIDRs; otherwise they default like the
	// minimal config.
	overlay := func(name string, vxlan VXLANConfiguration, cni CNIConfiguration) *AgentConfiguration {
		c := wantDefaultConfig(cni)
		c.ServiceCIDRs = nil
		c.Network.Name = name
		c.Network.VXLAN = &vxlan
		return c
	}
	linuxCNI := wantLinuxCNI()
	windowsCNI := wantWindowsCNI()
	tests := []struct {
		name         string
		file         string
		os           OS
		want         *AgentConfiguration
		wantWarnings []string
	}{
		{
			name:         "a Linux vxlan config keeps flannel's Linux VNI and port so flannel nodes still connect",
			file:         "flannel-linux.json",
			os:           OSLinux,
			want:         overlay("nodenet", VXLANConfiguration{VNI: 1, Port: 8472}, linuxCNI),
			wantWarnings: []string{"Backend.VNI", "Backend.Port"},
		},
		{
			name:         "a Linux vxlan config read for Windows gets flannel's Windows defaults and network name",
			file:         "flannel-linux.json",
			os:           OSWindows,
			want:         overlay("flannel.4096", VXLANConfiguration{VNI: 4096, Port: 4789}, windowsCNI),
			wantWarnings: []string{"Backend.VNI", "Backend.Port", "Backend.Name"},
		},
		{
			name: "a Windows config with lowercase backend keys carries name, VNI and port",
			file: "flannel-windows.json",
			os:   OSWindows,
			want: overlay("vxlan0", VXLANConfiguration{VNI: 4096, Port: 4789}, windowsCNI),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			checkImport(t, tt.file, tt.os, tt.want, tt.wantWarnings)
		})
	}
}

func TestFlannelFieldMapping(t *testing.T) {
	tests := []struct {
		name         string
		json         string
		os           OS
		got          func(*AgentConfiguration) any
		want         any
		wantErrs     []fieldErr // nil: only serviceCIDRs is missing
		wantWarnings []string
	}{
		{
			name:         "host-gw on Windows becomes l2bridge on flannel's cbr0 network",
			json:         `{"Network": "10.244.0.0/16", "Backend": {"type": "host-gw"}}`,
			os:           OSWindows,
			got:          func(c *AgentConfiguration) any { return []any{c.Network.Mode, c.Network.Name, c.Network.VXLAN} },
			want:         []any{NetworkModeL2Bridge, "cbr0", (*VXLANConfiguration)(nil)},
			wantWarnings: []string{"Backend.Name"},
		},
		{
			name: "host-gw on Linux becomes l2bridge on the default network name",
			json: `{"Network": "10.244.0.0/16", "Backend": {"Type": "host-gw"}}`,
			os:   OSLinux,
			got:  func(c *AgentConfiguration) any { return []any{c.Network.Mode, c.Network.Name} },
			want: []any{NetworkModeL2Bridge, "nodenet"},
		},
		{
			name:         "EnableIPv6 adds the IPv6 network and asks for dual-stack",
			json:         `{"Network": "10.244.0.0/16", "EnableIPv6": true, "IPv6Network": "fd00:10:244::/56", "Backend": {"Type": "host-gw"}}`,
			os:           OSLinux,
			got:          func(c *AgentConfiguration) any { return []any{c.ClusterCIDRs, c.IPFamilyPolicy} },
			want:         []any{[]string{"10.244.0.0/16", "fd00:10:244::/56"}, IPFamilyPolicyPreferDualStack},
			wantWarnings: nil,
		},
		{
			name:         "an IPv6 network without EnableIPv6 is dropped with a warning",
			json:         `{"Network": "10.244.0.0/16", "IPv6Network": "fd00:10:244::/56", "Backend": {"Type": "vxlan", "VNI": 4096, "Port": 4789}}`,
			os:           OSLinux,
			got:          func(c *AgentConfiguration) any { return c.ClusterCIDRs },
			want:         []string{"10.244.0.0/16"},
			wantWarnings: []string{"IPv6Network"},
		},
		{
			name:         "vxlan MTU carries over and unsupported vxlan options are named",
			json:         `{"Network": "10.244.0.0/16", "SubnetLen": 25, "Backend": {"Type": "vxlan", "VNI": 4096, "Port": 4789, "MTU": 1400, "DirectRouting": true, "GBP": true}}`,
			os:           OSLinux,
			got:          func(c *AgentConfiguration) any { return c.Network.MTU },
			want:         int32(1400),
			wantWarnings: []string{"SubnetLen", "Backend.GBP", "Backend.DirectRouting"},
		},
		{
			name:     "a VNI of 1 written for Windows is a validation error",
			json:     `{"Network": "10.244.0.0/16", "Backend": {"type": "vxlan", "name": "vxlan0", "VNI": 1, "Port": 4789}}`,
			os:       OSWindows,
			got:      func(c *AgentConfiguration) any { return c.Network.VXLAN.VNI },
			want:     int32(1),
			wantErrs: []fieldErr{serviceCIDRsRequired, {field.ErrorTypeInvalid, "network.vxlan.vni"}},
		},
		{
			name: "unknown flannel fields are errors naming them",
			json: `{"Network": "10.244.0.0/16", "Netmask": 16, "Backend": {"Type": "vxlan", "VNI": 4096, "Port": 4789, "VNID": 4096}}`,
			os:   OSLinux,
			got:  func(c *AgentConfiguration) any { return c.Network.VXLAN.VNI },
			want: int32(4096),
			wantErrs: []fieldErr{
				{field.ErrorTypeForbidden, "Netmask"},
				{field.ErrorTypeForbidden, "Backend.VNID"},
				serviceCIDRsRequired,
			},
		},
		{
			name: "the same field in two cases is an error",
			json: `{"Network": "10.244.0.0/16", "network": "10.245.0.0/16", "Backend": {"Type": "host-gw"}}`,
			os:   OSLinux,
			got:  func(c *AgentConfiguration) any { return len(c.ClusterCIDRs) },
			want: 1,
			wantErrs: []fieldErr{
				{field.ErrorTypeForbidden, "network"},
				serviceCIDRsRequired,
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, errs, warnings := loadInvalid(t, []byte(tt.json), testOptions(tt.os))
			wantErrs := tt.wantErrs
			if wantErrs == nil {
				wantErrs = []fieldErr{serviceCIDRsRequired}
			}
			diffErrs(t, errs, wantErrs)
			diffWarnings(t, warnings, tt.wantWarnings)
			if diff := cmp.Diff(tt.want, tt.got(cfg)); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}
