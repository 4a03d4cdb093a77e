package hostport

import (
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"

	"github.com/nodenet/nodenet/cni"
)

// Names of the objects in our table.
const (
	chainPrerouting  = "prerouting"
	chainOutput      = "output"
	chainPostrouting = "postrouting"
	chainHostPorts   = "hostports"

	mapAnyV4    = "hostports-v4"
	mapAnyV6    = "hostports-v6"
	mapHostIPv4 = "hostip-hostports-v4"
	mapHostIPv6 = "hostip-hostports-v6"
)

// ErrConflict is what Add's error wraps when another pod already holds a
// hostPort (errors.Is).
var ErrConflict = errors.New("hostPort already in use")

// key is what the kernel keeps unique: one DNAT map element's key. A zero
// hostIP is a mapping for every local address of the family (the
// hostports-v4/v6 maps); otherwise the mapping is for hostIP only (the
// hostip-hostports-v4/v6 maps).
type key struct {
	v6     bool
	hostIP netip.Addr
	proto  string
	port   uint16
}

// entry is one programmed DNAT: key → podIP:podPort, and who owns it.
type entry struct {
	key
	podIP   netip.Addr
	podPort uint16
	owner   owner
}

// owner is what an element's comment records: the attachment (so Del, List
// and GC find the element after an agent restart) and, when the runtime
// sent it, the pod's namespace/name (so a conflict names the pod).
type owner struct {
	att cni.Attachment
	pod string
}

const (
	// maxComment is nft's limit on an element comment.
	maxComment = 128
	// unowned is the comment-less owner of an element someone else added.
	unownedPod = "an element without a nodenet owner comment"
)

func (k key) family() string {
	if k.v6 {
		return "IPv6"
	}
	return "IPv4"
}

// String names the mapping's host side: "tcp/30080 on every IPv4 address",
// "udp/53 on 192.168.1.11".
func (k key) String() string {
	if !k.hostIP.IsValid() {
		return fmt.Sprintf("%s/%d on every %s address", k.proto, k.port, k.family())
	}
	return fmt.Sprintf("%s/%d on %s", k.proto, k.port, k.hostIP)
}

// String names the whole mapping: "hostPort tcp/30080 on 192.168.1.11 →
// 10.244.1.2:8080".
func (e entry) String() string {
	return fmt.Sprintf("hostPort %s → %s", e.key, e.podAddrPort())
}

// podAddrPort is e's target.
func (e entry) podAddrPort() netip.AddrPort { return netip.AddrPortFrom(e.podIP, e.podPort) }

// String names the owner for an error message.
func (o owner) String() string {
	switch {
	case o.att == (cni.Attachment{}):
		return unownedPod
	case o.pod != "":
		return fmt.Sprintf("pod %s (container %s, interface %s)", o.pod, o.att.ContainerID, o.att.IfName)
	default:
		return fmt.Sprintf("container %s interface %s", o.att.ContainerID, o.att.IfName)
	}
}

// ownerOf returns the owner recorded for pod's mappings.
func ownerOf(pod *cni.Pod) owner {
	o := owner{att: pod.Attachment}
	if pod.Name != "" {
		o.pod = pod.Name
		if pod.Namespace != "" {
			o.pod = pod.Namespace + "/" + pod.Name
		}
	}
	return o
}

// comment encodes o as "<containerID>/<ifname>[ <namespace>/<name>]". CNI
// container IDs and Linux interface names hold neither '/' nor spaces, so
// the first space ends the attachment and its last '/' splits it. The pod
// name is informational and cut to fit nft's 128-byte limit; the
// attachment never is: an attachment too long to record is an error.
func (o owner) comment() (string, error) {
	c := o.att.ContainerID + "/" + o.att.IfName
	if len(c) > maxComment {
		return "", fmt.Errorf("container ID %q and interface %q are too long to record with a hostPort mapping (nft comments hold %d bytes)", o.att.ContainerID, o.att.IfName, maxComment)
	}
	if o.pod != "" {
		c += " " + o.pod
		if len(c) > maxComment {
			c = c[:maxComment]
		}
	}
	return c, nil
}

