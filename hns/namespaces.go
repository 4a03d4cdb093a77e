package hns

import "strings"

// DefaultCompartment is the host's own network compartment: flannel's
// host-gw backend attaches its bridge endpoint to the host with HNS v1's
// HostAttach(1) (flannel-io/flannel pkg/backend/hostgw/hostgw_windows.go),
// and HNS lists the namespace of that compartment with CompartmentId 1
// and IsDefault (Get-HnsNamespace output in projectcalico/calico issue
// 8465).
const DefaultCompartment = 1

// HostDefaultNamespace returns the host's default namespace from a
// listing, or nil: the one of type HostDefault ("host namespaces in the
// default compartment", hnslib hcn/hcnnamespace.go; microsoft/hcsshim
// issue 1048: it is the root network namespace, no new compartment), or
// failing that the one in DefaultCompartment. With several, the first
// listed wins.
func HostDefaultNamespace(nss []Namespace) *Namespace {
	for i := range nss {
		if strings.EqualFold(string(nss[i].Type), string(NamespaceTypeHostDefault)) {
			return &nss[i]
		}
	}
	for i := range nss {
		if nss[i].Compartment == DefaultCompartment {
			return &nss[i]
		}
	}
	return nil
}
