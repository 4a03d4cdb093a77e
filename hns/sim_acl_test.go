package hns

import (
	"strings"
	"testing"
)

func aclPolicy(a ACLPolicy) EndpointPolicy { return EndpointPolicy{Type: EndpointPolicyACL, ACL: &a} }

func TestACLPolicyValidation(t *testing.T) {
	ok := ACLPolicy{Action: ACLActionAllow, Direction: ACLDirectionIn, RemoteAddresses: "198.51.100.0/24,192.0.2.10",
		LocalPorts: "80,8000-8080", Protocols: "6", RuleType: ACLRuleTypeSwitch, Priority: 100}
	for _, tc := range []struct {
		name    string
		mod     func(a *ACLPolicy)
		wantErr string // "" for accepted
	}{
		{"a full rule", func(*ACLPolicy) {}, ""},
		{"any protocol (256) and a protocol list", func(a *ACLPolicy) { a.Protocols = "256,17" }, ""},
		{"no addresses, ports or rule type", func(a *ACLPolicy) {
			a.RemoteAddresses, a.LocalPorts, a.RuleType = "", "", ""
		}, ""},
		{"Pass outside a tier", func(a *ACLPolicy) { a.Action = ACLActionPass }, "ACL action"},
		{"no action", func(a *ACLPolicy) { a.Action = "" }, "ACL action"},
		{"no direction", func(a *ACLPolicy) { a.Direction = "" }, "ACL direction"},
		{"the word Any as an address (hcsshim issue 1059)", func(a *ACLPolicy) { a.RemoteAddresses = "Any" }, "ACL address"},
		{"a bad local address", func(a *ACLPolicy) { a.LocalAddresses = "10.0.0.300" }, "ACL address"},
		{"a reversed port range", func(a *ACLPolicy) { a.LocalPorts = "8080-80" }, "ACL port"},
		{"a named port", func(a *ACLPolicy) { a.RemotePorts = "http" }, "ACL port"},
		{"a protocol above 256", func(a *ACLPolicy) { a.Protocols = "300" }, "ACL protocol"},
		{"an unknown rule type", func(a *ACLPolicy) { a.RuleType = "Firewall" }, "ACL rule type"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newTestSimulator(t, SimulatorOptions{})
			n := mustNetwork(t, s, overlayNetwork("vxlan0"))
			a := ok
			tc.mod(&a)
			_, err := s.CreateEndpoint(ctx, localEndpoint(n.ID, "10.244.1.5", aclPolicy(a)))
			if tc.wantErr == "" {
				if err != nil {
					t.Fatalf("CreateEndpoint = %v, want it accepted", err)
				}
				return
			}
			if !IsInvalid(err) || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("CreateEndpoint = %v, want an invalid-policy error naming %q", err, tc.wantErr)
			}
		})
	}
}

// allowAllOut and allowAllIn are the allow-all rules an endpoint with ACLs
// needs for what its other rules do not decide (microsoft/Windows-Containers
// issue 616).
var (
	allowAllOut = aclPolicy(ACLPolicy{Action: ACLActionAllow, Direction: ACLDirectionOut, Priority: 65500})
	allowAllIn  = aclPolicy(ACLPolicy{Action: ACLActionAllow, Direction: ACLDirectionIn, Priority: 65500})
)

