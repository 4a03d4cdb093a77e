package hns

import (
	"net/netip"
	"strconv"
	"strings"
)

// ACLAction is what an ACL rule does with the packets it matches
// (hcn.ActionType).
type ACLAction string

// ACL actions. hnslib defines Pass too, for TierAcl rules.
const (
	ACLActionAllow ACLAction = "Allow"
	ACLActionBlock ACLAction = "Block"
	ACLActionPass  ACLAction = "Pass"
)

// ACLDirection is the direction an ACL rule filters (hcn.DirectionType):
// In is traffic coming to the endpoint, Out traffic leaving it.
type ACLDirection string

// ACL directions.
const (
	ACLDirectionIn  ACLDirection = "In"
	ACLDirectionOut ACLDirection = "Out"
)

// ACLRuleType says where HNS programs a rule (hcn.RuleType): Host is a
// Windows Filtering Platform rule, Switch a VFP rule on the vSwitch port.
type ACLRuleType string

// ACL rule types.
const (
	ACLRuleTypeHost   ACLRuleType = "Host"
	ACLRuleTypeSwitch ACLRuleType = "Switch"
)

// ACLProtocolAny is the protocol number that matches every protocol
// (microsoft/hcsshim issue 1059: "specifying 256 for protocol means all
// protocols").
const ACLProtocolAny = "256"

// ACLPolicy is one firewall rule on an endpoint: hnslib's
// hcn.AclPolicySetting field for field. Addresses, ports and protocols
// are comma-separated lists in one string, as HNS takes them; empty
// means any.
type ACLPolicy struct {
	Protocols       string       `json:",omitempty"` // "6", "17", …; 256 any
	Action          ACLAction    `json:","`
	Direction       ACLDirection `json:","`
	LocalAddresses  string       `json:",omitempty"`
	RemoteAddresses string       `json:",omitempty"`
	LocalPorts      string       `json:",omitempty"`
	RemotePorts     string       `json:",omitempty"`
	RuleType        ACLRuleType  `json:",omitempty"`
	// Priority orders the rules: the lowest number is evaluated first.
	Priority uint16 `json:",omitempty"`
}

// splitList splits one of an ACL's comma-separated fields; empty is none.
func splitList(s string) []string {
	if strings.TrimSpace(s) == "" {
		return nil
	}
	parts := strings.Split(s, ",")
	for i := range parts {
		parts[i] = strings.TrimSpace(parts[i])
	}
	return parts
}

// aclAddressesMatch says whether a is in list (addresses or prefixes);
// an empty list matches every address.
func aclAddressesMatch(list string, a netip.Addr) bool {
	items := splitList(list)
	return len(items) == 0 || inAny(items, a)
}

// aclPortsMatch says whether port is in list (ports or "low-high"
// ranges); an empty list matches every port.
func aclPortsMatch(list string, port uint16) bool {
	items := splitList(list)
	if len(items) == 0 {
		return true
	}
	for _, it := range items {
		lo, hi, ok := parsePortRange(it)
		if ok && port >= lo && port <= hi {
			return true
		}
	}
	return false
}

// aclProtocolsMatch says whether proto is in list; empty or 256 is any.
func aclProtocolsMatch(list string, proto Protocol) bool {
	items := splitList(list)
	if len(items) == 0 {
		return true
	}
	for _, it := range items {
		if it == ACLProtocolAny || it == strconv.FormatUint(uint64(proto), 10) {
			return true
		}
	}
	return false
}

// parsePortRange reads "80" or "8000-8080".
func parsePortRange(s string) (lo, hi uint16, ok bool) {
	a, b, isRange := strings.Cut(s, "-")
	x, err := strconv.ParseUint(a, 10, 16)
	if err != nil {
		return 0, 0, false
	}
	if !isRange {
		return uint16(x), uint16(x), true
	}
	y, err := strconv.ParseUint(b, 10, 16)
	if err != nil || y < x {
		return 0, 0, false
	}
	return uint16(x), uint16(y), true
}
