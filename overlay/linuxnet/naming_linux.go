package linuxnet

import (
	"crypto/sha256"
	"encoding/binary"
	"net"
	"net/netip"
	"strconv"
)

// ifNameMax is IFNAMSIZ minus the terminating NUL.
const ifNameMax = 15

// VXLANDeviceName is the vxlan device of network name and vni:
// "<name>.<vni>" like flannel's "flannel.<vni>", the name part truncated
// so the whole fits the kernel's 15 characters.
func VXLANDeviceName(name string, vni uint32) string {
	suffix := "." + strconv.FormatUint(uint64(vni), 10)
	if keep := ifNameMax - len(suffix); len(name) > keep {
		name = name[:keep]
	}
	return name + suffix
}

// VTEPMAC is the MAC linuxnet gives a vxlan device it creates: a hash of
// the node IP and the VNI, locally administered and unicast. Derived
// rather than random (flannel's choice) so that a device re-created after
// a reboot has the MAC the node's annotation already publishes.
func VTEPMAC(nodeIP netip.Addr, vni uint32) net.HardwareAddr {
	return derivedMAC("nodenet-vtep", nodeIP, vni)
}

// bridgeMAC is the MAC given to the bridge at creation. Setting it
// explicitly pins it: the kernel then stops re-deriving the bridge MAC
// from its lowest port MAC as pods come and go.
func bridgeMAC(nodeIP netip.Addr, name string) net.HardwareAddr {
	return derivedMAC("nodenet-bridge/"+name, nodeIP, 0)
}

func derivedMAC(label string, ip netip.Addr, n uint32) net.HardwareAddr {
	h := sha256.New()
	h.Write([]byte(label))
	h.Write(ip.AsSlice())
	h.Write(binary.BigEndian.AppendUint32(nil, n))
	sum := h.Sum(nil)
	mac := net.HardwareAddr(sum[:6])
	mac[0] = mac[0]&^0x01 | 0x02 // unicast, locally administered
	return mac
}
