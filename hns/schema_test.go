package hns

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// Address plan: see fixture_test.go. The testdata files are HNS v2
// documents as HNS returns them (hnsdiag / Get-HnsNetwork -Detailed shape).

// TestSchemaRoundTrip decodes each HNS document strictly (a field we don't
// model fails the test) and re-encodes it to the same JSON, which is what
// the Windows client's translation to and from hcn relies on.
func TestSchemaRoundTrip(t *testing.T) {
	cases := []struct {
		file  string
		into  func() any
		check func(t *testing.T, v any)
	}{
		{
			file: "network-overlay.json", into: func() any { return &Network{} },
			check: func(t *testing.T, v any) {
				n := v.(*Network)
				r := findRemoteSubnetRoute(n, "10.244.2.0/24")
				if r == nil || r.IsolationID != 4096 || r.ProviderAddress != "10.0.0.5" {
					t.Errorf("remote subnet route not decoded: %+v", n.Policies)
				}
				if got := networkVSID(n); got != 4096 {
					t.Errorf("VSID = %d, want 4096", got)
				}
				if last := n.Policies[len(n.Policies)-1]; last.Type != "AutomaticDNS" || !cmp.Equal(asGeneric(t, last.Raw), map[string]any{"Enable": true}) {
					t.Errorf("an unmodeled policy must be kept raw, got %+v", last)
				}
			},
		},
		{
			file: "endpoint-pod.json", into: func() any { return &Endpoint{} },
			check: func(t *testing.T, v any) {
				ep := v.(*Endpoint)
				if nat := ep.Policies[0].OutboundNAT; nat == nil || len(nat.Exceptions) != 3 {
					t.Errorf("OutBoundNAT not decoded: %+v", ep.Policies)
				}
				if r := ep.Policies[1].SDNRoute; r == nil || !r.NeedEncap {
					t.Errorf("SDNRoute NeedEncap not decoded: %+v", ep.Policies[1])
				}
				if ep.IsRemote() {
					t.Errorf("a pod endpoint decoded as remote")
				}
			},
		},
		{
			file: "endpoint-remote.json", into: func() any { return &Endpoint{} },
			check: func(t *testing.T, v any) {
				ep := v.(*Endpoint)
				if !ep.IsRemote() || ep.Policies[0].ProviderAddress.ProviderAddress != "10.0.0.5" {
					t.Errorf("remote endpoint not decoded: %+v", ep)
				}
			},
		},
		{
			file: "loadbalancer-nodeport.json", into: func() any { return &LoadBalancer{} },
			check: func(t *testing.T, v any) {
				lb := v.(*LoadBalancer)
				pm := lb.PortMappings[0]
				if lb.Flags != LoadBalancerFlagsDSR || pm.Flags != PortMappingFlagsLocalRoutedVIP|PortMappingFlagsVipExternalIP || pm.DistributionType != DistributionSourceIP {
					t.Errorf("flags not decoded: %+v", lb)
				}
			},
		},
	}
	for _, tc := range cases {
		t.Run(tc.file+" decodes strictly and re-encodes to the same document", func(t *testing.T) {
			raw, err := os.ReadFile(filepath.Join("testdata", tc.file))
			if err != nil {
				t.Fatal(err)
			}
			v := tc.into()
			dec := json.NewDecoder(bytes.NewReader(raw))
			dec.DisallowUnknownFields()
			if err := dec.Decode(v); err != nil {
				t.Fatalf("strict decode: %v", err)
			}
			tc.check(t, v)
			out, err := json.Marshal(v)
			if err != nil {
				t.Fatal(err)
			}
			// Like hcn, we emit empty struct fields ("Dns": {}) that HNS
			// leaves out; they carry nothing, so they are dropped here.
			if diff := cmp.Diff(asGeneric(t, raw), dropEmptyObjects(asGeneric(t, out))); diff != "" {
				t.Errorf("re-encoded document differs (-hns +ours):\n%s", diff)
			}
		})
	}
}

func asGeneric(t *testing.T, b []byte) any {
	t.Helper()
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatal(err)
	}
	return v
}

func dropEmptyObjects(v any) any {
	m, ok := v.(map[string]any)
	if !ok {
		return v
	}
	for k, x := range m {
		if sub, ok := x.(map[string]any); ok && len(sub) == 0 {
			delete(m, k)
		}
	}
	return m
}

func TestPolicyDecodingErrors(t *testing.T) {
	for name, doc := range map[string]string{
		"a policy without a type":        `{"Settings":{}}`,
		"settings of the wrong shape":    `{"Type":"RemoteSubnetRoute","Settings":{"IsolationId":"x"}}`,
		"a policy that is not an object": `[1]`,
	} {
		t.Run(name+" is an error", func(t *testing.T) {
			var p NetworkPolicy
			if err := json.Unmarshal([]byte(doc), &p); err == nil {
				t.Fatalf("decoded %s without error: %+v", doc, p)
			}
		})
	}
}

func TestFeaturesFollowTheHNSVersion(t *testing.T) {
	cases := []struct {
		version string
		want    Features
	}{
		{"9.2", Features{RemoteSubnet: true, HostRoute: true}},
		{"9.3", Features{RemoteSubnet: true, HostRoute: true, DSR: true}},
		{"10.1", Features{RemoteSubnet: true, HostRoute: true}},
		{"10.4", Features{RemoteSubnet: true, HostRoute: true, DSR: true, VxlanPort: true}},
		{"12.0", Features{RemoteSubnet: true, HostRoute: true, DSR: true, VxlanPort: true, SessionAffinity: true, IPv6DualStack: true}},
		{"15.4", Features{RemoteSubnet: true, HostRoute: true, DSR: true, VxlanPort: true, SessionAffinity: true, IPv6DualStack: true}},
		{"15.5", Features{RemoteSubnet: true, HostRoute: true, DSR: true, VxlanPort: true, SessionAffinity: true, IPv6DualStack: true, ModifyLoadbalancer: true}},
	}
	for _, tc := range cases {
		t.Run("HNS "+tc.version, func(t *testing.T) {
			v, err := ParseVersion(tc.version)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, FeaturesFor(v)); diff != "" {
				t.Errorf("features (-want +got):\n%s", diff)
			}
		})
	}
	for _, bad := range []string{"", "15", "15.x", "-1.2", "+1.2", " 15.4", "1.2.3"} {
		if _, err := ParseVersion(bad); err == nil {
			t.Errorf("ParseVersion(%q) accepted", bad)
		}
	}
}
