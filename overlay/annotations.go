package overlay

import (
	"encoding/json"
	"fmt"
	"net"
	"strings"
)

// flannel's node annotations (prefix flannel.alpha.coreos.com/). nodenet
// publishes them on its own Node and reads them from every other Node, so
// Linux nodes running flannel's kube subnet manager learn nodenet nodes and
// nodenet learns them. flannel only considers a Node whose
// kube-subnet-manager annotation is "true".
const (
	annotationPrefix = "flannel.alpha.coreos.com/"

	AnnotationKubeSubnetManager = annotationPrefix + "kube-subnet-manager"
	AnnotationBackendType       = annotationPrefix + "backend-type"
	AnnotationBackendData       = annotationPrefix + "backend-data"
	AnnotationPublicIP          = annotationPrefix + "public-ip"
	// AnnotationPublicIPOverwrite is set by operators to force a node's
	// public IP; flannel copies it into public-ip, and so do we on read.
	AnnotationPublicIPOverwrite = annotationPrefix + "public-ip-overwrite"
	// The IPv6 counterparts, for dual-stack host-gw (l2bridge) nodes.
	AnnotationPublicIPv6          = annotationPrefix + "public-ipv6"
	AnnotationPublicIPv6Overwrite = annotationPrefix + "public-ipv6-overwrite"
)

// flannel's backend-type values for our two modes.
const (
	BackendVXLAN  = "vxlan"
	BackendHostGW = "host-gw"
)

// vxlanBackendData is flannel's vxlan backend-data: {"VNI":4096,
// "VtepMAC":"aa:bb:cc:dd:ee:ff"}.
type vxlanBackendData struct {
	VNI     int    `json:"VNI"`
	VtepMAC string `json:"VtepMAC"`
}

// OwnAnnotations returns the annotations this node publishes for local:
// what flannel's kube subnet manager writes for the same backend.
func OwnAnnotations(local *LocalNetwork, vni uint32) (map[string]string, error) {
	a := map[string]string{
		AnnotationKubeSubnetManager: "true",
		AnnotationPublicIP:          local.NodeIP.String(),
	}
	if local.NodeIPv6.IsValid() {
		a[AnnotationPublicIPv6] = local.NodeIPv6.String()
	}
	switch local.Mode {
	case "l2bridge":
		a[AnnotationBackendType] = BackendHostGW
		a[AnnotationBackendData] = "null"
	default:
		if len(local.VtepMAC) != 6 {
			return nil, fmt.Errorf("overlay network %q reported no VTEP MAC to publish", local.Name)
		}
		data, err := json.Marshal(vxlanBackendData{VNI: int(vni), VtepMAC: local.VtepMAC.String()})
		if err != nil {
			return nil, err
		}
		a[AnnotationBackendType] = BackendVXLAN
		a[AnnotationBackendData] = string(data)
	}
	return a, nil
}

// parseVXLANBackendData reads a peer's vxlan backend-data. flannel
// writes the MAC with colons; Windows tooling writes dashes: both parse.
func parseVXLANBackendData(s string) (vni int, mac net.HardwareAddr, err error) {
	var d vxlanBackendData
	if err := json.Unmarshal([]byte(s), &d); err != nil {
		return 0, nil, fmt.Errorf("%s is not vxlan backend data (want {\"VNI\":4096,\"VtepMAC\":\"aa:bb:cc:dd:ee:ff\"}): %w", AnnotationBackendData, err)
	}
	mac, err = net.ParseMAC(strings.ReplaceAll(d.VtepMAC, "-", ":"))
	if err != nil || len(mac) != 6 {
		return 0, nil, fmt.Errorf("%s: VtepMAC %q is not a MAC address", AnnotationBackendData, d.VtepMAC)
	}
	if d.VNI <= 0 {
		return 0, nil, fmt.Errorf("%s: VNI %d is not a VXLAN network identifier", AnnotationBackendData, d.VNI)
	}
	return d.VNI, mac, nil
}
