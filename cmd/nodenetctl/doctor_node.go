package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/netip"
	"slices"
	"strings"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/nodenet/nodenet/agent/status"
	"github.com/nodenet/nodenet/config"
	"github.com/nodenet/nodenet/overlay"
)

// The API server side of doctor: what this Node and its peers publish,
// read with the same rules the agent routes by (overlay.RemoteFromNode).

const fixForeignWriter = "another program writes flannel's annotations on this Node (a flanneld left here?): remove it; the agent rewrites them"

func checkNode(ctx context.Context, kube kubernetes.Interface, st *status.Status) []check {
	self, err := kube.CoreV1().Nodes().Get(ctx, st.NodeName, metav1.GetOptions{})
	if err != nil {
		return []check{failed("node", fmt.Sprintf("get Node %q: %v", st.NodeName, err),
			"check the kubeconfig, and that the agent's nodeName (NODE_NAME) is this Node's name")}
	}
	rules := peerRules(st.Network)
	checks := []check{checkNodeAnnotations(self, st.Network, rules), checkNodeCondition(self)}
	nodes, err := kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return append(checks, failed("peers", "list Nodes: "+err.Error(), "check the kubeconfig's permissions (list nodes)"))
	}
	return append(checks, checkPeers(nodes.Items, st, rules))
}

// peerRules is what the agent expects of other nodes, from its status.
func peerRules(n status.NetworkStatus) overlay.PeerRules {
	rules := overlay.PeerRules{Mode: config.NetworkMode(n.Mode), VNI: uint32(n.VNI)}
	for _, cidr := range n.PodCIDRs {
		family := config.IPv4
		if p, err := netip.ParsePrefix(cidr); err == nil && p.Addr().Is6() {
			family = config.IPv6
		}
		if !slices.Contains(rules.Families, family) {
			rules.Families = append(rules.Families, family)
		}
	}
	if len(rules.Families) == 0 {
		rules.Families = []config.IPFamily{config.IPv4}
	}
	return rules
}

// checkNodeAnnotations checks that this Node tells its peers what the
// agent runs: flannel's backend annotations as a peer reads them, the
// public IP, and the pod CIDRs.
func checkNodeAnnotations(self *v1.Node, n status.NetworkStatus, rules overlay.PeerRules) check {
	const name = "node annotations"
	a := self.Annotations
	if a[overlay.AnnotationBackendType] == "" {
		return failed(name, fmt.Sprintf("Node %s has no %s annotation", self.Name, overlay.AnnotationBackendType),
			"the agent publishes it once the network is ready: fix the network check")
	}
	wantType := overlay.BackendVXLAN
	if n.Mode == string(config.NetworkModeL2Bridge) {
		wantType = overlay.BackendHostGW
	}
	if got := a[overlay.AnnotationBackendType]; got != wantType {
		return failed(name, fmt.Sprintf("Node %s has %s=%q, but its network is %s (%q)", self.Name, overlay.AnnotationBackendType, got, n.Mode, wantType), fixForeignWriter)
	}
	if wantType == overlay.BackendVXLAN {
		// Said here, not as a peer's VNI mismatch: it is this node's.
		var data struct{ VNI int }
		if err := json.Unmarshal([]byte(a[overlay.AnnotationBackendData]), &data); err == nil && data.VNI != n.VNI {
			return failed(name, fmt.Sprintf("Node %s publishes VNI %d in %s, but its network uses VNI %d", self.Name, data.VNI, overlay.AnnotationBackendData, n.VNI), fixForeignWriter)
		}
	}
	remote, problem := overlay.RemoteFromNode(self, rules)
	if problem != nil {
		return failed(name, fmt.Sprintf("peers can't route to this node: %s", problem.Message), fixForeignWriter)
	}
	if a[overlay.AnnotationKubeSubnetManager] != "true" {
		return failed(name, fmt.Sprintf("Node %s lacks %s=\"true\": flannel nodes ignore it", self.Name, overlay.AnnotationKubeSubnetManager), fixForeignWriter)
	}
	if n.NodeIP != "" && remote.NodeIP.String() != n.NodeIP {
		return failed(name, fmt.Sprintf("peers send to %s (%s), but the agent's node IP is %s", remote.NodeIP, overlay.AnnotationPublicIP, n.NodeIP), fixForeignWriter)
	}
	cidrs := make([]string, len(remote.PodCIDRs))
	for i, p := range remote.PodCIDRs {
		cidrs[i] = p.String()
	}
	if !slices.Equal(cidrs, n.PodCIDRs) {
		return failed(name, fmt.Sprintf("Node %s has pod CIDRs %s, but the agent uses %s", self.Name, orNone(strings.Join(cidrs, ", ")), orNone(strings.Join(n.PodCIDRs, ", "))),
			"restart the agent: a Node's pod CIDR only changes when it is recreated")
	}
	detail := fmt.Sprintf("%s, public-ip %s, pod CIDRs %s", wantType, remote.NodeIP, strings.Join(cidrs, ", "))
	if wantType == overlay.BackendVXLAN {
		detail = fmt.Sprintf("%s VNI %d VtepMAC %s, public-ip %s, pod CIDRs %s", wantType, n.VNI, remote.VtepMAC, remote.NodeIP, strings.Join(cidrs, ", "))
	}
	return passed(name, "%s", detail)
}