// TestTraceACLs: what endpoint ACLs do to traced packets, including the
// shape a loadBalancerSourceRanges rule would have (an In allow for the
// ranges on a DSR backend), which shows both why it would filter a DSR
// load balancer's clients and why it cannot without DSR (the backend sees
// the source VIP, not the client).
func TestTraceACLs(t *testing.T) {
	const lbIP, inRange, outRange = "203.0.113.60", "198.51.100.7", outsideIP
	rangeIn := aclPolicy(ACLPolicy{Action: ACLActionAllow, Direction: ACLDirectionIn, RemoteAddresses: "198.51.100.0/24", Priority: 100})
	for _, tc := range []struct {
		name        string
		backendACLs []EndpointPolicy // on the backend pod 10.244.1.5
		senderACLs  []EndpointPolicy // on the client pod 10.244.1.6
		dsr         bool
		from        Entry
		src, dst    string
		wantDrop    string // "" when delivered
	}{
		{"no ACLs: every source reaches the backend", nil, nil, true, FromExternal, outRange, lbIP, ""},
		{"a range allowed on a DSR backend admits a client inside it", []EndpointPolicy{rangeIn, allowAllOut}, nil, true, FromExternal, inRange, lbIP, ""},
		{"and drops one outside it (default deny)", []EndpointPolicy{rangeIn, allowAllOut}, nil, true, FromExternal, outRange, lbIP, "ACLs block"},
		{"without DSR the backend sees the source VIP, so even a client in range is dropped", []EndpointPolicy{rangeIn, allowAllOut}, nil, false, FromExternal, inRange, lbIP, "ACLs block"},
		{"the rule also filters the pod's own address: it cannot be kept to one frontend", []EndpointPolicy{rangeIn, allowAllOut}, nil, true, FromExternal, outRange, "10.244.1.5", "ACL of endpoint"},
		{"a lone Block rule denies everything else too", []EndpointPolicy{aclPolicy(ACLPolicy{Action: ACLActionBlock, Direction: ACLDirectionIn, RemoteAddresses: "192.0.2.99", Priority: 100})}, nil, true, FromExternal, inRange, lbIP, "ACLs block"},
		{"the lowest priority number decides: Block 500 before Allow-all 1000", []EndpointPolicy{
			aclPolicy(ACLPolicy{Action: ACLActionAllow, Direction: ACLDirectionIn, Priority: 1000}),
			aclPolicy(ACLPolicy{Action: ACLActionBlock, Direction: ACLDirectionIn, RemoteAddresses: outRange, Priority: 500}),
		}, nil, true, FromExternal, outRange, lbIP, "ACLs block"},
		{"an allow-all In rule admits the rest", []EndpointPolicy{
			aclPolicy(ACLPolicy{Action: ACLActionBlock, Direction: ACLDirectionIn, RemoteAddresses: outRange, Priority: 500}), allowAllIn,
		}, nil, true, FromExternal, inRange, lbIP, ""},
		{"a rule for another port does not match", []EndpointPolicy{
			aclPolicy(ACLPolicy{Action: ACLActionBlock, Direction: ACLDirectionIn, LocalPorts: "9090", Protocols: "6", Priority: 100}), allowAllIn,
		}, nil, true, FromExternal, outRange, lbIP, ""},
		{"a sender's Out block drops its packet before the load balancer", nil, []EndpointPolicy{
			aclPolicy(ACLPolicy{Action: ACLActionBlock, Direction: ACLDirectionOut, RemoteAddresses: lbIP, Priority: 100}), allowAllIn, allowAllOut,
		}, true, FromEndpoint, "10.244.1.6", lbIP, "ACL of endpoint"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newTestSimulator(t, SimulatorOptions{})
			n := mustNetwork(t, s, overlayNetwork("vxlan0"))
			be := mustEndpoint(t, s, localEndpoint(n.ID, "10.244.1.5", tc.backendACLs...))
			mustEndpoint(t, s, localEndpoint(n.ID, "10.244.1.6", tc.senderACLs...))
			lb := clusterIPLB(lbIP, 80, 8080, be.ID)
			lb.PortMappings[0].Flags = PortMappingFlagsVipExternalIP
			if tc.dsr {
				lb.Flags = LoadBalancerFlagsDSR
			}
			mustLB(t, s, lb)
			port := uint16(80)
			if tc.dst == "10.244.1.5" {
				port = 8080
			}
			tr, err := s.Trace(tc.from, Packet{Protocol: ProtocolTCP, Src: tc.src, SrcPort: 40000, Dst: tc.dst, DstPort: port})
			if err != nil {
				t.Fatal(err)
			}
			if len(tc.backendACLs) > 0 && !strings.Contains(s.Dump(), "policy ACL In ") {
				t.Errorf("the dump does not show the backend's ACLs:\n%s", s.Dump())
			}
			if tc.wantDrop == "" {
				if len(tr.Deliveries) != 1 || tr.Deliveries[0].EndpointID != be.ID {
					t.Errorf("deliveries %v (dropped %q), want the backend\n%s", tr.Backends(), tr.Dropped, tr)
				}
				return
			}
			if len(tr.Deliveries) != 0 || !strings.Contains(tr.Dropped, tc.wantDrop) {
				t.Errorf("deliveries %v, dropped %q; want dropped naming %q\n%s", tr.Backends(), tr.Dropped, tc.wantDrop, tr)
			}
		})
	}
}

func TestACLPolicyJSONShape(t *testing.T) {
	p := aclPolicy(ACLPolicy{Action: ACLActionBlock, Direction: ACLDirectionIn, RemoteAddresses: "192.0.2.0/24", Priority: 200})
	b, err := p.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	want := `{"Type":"ACL","Settings":{"Action":"Block","Direction":"In","RemoteAddresses":"192.0.2.0/24","Priority":200}}`
	if string(b) != want {
		t.Errorf("JSON %s, want %s", b, want)
	}
	var back EndpointPolicy
	if err := back.UnmarshalJSON(b); err != nil || back.ACL == nil || *back.ACL != *p.ACL {
		t.Errorf("decoded %+v (%v), want %+v", back.ACL, err, p.ACL)
	}
}
