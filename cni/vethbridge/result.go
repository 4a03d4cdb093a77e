package vethbridge

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"unicode"

	"github.com/containernetworking/cni/pkg/types"
	current "github.com/containernetworking/cni/pkg/types/100"

	"github.com/nodenet/nodenet/cni"
	"github.com/nodenet/nodenet/internal/netaddr"
)

// Indexes of the interfaces in the result Add returns.
const (
	hostIfaceIndex = 0
	podIfaceIndex  = 1
)

// ipv6MinMTU is the smallest MTU IPv6 works with (RFC 8200); below it the
// kernel drops the interface's IPv6 configuration.
const ipv6MinMTU = 1280

// validateRequest validates the arguments of Add and Check.
func validateRequest(nw *cni.NodeNetwork, pod *cni.Pod) error {
	if err := validateNetwork(nw); err != nil {
		return err
	}
	if pod == nil {
		return errors.New("no pod")
	}
	if err := validateAttachment(pod.Attachment); err != nil {
		return err
	}
	return validateAddresses(nw, pod)
}

// validateAttachment rejects an attachment whose names the kernel would
// refuse or whose alias would not fit.
func validateAttachment(a cni.Attachment) error {
	if a.ContainerID == "" {
		return errors.New("empty container ID")
	}
	if err := validateIfName(a.IfName); err != nil {
		return err
	}
	if n := len(linkAlias(a)); n > maxAliasLen {
		return fmt.Errorf("container ID %q is too long: the link alias would be %d bytes, the kernel allows %d", a.ContainerID, n, maxAliasLen)
	}
	return nil
}

// validateIfName applies the kernel's dev_valid_name rules.
func validateIfName(name string) error {
	switch {
	case name == "":
		return errors.New("empty interface name")
	case len(name) > 15:
		return fmt.Errorf("interface name %q is longer than 15 bytes", name)
	case name == "." || name == "..":
		return fmt.Errorf("invalid interface name %q", name)
	}
	for _, r := range name {
		if r == '/' || r == ':' || r == 0 || unicode.IsSpace(r) {
			return fmt.Errorf("interface name %q contains %q", name, r)
		}
	}
	return nil
}

// validateNetwork rejects a node network Add cannot wire into.
func validateNetwork(nw *cni.NodeNetwork) error {
	if nw == nil {
		return errors.New("no node network")
	}
	if nw.Name == "" {
		return errors.New("node network has no bridge name")
	}
	if len(nw.Gateways) != len(nw.PodCIDRs) {
		return fmt.Errorf("node network %s has %d pod CIDRs but %d gateways", nw.Name, len(nw.PodCIDRs), len(nw.Gateways))
	}
	if nw.MTU < 0 {
		return fmt.Errorf("node network %s has a negative MTU %d", nw.Name, nw.MTU)
	}
	return nil
}

// validateAddresses rejects pod addresses the kernel or ConfigureIface
// would refuse: each needs a gateway of its family inside its prefix.
func validateAddresses(nw *cni.NodeNetwork, pod *cni.Pod) error {
	if len(pod.Addresses) == 0 {
		return fmt.Errorf("pod %s has no addresses", pod.ContainerID)
	}
	seen := map[netip.Addr]bool{}
	for _, a := range pod.Addresses {
		ip := a.IP.Addr()
		switch {
		case !a.IP.IsValid() || ip.Zone() != "":
			return fmt.Errorf("pod %s has an invalid address %v", pod.ContainerID, a.IP)
		case seen[ip]:
			return fmt.Errorf("pod %s has address %s twice", pod.ContainerID, ip)
		case !a.Gateway.IsValid():
			return fmt.Errorf("pod address %s has no gateway", a.IP)
		case a.Gateway.Is4() != ip.Is4():
			return fmt.Errorf("pod address %s has gateway %s of another IP family", a.IP, a.Gateway)
		case !a.IP.Masked().Contains(a.Gateway):
			return fmt.Errorf("gateway %s is outside pod address %s's prefix", a.Gateway, a.IP)
		case a.Gateway == ip:
			return fmt.Errorf("pod address %s is its own gateway", a.IP)
		case ip.Is6() && nw.MTU != 0 && nw.MTU < ipv6MinMTU:
			return fmt.Errorf("pod address %s is IPv6 but node network %s's MTU %d is below IPv6's minimum %d", a.IP, nw.Name, nw.MTU, ipv6MinMTU)
		}
		seen[ip] = true
	}
	return nil
}

// defaultGateways are the gateways of the pod's default routes: the first
// address's gateway of each family, primary family first.
func defaultGateways(pod *cni.Pod) []netip.Addr {
	var gws []netip.Addr
	var have4, have6 bool
	for _, a := range pod.Addresses {
		if a.IP.Addr().Is4() && !have4 {
			have4 = true
			gws = append(gws, a.Gateway)
		}
		if !a.IP.Addr().Is4() && !have6 {
			have6 = true
			gws = append(gws, a.Gateway)
		}
	}
	return gws
}

