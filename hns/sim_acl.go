package hns

import (
	"net/netip"
	"slices"
	"strconv"
)

// validateACL checks an ACL endpoint policy against hnslib's
// hcn.AclPolicySetting (hcn/hcnpolicy.go): Action "is either Allow or
// Block", Direction "is either In or Out", RuleType Host or Switch.
// LocalAddresses and RemoteAddresses take only IP addresses and lists of
// them: "Any" is answered 0x803b000d, "The provided policy configuration
// is invalid or missing parameters" (microsoft/hcsshim issue 1059;
// winerror.h HCN_E_INVALID_POLICY). Port ranges exist from HNS 7.2 on
// (hnslib hcn/hcnsupport.go AclPortRanges, HNSVersion1803), so on every
// v2 host. unsourced: refusing Pass (hnslib defines it for TierAcl rules;
// what a plain ACL does with it is not published), a protocol list, and
// a malformed port or protocol with the same error.
func validateACL(label string, a *ACLPolicy) error {
	op := OpCreateEndpoint
	if a.Action != ACLActionAllow && a.Action != ACLActionBlock {
		return newError(op, KindInvalid, label, "ACL action %q: want Allow or Block", a.Action)
	}
	if a.Direction != ACLDirectionIn && a.Direction != ACLDirectionOut {
		return newError(op, KindInvalid, label, "ACL direction %q: want In or Out", a.Direction)
	}
	if a.RuleType != "" && a.RuleType != ACLRuleTypeHost && a.RuleType != ACLRuleTypeSwitch {
		return newError(op, KindInvalid, label, "ACL rule type %q: want Host or Switch", a.RuleType)
	}
	for _, list := range []string{a.LocalAddresses, a.RemoteAddresses} {
		for _, x := range splitList(list) {
			if !validPrefixOrAddr(x) {
				return newError(op, KindInvalid, label, "ACL address %q is not an IP address or prefix", x)
			}
		}
	}
	for _, list := range []string{a.LocalPorts, a.RemotePorts} {
		for _, x := range splitList(list) {
			if _, _, ok := parsePortRange(x); !ok {
				return newError(op, KindInvalid, label, "ACL port %q is not a port or a low-high range", x)
			}
		}
	}
	for _, x := range splitList(a.Protocols) {
		if n, err := strconv.ParseUint(x, 10, 16); err != nil || n > 256 {
			return newError(op, KindInvalid, label, "ACL protocol %q is not a protocol number (256: any)", x)
		}
	}
	return nil
}

// aclFlow is a packet as one endpoint sees it: local is the endpoint's
// side of it, remote the other side.
type aclFlow struct {
	proto                 Protocol
	local, remote         netip.Addr
	localPort, remotePort uint16
}

// aclBlocks says whether ep's ACLs drop a flow in direction dir, and
// names the deciding rule. An endpoint without ACL policies filters
// nothing; once it has any, HNS "switches the endpoint to a default-deny
// posture", so what no rule allows is dropped
// (microsoft/Windows-Containers issue 616; microsoft/hcsshim issue 1059:
// allow-all rules are needed beside a block rule). The rule with the
// lowest Priority number that matches decides (hcsshim issue 1059 and
// Windows-Containers issue 616: the Block rule at 500 is evaluated before
// the Allow-all at 1000). unsourced: that at equal priority Block wins,
// that Host (WFP) and Switch (VFP) rules filter alike, and which packet
// the rules see: the simulator shows them the packet as the endpoint
// sends it (Out) or receives it (In), after the load balancer's NAT.
func aclBlocks(ep *Endpoint, dir ACLDirection, f aclFlow) (bool, string) {
	var rules []*ACLPolicy
	for _, p := range ep.Policies {
		if p.ACL != nil {
			rules = append(rules, p.ACL)
		}
	}
	if len(rules) == 0 {
		return false, ""
	}
	slices.SortStableFunc(rules, func(a, b *ACLPolicy) int {
		if a.Priority != b.Priority {
			return int(a.Priority) - int(b.Priority)
		}
		if a.Action != b.Action && a.Action == ACLActionBlock {
			return -1
		}
		if a.Action != b.Action && b.Action == ACLActionBlock {
			return 1
		}
		return 0
	})
	for _, r := range rules {
		if r.Direction != dir || !aclMatches(r, f) {
			continue
		}
		desc := describeEndpointPolicy(EndpointPolicy{Type: EndpointPolicyACL, ACL: r})
		return r.Action != ACLActionAllow, desc
	}
	return true, "no ACL rule allows it (an endpoint with ACLs denies by default)"
}

func aclMatches(r *ACLPolicy, f aclFlow) bool {
	return aclProtocolsMatch(r.Protocols, f.proto) &&
		aclAddressesMatch(r.LocalAddresses, f.local) && aclAddressesMatch(r.RemoteAddresses, f.remote) &&
		aclPortsMatch(r.LocalPorts, f.localPort) && aclPortsMatch(r.RemotePorts, f.remotePort)
}

// inboundBlocked applies a receiving local endpoint's In rules to the
// packet it would get, recording the verdict (default deny and priority
// order: microsoft/Windows-Containers issue 616, hcsshim issue 1059; see
// aclBlocks).
func inboundBlocked(t *Trace, ep *Endpoint, p Packet) bool {
	src, err1 := netip.ParseAddr(p.Src)
	dst, err2 := netip.ParseAddr(p.Dst)
	if err1 != nil || err2 != nil {
		return false
	}
	blocked, why := aclBlocks(ep, ACLDirectionIn, aclFlow{proto: p.Protocol, local: dst, remote: src, localPort: p.DstPort, remotePort: p.SrcPort})
	if blocked {
		t.step("endpoint %s's ACL drops %s: %s", ep.ID, p, why)
	}
	return blocked
}

// outboundBlocked applies a sending endpoint's Out rules to the packet
// as it sent it, dropping the trace if they block it (the outbound Block
// of microsoft/Windows-Containers issue 616; see aclBlocks).
func outboundBlocked(t *Trace, ep *Endpoint, p tracePacket) bool {
	blocked, why := aclBlocks(ep, ACLDirectionOut, aclFlow{proto: p.Protocol, local: p.src, remote: p.dst, localPort: p.SrcPort, remotePort: p.DstPort})
	if blocked {
		t.Dropped = "blocked by an ACL of endpoint " + ep.ID + ": " + why
		t.step("dropped: %s", t.Dropped)
	}
	return blocked
}