// parseComment is the inverse of comment; ok is false for a comment that
// isn't one of ours.
func parseComment(c string) (o owner, ok bool) {
	att, pod, _ := strings.Cut(c, " ")
	i := strings.LastIndexByte(att, '/')
	if i <= 0 || i == len(att)-1 {
		return owner{}, false
	}
	return owner{att: cni.Attachment{ContainerID: att[:i], IfName: att[i+1:]}, pod: pod}, true
}

// desired expands pod.PortMappings into the entries to program: one per
// pod address of the mapping's family (an empty HostIP means both
// families, "0.0.0.0" and "::" every address of one family, any other
// HostIP that address only). It rejects what the runtime should never
// send, and a pod that maps the same host side twice to different targets.
func desired(pod *cni.Pod) ([]entry, error) {
	if len(pod.PortMappings) == 0 {
		return nil, nil
	}
	// Stack room for the one address per family a pod may have: slices
	// that append grows are heap-allocated once handed to expand.
	var room4, room6 [1]netip.Addr
	t := targets{v4: room4[:0], v6: room6[:0]}
	for _, a := range pod.Addresses {
		ip := a.IP.Addr().Unmap()
		if ip.Is4() {
			t.v4 = append(t.v4, ip)
		} else {
			t.v6 = append(t.v6, ip)
		}
	}
	if len(t.v4) > 1 || len(t.v6) > 1 {
		return nil, fmt.Errorf("pod has more than one address of a family (%v): hostPorts need one target per family", pod.Addresses)
	}
	o := ownerOf(pod)
	var out []entry
	for _, pm := range pod.PortMappings {
		var err error
		if out, err = t.expand(out, pm, o); err != nil {
			return nil, err
		}
	}
	return dedupe(out)
}

// targets are a pod's addresses by family, at most one of each.
type targets struct{ v4, v6 []netip.Addr }

// expand appends to out the entries of one port mapping, after checking
// it.
func (t targets) expand(out []entry, pm cni.PortMapping, o owner) ([]entry, error) {
	proto := strings.ToLower(pm.Protocol)
	if proto == "" {
		proto = "tcp"
	}
	if proto != "tcp" && proto != "udp" && proto != "sctp" {
		return nil, fmt.Errorf("portMapping %+v: protocol %q is not tcp, udp or sctp", pm, pm.Protocol)
	}
	if pm.HostPort < 1 || pm.HostPort > 65535 {
		return nil, fmt.Errorf("portMapping %+v: hostPort %d is out of range 1-65535", pm, pm.HostPort)
	}
	if pm.ContainerPort < 1 || pm.ContainerPort > 65535 {
		return nil, fmt.Errorf("portMapping %+v: containerPort %d is out of range 1-65535", pm, pm.ContainerPort)
	}
	want4, want6 := true, true
	var hostIP netip.Addr
	if pm.HostIP != "" {
		ip, err := netip.ParseAddr(pm.HostIP)
		if err != nil {
			return nil, fmt.Errorf("portMapping %+v: hostIP: %w", pm, err)
		}
		ip = ip.Unmap()
		want4, want6 = ip.Is4(), ip.Is6()
		if ip.Zone() != "" {
			return nil, fmt.Errorf("portMapping %+v: hostIP %s has a zone", pm, ip)
		}
		if !ip.IsUnspecified() {
			hostIP = ip
		}
		if (want4 && len(t.v4) == 0) || (want6 && len(t.v6) == 0) {
			return nil, fmt.Errorf("portMapping %+v: hostIP %s is %s but the pod has no %s address", pm, ip, familyName(want6), familyName(want6))
		}
	}
	n := len(out)
	for _, ip := range t.v4 {
		if want4 {
			out = append(out, entry{key: key{hostIP: hostIP, proto: proto, port: uint16(pm.HostPort)}, podIP: ip, podPort: uint16(pm.ContainerPort), owner: o})
		}
	}
	for _, ip := range t.v6 {
		if want6 {
			out = append(out, entry{key: key{v6: true, hostIP: hostIP, proto: proto, port: uint16(pm.HostPort)}, podIP: ip, podPort: uint16(pm.ContainerPort), owner: o})
		}
	}
	if len(out) == n {
		return nil, fmt.Errorf("portMapping %+v: the pod has no address to map to", pm)
	}
	return out, nil
}

