// Package vethbridge is the Linux pod wiring (cni.Wiring): each pod
// interface is one end of a veth pair whose other end is a port of the node
// bridge that the overlay creates (cni.NodeNetwork.Name, holding the pods'
// gateways).
//
// What Add makes, per attachment (container ID + ifname):
//
//   - a veth pair made with the plugins library (ip.SetupVethWithName): the
//     pod end, named pod.IfName, in the pod's netns; the host end in the
//     node's netns, named HostVethName(attachment);
//   - on both ends the alias (IFLA_IFALIAS) "nodenet:<containerID>:<ifname>",
//     so that List can recover the attachments from the host links alone and
//     Del can recognize a pod-side interface as ours even when its host end
//     is gone;
//   - the host end up, a port of the bridge, in hairpin mode (a pod reaches
//     itself through a service VIP: the DNATed packet goes back out of the
//     port it came in on); learning stays on, the kernel default, as the
//     reference bridge plugin leaves it;
//   - the pod end: the pod's addresses, up, a default route per family via
//     that family's gateway (ipam.ConfigureIface);
//   - MTU nw.MTU on both ends; 0 leaves the kernel's veth default (1500).
//
// Sysctls (the reference bridge plugin's defaults, and why):
//
//   - pod net.ipv6.conf.<if>.accept_dad=0 when the pod has an IPv6 address:
//     the address is unique by construction (our IPAM hands it out), and DAD
//     would leave it tentative (unusable) for about a second after ADD;
//     ConfigureIface waits for tentative addresses to settle, which is then
//     immediate.
//   - pod net.ipv4.conf.<if>.arp_notify=1 when the pod has an IPv4 address:
//     the kernel sends a gratuitous ARP when the interface comes up, so
//     neighbours (the node, other pods) holding a stale MAC for a reused pod
//     IP update at once instead of after their neighbour entry times out.
//   - pod disable_ipv6=0 for lo and <if>, keep_addr_on_down=1 (set by
//     ipam.ConfigureIface when there is an IPv6 address).
//   - host net.ipv6.conf.<veth>.accept_ra=0 (set by ip.SetupVethWithName):
//     the bridge port must not configure itself from router advertisements.
//
// Add is idempotent: wiring for the attachment that already exists and is
// complete is returned as it is; wiring that is incomplete or different is
// removed and made again. A failed Add removes what it made.
package vethbridge

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"

	"k8s.io/klog/v2"

	"github.com/nodenet/nodenet/cni"
)

// Options configures a Wiring.
type Options struct {
	// HostNetNS is the path of the network namespace that holds the node
	// bridge; "" means the agent's own netns (/proc/self/ns/net). Tests run
	// each node in its own netns.
	HostNetNS string
	// Logger logs wiring that Add found stale and replaced. Default:
	// klog.Background().
	Logger *klog.Logger
}

var _ cni.Wiring = (*Wiring)(nil)

const (
	// hostVethPrefix starts every host veth name.
	hostVethPrefix = "nn"
	// hostVethHashLen hex digits of the attachment's hash follow the
	// prefix: 2+13 = 15 characters, the kernel's limit (IFNAMSIZ-1).
	hostVethHashLen = 13
	// aliasPrefix starts the alias of every link Add makes.
	aliasPrefix = "nodenet:"
	// maxAliasLen is the kernel's limit on IFLA_IFALIAS (IFALIASZ-1).
	maxAliasLen = 255
)

// HostVethName is the name of the host end of an attachment's veth: "nn"
// and the first 13 hex digits of SHA-256("<containerID>:<ifname>"). It is
// a function of the attachment alone, so Del finds the veth without the
// pod's netns, and a retried Add finds what an earlier attempt made.
func HostVethName(a cni.Attachment) string {
	sum := sha256.Sum256([]byte(a.ContainerID + ":" + a.IfName))
	return hostVethPrefix + hex.EncodeToString(sum[:])[:hostVethHashLen]
}

// linkAlias is the IFLA_IFALIAS of both ends of an attachment's veth.
func linkAlias(a cni.Attachment) string {
	return aliasPrefix + a.ContainerID + ":" + a.IfName
}

// parseAlias recovers the attachment from a link alias; ok is false for an
// alias that isn't one of ours. Interface names cannot contain ':', so the
// last ':' separates the container ID from the ifname.
func parseAlias(alias string) (a cni.Attachment, ok bool) {
	rest, found := strings.CutPrefix(alias, aliasPrefix)
	if !found {
		return cni.Attachment{}, false
	}
	i := strings.LastIndexByte(rest, ':')
	if i <= 0 || i == len(rest)-1 {
		return cni.Attachment{}, false
	}
	return cni.Attachment{ContainerID: rest[:i], IfName: rest[i+1:]}, true
}