// buildResult is the CNI result of a pod's wiring: interfaces [host veth,
// pod interface], the pod's addresses on the pod interface, one default
// route per family, and the pod's DNS (the node network's when the runtime
// sent none).
func buildResult(nw *cni.NodeNetwork, pod *cni.Pod, hostMAC, podMAC string) *current.Result {
	res := &current.Result{
		CNIVersion: current.ImplementedSpecVersion,
		Interfaces: []*current.Interface{
			hostIfaceIndex: {Name: HostVethName(pod.Attachment), Mac: hostMAC},
			podIfaceIndex:  {Name: pod.IfName, Mac: podMAC, Sandbox: pod.Netns},
		},
	}
	for _, a := range pod.Addresses {
		res.IPs = append(res.IPs, &current.IPConfig{
			Interface: current.Int(podIfaceIndex),
			Address:   *netaddr.IPNet(a.IP),
			Gateway:   net.IP(a.Gateway.AsSlice()),
		})
	}
	for _, gw := range defaultGateways(pod) {
		res.Routes = append(res.Routes, &types.Route{Dst: defaultDst(gw), GW: net.IP(gw.AsSlice())})
	}
	dns := pod.DNS
	if dns.IsEmpty() {
		dns = nw.DNS
	}
	res.DNS = types.DNS{
		Nameservers: dns.Nameservers,
		Domain:      dns.Domain,
		Search:      dns.Search,
		Options:     dns.Options,
	}
	return res
}

// defaultDst is the default route's destination in gw's family.
func defaultDst(gw netip.Addr) net.IPNet {
	if gw.Is4() {
		return net.IPNet{IP: net.IPv4zero.To4(), Mask: net.CIDRMask(0, 32)}
	}
	return net.IPNet{IP: net.IPv6zero, Mask: net.CIDRMask(0, 128)}
}

// prevDrift compares the result of the earlier ADD with what the pod's
// wiring must be; each string describes one difference. Interfaces' MACs
// are compared by the caller against the links.
func prevDrift(pod *cni.Pod, prev *current.Result) []string {
	if prev == nil {
		return nil
	}
	var drift []string
	want := map[netip.Prefix]netip.Addr{}
	for _, a := range pod.Addresses {
		want[a.IP] = a.Gateway
	}
	got := map[netip.Prefix]bool{}
	for _, ipc := range prev.IPs {
		p, ok := netaddr.FromIPNet(&ipc.Address)
		if !ok {
			drift = append(drift, fmt.Sprintf("prevResult has an invalid address %v", ipc.Address.String()))
			continue
		}
		got[p] = true
		gw, allocated := want[p]
		switch {
		case !allocated:
			drift = append(drift, fmt.Sprintf("prevResult address %s is not the pod's", p))
		case ipc.Gateway != nil && !net.IP(gw.AsSlice()).Equal(ipc.Gateway):
			drift = append(drift, fmt.Sprintf("prevResult gateway %s of address %s differs from the pod's %s", ipc.Gateway, p, gw))
		}
	}
	for _, a := range pod.Addresses {
		if !got[a.IP] {
			drift = append(drift, fmt.Sprintf("pod address %s is missing from prevResult", a.IP))
		}
	}
	if pi := prevPodIface(pod, prev); pi != nil && pi.Sandbox != pod.Netns {
		drift = append(drift, fmt.Sprintf("prevResult puts interface %s in netns %q, not %q", pod.IfName, pi.Sandbox, pod.Netns))
	}
	return drift
}

// prevPodIface is the pod interface in prev (by name, in a sandbox).
func prevPodIface(pod *cni.Pod, prev *current.Result) *current.Interface {
	if prev == nil {
		return nil
	}
	for _, i := range prev.Interfaces {
		if i != nil && i.Name == pod.IfName && i.Sandbox != "" {
			return i
		}
	}
	return nil
}

// prevHostIface is the host veth in prev (by name, outside any sandbox).
func prevHostIface(pod *cni.Pod, prev *current.Result) *current.Interface {
	if prev == nil {
		return nil
	}
	name := HostVethName(pod.Attachment)
	for _, i := range prev.Interfaces {
		if i != nil && i.Name == name && i.Sandbox == "" {
			return i
		}
	}
	return nil
}

// driftError joins the differences into one error naming the attachment.
func driftError(pod *cni.Pod, drift []string) error {
	if len(drift) == 0 {
		return nil
	}
	return fmt.Errorf("container %s interface %s: %s", pod.ContainerID, pod.IfName, strings.Join(drift, "; "))
}