// dedupe sorts entries and drops exact duplicates; it refuses one host
// side mapped to two targets.
func dedupe(entries []entry) ([]entry, error) {
	slices.SortFunc(entries, compareEntries)
	uniq := entries[:0]
	for _, e := range entries {
		if len(uniq) > 0 && uniq[len(uniq)-1].key == e.key {
			if prev := uniq[len(uniq)-1]; prev.podIP != e.podIP || prev.podPort != e.podPort {
				return nil, fmt.Errorf("pod maps %s twice: to %s and to %s", e.key,
					netip.AddrPortFrom(prev.podIP, prev.podPort), netip.AddrPortFrom(e.podIP, e.podPort))
			}
			continue
		}
		uniq = append(uniq, e)
	}
	return uniq, nil
}

func familyName(v6 bool) string {
	if v6 {
		return "IPv6"
	}
	return "IPv4"
}

func compareEntries(a, b entry) int {
	if c := compareKeys(a.key, b.key); c != 0 {
		return c
	}
	if c := a.podIP.Compare(b.podIP); c != 0 {
		return c
	}
	return int(a.podPort) - int(b.podPort)
}

func compareKeys(a, b key) int {
	switch {
	case a.v6 != b.v6:
		if a.v6 {
			return 1
		}
		return -1
	case a.proto != b.proto:
		return strings.Compare(a.proto, b.proto)
	case a.port != b.port:
		return int(a.port) - int(b.port)
	}
	return a.hostIP.Compare(b.hostIP)
}

// conflicts reports whether a (being added) and b (programmed) claim the
// same host side: the same family, protocol and port, and the same hostIP
// or either of them every address. Kubernetes' scheduler treats hostPorts
// the same way (0.0.0.0 conflicts with every hostIP).
func conflicts(a, b key) bool {
	return a.v6 == b.v6 && a.proto == b.proto && a.port == b.port &&
		(a.hostIP == b.hostIP || !a.hostIP.IsValid() || !b.hostIP.IsValid())
}

// mapName is the DNAT map that holds k.
func mapName(k key) string {
	switch {
	case k.v6 && k.hostIP.IsValid():
		return mapHostIPv6
	case k.v6:
		return mapAnyV6
	case k.hostIP.IsValid():
		return mapHostIPv4
	default:
		return mapAnyV4
	}
}

// elementKey is k as a map element key.
func elementKey(k key) []string {
	port := strconv.Itoa(int(k.port))
	if k.hostIP.IsValid() {
		return []string{k.hostIP.String(), k.proto, port}
	}
	return []string{k.proto, port}
}

// parseElement turns a listed element of map m back into an entry.
func parseElement(m string, key []string, value []string, comment *string) (entry, error) {
	var e entry
	switch m {
	case mapAnyV4, mapHostIPv4:
	case mapAnyV6, mapHostIPv6:
		e.v6 = true
	default:
		return e, fmt.Errorf("unknown map %q", m)
	}
	withIP := m == mapHostIPv4 || m == mapHostIPv6
	if withIP {
		if len(key) != 3 {
			return e, fmt.Errorf("map %s: element key %q is not address . protocol . port", m, key)
		}
		ip, err := netip.ParseAddr(key[0])
		if err != nil || ip.Is6() != e.v6 {
			return e, fmt.Errorf("map %s: element key %q: bad address", m, key)
		}
		e.hostIP = ip
		key = key[1:]
	}
	if len(key) != 2 {
		return e, fmt.Errorf("map %s: element key %q is not protocol . port", m, key)
	}
	e.proto = key[0]
	port, err := strconv.ParseUint(key[1], 10, 16)
	if err != nil {
		return e, fmt.Errorf("map %s: element key %q: bad port", m, key)
	}
	e.port = uint16(port)
	if len(value) != 2 {
		return e, fmt.Errorf("map %s: element value %q is not address . port", m, value)
	}
	if e.podIP, err = netip.ParseAddr(value[0]); err != nil || e.podIP.Is6() != e.v6 {
		return e, fmt.Errorf("map %s: element value %q: bad address", m, value)
	}
	port, err = strconv.ParseUint(value[1], 10, 16)
	if err != nil {
		return e, fmt.Errorf("map %s: element value %q: bad port", m, value)
	}
	e.podPort = uint16(port)
	if comment != nil {
		e.owner, _ = parseComment(*comment)
	}
	return e, nil
}
