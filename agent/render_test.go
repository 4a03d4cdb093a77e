package agent

// Address plan: examples/services — node-a (rendered) 192.168.1.10 with
// pod CIDR 10.244.1.0/24 (gateway .1, source VIP .2), node-b
// 192.168.1.11 with 10.244.2.0/24, node-c 192.168.1.12 with
// 10.244.3.0/24; kube-system/kube-dns 10.96.0.10:53 → 10.244.1.3
// (node-a), 10.244.3.4 (node-c); web's pod 10.244.1.5; edge/ingress's external IP 192.0.2.50:443 →
// 10.244.1.20 (node-a, eTP Local).

import (
	"slices"
	"strings"
	"testing"

	"k8s.io/klog/v2/ktesting"

	"github.com/nodenet/nodenet/config"
	"github.com/nodenet/nodenet/hns"
)

func renderExamples(t *testing.T, cfgText string, v hns.Version) *Rendered {
	t.Helper()
	cfg, _, err := config.Load([]byte(cfgText), config.LoadOptions{OS: config.OSWindows, Shared: true})
	if err != nil {
		t.Fatal(err)
	}
	r, err := RenderHNS(t.Context(), RenderOptions{Config: cfg, Dir: "../examples/services", NodeName: "node-a", Version: v,
		Logger: ktesting.NewLogger(t, ktesting.NewConfig())})
	if err != nil {
		t.Fatal(err)
	}
	if r.Network != nil || r.Proxy != nil || len(r.Problems) > 0 {
		t.Fatalf("render: network %v, proxy %v, problems %v", r.Network, r.Proxy, r.Problems)
	}
	return r
}

const renderConfig = `apiVersion: nodenet.io/v1alpha1
kind: AgentConfiguration
clusterCIDRs: [10.244.0.0/16]
serviceCIDRs: [10.96.0.0/12]
network: {mode: overlay, name: nodenet}
`

// TestRenderedHostCarriesTraffic traces packets through a rendered host:
// what RenderHNS programs is a working node, not a listing — a pod
// reaches a Service's local pod by its CNI endpoint and the remote one
// through the overlay, SNATed to the source VIP; an external client
// reaches the eTP Local frontend's local pod with DSR, keeping its
// address.
func TestRenderedHostCarriesTraffic(t *testing.T) {
	r := renderExamples(t, renderConfig, hns.VersionWS2025Patched)
	tr, err := r.HNS.Trace(hns.FromEndpoint, hns.Packet{Protocol: hns.ProtocolUDP, Src: "10.244.1.5", SrcPort: 40000, Dst: "10.96.0.10", DstPort: 53})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, d := range tr.Deliveries {
		s := string(d.Target) + " " + d.Packet.Src + " -> " + d.Packet.Dst
		if d.Encap != nil {
			s += " via " + d.Encap.ProviderAddress
		}
		got = append(got, s)
	}
	slices.Sort(got)
	want := []string{"local-endpoint 10.244.1.2 -> 10.244.1.3", "remote-endpoint 10.244.1.2 -> 10.244.3.4 via 192.168.1.12"}
	if !slices.Equal(got, want) {
		t.Errorf("pod → kube-dns's cluster IP delivers %v, want %v\n%s", got, want, strings.Join(tr.Steps, "\n"))
	}

	tr, err = r.HNS.Trace(hns.FromExternal, hns.Packet{Protocol: hns.ProtocolTCP, Src: "203.0.113.9", SrcPort: 40000, Dst: "192.0.2.50", DstPort: 443})
	if err != nil {
		t.Fatal(err)
	}
	if len(tr.Deliveries) != 1 || tr.Deliveries[0].Packet.Dst != "10.244.1.20" || tr.Deliveries[0].Packet.Src != "203.0.113.9" || !tr.Deliveries[0].DSR {
		t.Errorf("client → ingress's external IP: %+v, want DSR to 10.244.1.20 from the client's address\n%s", tr.Deliveries, strings.Join(tr.Steps, "\n"))
	}
}

// TestRenderRecordsWhatTheHostCannotDo renders for Windows Server 2019's
// HNS 9.3: shop/web's ClientIP affinity is programmed without it, with
// the agent's event on the Service.
func TestRenderRecordsWhatTheHostCannotDo(t *testing.T) {
	r := renderExamples(t, renderConfig, hns.VersionWS2019)
	found := false
	for _, e := range r.Events {
		found = found || (e.Object == "Service shop/web" && e.Reason == "SessionAffinityUnsupported" && e.Type == "Warning")
	}
	if !found {
		t.Errorf("events %v, want SessionAffinityUnsupported on Service shop/web", r.Events)
	}
	if len(r.Notes) != 0 {
		t.Errorf("notes %v: every local endpoint of examples/services has its Pod", r.Notes)
	}
}