// checkNodeCondition checks the NetworkUnavailable condition the agent
// sets: the kubelet and schedulers keep pods off a node where it is True.
func checkNodeCondition(self *v1.Node) check {
	const name = "node condition"
	for _, c := range self.Status.Conditions {
		if c.Type != v1.NodeNetworkUnavailable {
			continue
		}
		switch {
		case c.Status != v1.ConditionFalse:
			return failed(name, fmt.Sprintf("NetworkUnavailable=%s: %s: %s", c.Status, c.Reason, c.Message), "see the network check; the agent clears it once the network is ready")
		case c.Reason != overlay.ReasonReady:
			return warned(name, fmt.Sprintf("NetworkUnavailable=False was set by someone else (reason %s: %s)", c.Reason, c.Message), fixForeignWriter)
		}
		return passed(name, "NetworkUnavailable=False (%s)", c.Reason)
	}
	return failed(name, "Node "+self.Name+" has no NetworkUnavailable condition", "the agent sets it once the network is ready: fix the network check")
}

// checkPeers reads every other Node as the agent does: a peer with another
// backend or VNI is unreachable (FAIL); one without a pod CIDR or
// annotations yet is still joining (warn). The agent should route to
// every routable peer.
func checkPeers(nodes []v1.Node, st *status.Status, rules overlay.PeerRules) check {
	const name = "peers"
	var broken, joining []string
	routable := 0
	for i := range nodes {
		if nodes[i].Name == st.NodeName {
			continue
		}
		_, problem := overlay.RemoteFromNode(&nodes[i], rules)
		switch {
		case problem == nil:
			routable++
		case problem.Reason == overlay.PeerNoPodCIDR || problem.Reason == overlay.PeerMissingAnnotation:
			joining = append(joining, problem.Error())
		default:
			broken = append(broken, problem.Error())
		}
	}
	backend := fmt.Sprintf("%s, VNI %d", overlay.BackendVXLAN, st.Network.VNI)
	if rules.Mode == config.NetworkModeL2Bridge {
		backend = overlay.BackendHostGW
	}
	switch {
	case len(broken) > 0:
		return failed(name, fmt.Sprintf("%s unreachable from here: %s", plural(len(broken), "peer"), strings.Join(broken, "; ")),
			"use one network mode and VNI on every node")
	case routable != st.Network.RemoteNodes:
		return warned(name, fmt.Sprintf("%s routable (%s), but the agent routes to %s", plural(routable, "peer"), backend, plural(st.Network.RemoteNodes, "remote node")),
			"wait a few seconds and rerun; if it persists, read the agent's log")
	case len(joining) > 0:
		return warned(name, fmt.Sprintf("%s routable (%s); still joining: %s", plural(routable, "peer"), backend, strings.Join(joining, "; ")),
			"nothing, if those nodes are starting; else start nodenet or flannel there and give them pod CIDRs")
	}
	return passed(name, "%s routable (%s), and the agent routes to each", plural(routable, "peer"), backend)
}
