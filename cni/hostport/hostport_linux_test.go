package hostport

// Address plan (unit tests against knftables' Fake; no packets):
//   10.244.1.0/24, fd00:10:244:1::/64  this node's pod CIDRs; .1/::1 gateways
//   10.244.1.3-.9, fd00:10:244:1::3-9  pods ("web" .3, "api" .4, "db" .5)
//   192.168.1.11, 192.168.1.12         node addresses used as hostIPs
//   fd00:1::11                         node IPv6 address used as hostIP

import (
	"context"
	"errors"
	"net/netip"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"sigs.k8s.io/knftables"

	"github.com/nodenet/nodenet/cni"
)

var (
	dual   = []string{"10.244.1.3", "fd00:10:244:1::3"}
	dual4  = []string{"10.244.1.4", "fd00:10:244:1::4"}
	only4  = []string{"10.244.1.5"}
	only4b = []string{"10.244.1.6"}
)

func TestAdd(t *testing.T) {
	for _, tc := range []struct {
		name string
		// before are added first and must succeed.
		before []*cni.Pod
		pod    *cni.Pod
		// want are the elements afterwards; wantErr a substring of Add's
		// error (then the pod must not be left wired).
		want     []string
		wantErr  string
		conflict bool
	}{
		{
			name: "a hostPort on every address maps each family of a dual-stack pod",
			pod:  testPod("web", dual, tcp(30080, 8080)),
			want: []string{
				"hostports-v4 tcp . 30080 : 10.244.1.3 . 8080 # c-web/eth0 default/web",
				"hostports-v6 tcp . 30080 : fd00:10:244:1::3 . 8080 # c-web/eth0 default/web",
			},
		},
		{
			name: "a hostIP maps that address only, in its own family",
			pod:  testPod("web", dual, onIP(tcp(30080, 8080), "192.168.1.11"), onIP(tcp(30443, 8443), "fd00:1::11")),
			want: []string{
				"hostip-hostports-v4 192.168.1.11 . tcp . 30080 : 10.244.1.3 . 8080 # c-web/eth0 default/web",
				"hostip-hostports-v6 fd00:1::11 . tcp . 30443 : fd00:10:244:1::3 . 8443 # c-web/eth0 default/web",
			},
		},
		{
			name: "hostIP 0.0.0.0 maps every IPv4 address and :: every IPv6 address",
			pod:  testPod("web", dual, onIP(tcp(30080, 8080), "0.0.0.0"), onIP(tcp(30443, 8443), "::")),
			want: []string{
				"hostports-v4 tcp . 30080 : 10.244.1.3 . 8080 # c-web/eth0 default/web",
				"hostports-v6 tcp . 30443 : fd00:10:244:1::3 . 8443 # c-web/eth0 default/web",
			},
		},
		{
			name: "udp and sctp are mapped, the protocol is case-insensitive and defaults to tcp",
			pod: testPod("web", only4, withProto(tcp(53, 5353), "UDP"), withProto(tcp(9000, 9000), "sctp"),
				withProto(tcp(80, 8080), "")),
			want: []string{
				"hostports-v4 sctp . 9000 : 10.244.1.5 . 9000 # c-web/eth0 default/web",
				"hostports-v4 tcp . 80 : 10.244.1.5 . 8080 # c-web/eth0 default/web",
				"hostports-v4 udp . 53 : 10.244.1.5 . 5353 # c-web/eth0 default/web",
			},
		},
		{
			name: "a mapping listed twice is programmed once",
			pod:  testPod("web", only4, tcp(30080, 8080), tcp(30080, 8080)),
			want: []string{"hostports-v4 tcp . 30080 : 10.244.1.5 . 8080 # c-web/eth0 default/web"},
		},
		{
			name: "a pod without a name is recorded by its attachment alone",
			pod:  &cni.Pod{Attachment: cni.Attachment{ContainerID: "c-anon", IfName: "net1"}, Addresses: testPod("x", only4).Addresses, PortMappings: []cni.PortMapping{tcp(30080, 8080)}},
			want: []string{"hostports-v4 tcp . 30080 : 10.244.1.5 . 8080 # c-anon/net1"},
		},
		{
			name:     "the same hostPort as another pod fails, naming that pod",
			before:   []*cni.Pod{testPod("api", dual4, tcp(30080, 80))},
			pod:      testPod("web", dual, tcp(30080, 8080)),
			wantErr:  "hostPort tcp/30080 on every IPv4 address is mapped to 10.244.1.4:80 for pod default/api (container c-api, interface eth0)",
			conflict: true,
			want: []string{
				"hostports-v4 tcp . 30080 : 10.244.1.4 . 80 # c-api/eth0 default/api",
				"hostports-v6 tcp . 30080 : fd00:10:244:1::4 . 80 # c-api/eth0 default/api",
			},
		},
		{
			name:     "a hostIP mapping conflicts with another pod's every-address mapping of the port",
			before:   []*cni.Pod{testPod("api", only4b, tcp(30080, 80))},
			pod:      testPod("web", only4, onIP(tcp(30080, 8080), "192.168.1.11")),
			wantErr:  "hostPort tcp/30080 on 192.168.1.11 conflicts with hostPort tcp/30080 on every IPv4 address, mapped to 10.244.1.6:80 for pod default/api",
			conflict: true,
			want:     []string{"hostports-v4 tcp . 30080 : 10.244.1.6 . 80 # c-api/eth0 default/api"},
		},
		{
			name:     "an every-address mapping conflicts with another pod's hostIP mapping of the port",
			before:   []*cni.Pod{testPod("api", only4b, onIP(tcp(30080, 80), "192.168.1.12"))},
			pod:      testPod("web", only4, tcp(30080, 8080)),
			wantErr:  "hostPort tcp/30080 on every IPv4 address conflicts with hostPort tcp/30080 on 192.168.1.12, mapped to 10.244.1.6:80 for pod default/api",
			conflict: true,
			want:     []string{"hostip-hostports-v4 192.168.1.12 . tcp . 30080 : 10.244.1.6 . 80 # c-api/eth0 default/api"},
		},
		{
			name: "the same port with another protocol, another hostIP or in the other family is no conflict",
			before: []*cni.Pod{
				testPod("api", only4b, withProto(onIP(tcp(30080, 80), "192.168.1.12"), "udp"), onIP(tcp(30081, 81), "192.168.1.12")),
				testPod("db", []string{"fd00:10:244:1::5"}, tcp(30080, 5432)),
			},
			pod: testPod("web", only4, onIP(tcp(30080, 8080), "192.168.1.11"), onIP(tcp(30081, 8081), "192.168.1.11")),
			want: []string{
				"hostip-hostports-v4 192.168.1.11 . tcp . 30080 : 10.244.1.5 . 8080 # c-web/eth0 default/web",
				"hostip-hostports-v4 192.168.1.11 . tcp . 30081 : 10.244.1.5 . 8081 # c-web/eth0 default/web",
				"hostip-hostports-v4 192.168.1.12 . tcp . 30081 : 10.244.1.6 . 81 # c-api/eth0 default/api",
				"hostip-hostports-v4 192.168.1.12 . udp . 30080 : 10.244.1.6 . 80 # c-api/eth0 default/api",
				"hostports-v6 tcp . 30080 : fd00:10:244:1::5 . 5432 # c-db/eth0 default/db",
			},
		},
		{
			name:    "a protocol other than tcp, udp and sctp is refused",
			pod:     testPod("web", only4, withProto(tcp(30080, 8080), "icmp")),
			wantErr: `protocol "icmp" is not tcp, udp or sctp`,
		},
		{
			name:    "hostPort 0 is refused",
			pod:     testPod("web", only4, tcp(0, 8080)),
			wantErr: "hostPort 0 is out of range",
		},
		{
			name:    "containerPort 65536 is refused",
			pod:     testPod("web", only4, tcp(30080, 65536)),
			wantErr: "containerPort 65536 is out of range",
		},
		{
			name:    "a hostIP that isn't an address is refused",
			pod:     testPod("web", only4, onIP(tcp(30080, 8080), "node-a")),
			wantErr: "hostIP",
		},
		{
			name:    "an IPv6 hostIP for a pod without an IPv6 address is refused",
			pod:     testPod("web", only4, onIP(tcp(30080, 8080), "fd00:1::11")),
			wantErr: "hostIP fd00:1::11 is IPv6 but the pod has no IPv6 address",
		},
		{
			name:    "one hostPort mapped to two container ports is refused",
			pod:     testPod("web", only4, tcp(30080, 8080), tcp(30080, 9090)),
			wantErr: "pod maps tcp/30080 on every IPv4 address twice: to 10.244.1.5:8080 and to 10.244.1.5:9090",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			for _, p := range tc.before {
				h.mustAdd(p)
			}
			err := h.add(tc.pod)
			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatalf("Add: %v", err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Fatalf("Add: got error %v, want one containing %q", err, tc.wantErr)
			}
			if tc.wantErr != "" && h.inner.isWired(tc.pod.Attachment) {
				t.Error("the failed Add left the pod wired")
			}
			if got := errors.Is(err, ErrConflict); got != tc.conflict {
				t.Errorf("errors.Is(err, ErrConflict) = %v, want %v", got, tc.conflict)
			}
			if diff := cmp.Diff(tc.want, h.elements()); diff != "" {
				t.Errorf("elements (-want +got):\n%s", diff)
			}
		})
	}
}

func TestAddCost(t *testing.T) {
	t.Run("a pod without hostPorts is wired without any nft call", func(t *testing.T) {
		h := newHarness(t)
		if err := h.add(testPod("web", dual)); err != nil {
			t.Fatal(err)
		}
		if n := h.nft.calls(); n != 0 {
			t.Errorf("%d nft calls, want 0", n)
		}
		if h.fake.Table != nil {
			t.Errorf("the table was created:\n%s", h.fake.Dump())
		}
		if !h.inner.isWired(cni.Attachment{ContainerID: "c-web", IfName: "eth0"}) {
			t.Error("the pod isn't wired")
		}
	})
	t.Run("once the table is there, a pod with hostPorts costs one transaction and one without costs nothing", func(t *testing.T) {
		h := newHarness(t)
		h.mustAdd(testPod("api", dual4, tcp(30081, 80)))
		h.nft.calls()
		h.mustAdd(testPod("web", dual, tcp(30080, 8080)))
		if n := h.nft.calls(); n != 1 {
			t.Errorf("Add with a hostPort: %d nft calls, want 1", n)
		}
		h.mustAdd(testPod("db", only4))
		if err := h.del(testPod("db", only4)); err != nil {
			t.Fatal(err)
		}
		if n := h.nft.calls(); n != 0 {
			t.Errorf("Add and Del without hostPorts: %d nft calls, want 0", n)
		}
		if err := h.del(&cni.Pod{Attachment: cni.Attachment{ContainerID: "c-web", IfName: "eth0"}}); err != nil {
			t.Fatal(err)
		}
		if n := h.nft.calls(); n != 1 {
			t.Errorf("Del with hostPorts: %d nft calls, want 1", n)
		}
	})
}

// TestRuleset pins the table Add programs (the rules are what the
// real-kernel test exercises with packets).
func TestRuleset(t *testing.T) {
	h := newHarness(t)
	h.mustAdd(testPod("web", dual, tcp(30080, 8080), withProto(onIP(tcp(53, 5353), "192.168.1.11"), "udp")))
	want := `add table inet nodenet-hostport { comment "nodenet: pod hostPorts (cni/hostport); written by the nodenet agent" ; }
add chain inet nodenet-hostport hostports { comment "DNAT to a local address's hostPort" ; }
add chain inet nodenet-hostport output { type nat hook output priority -100 ; comment "hostPorts of traffic the node sends to itself" ; }
add chain inet nodenet-hostport postrouting { type nat hook postrouting priority 100 ; comment "masquerade hairpin hostPort traffic" ; }
add chain inet nodenet-hostport prerouting { type nat hook prerouting priority -100 ; comment "hostPorts of traffic arriving at the node" ; }
add map inet nodenet-hostport hostip-hostports-v4 { type ipv4_addr . inet_proto . inet_service : ipv4_addr . inet_service ; comment "hostPorts on one IPv4 hostIP" ; }
add map inet nodenet-hostport hostip-hostports-v6 { type ipv6_addr . inet_proto . inet_service : ipv6_addr . inet_service ; comment "hostPorts on one IPv6 hostIP" ; }
add map inet nodenet-hostport hostports-v4 { type inet_proto . inet_service : ipv4_addr . inet_service ; comment "hostPorts on every IPv4 address" ; }
add map inet nodenet-hostport hostports-v6 { type inet_proto . inet_service : ipv6_addr . inet_service ; comment "hostPorts on every IPv6 address" ; }
add rule inet nodenet-hostport hostports ip saddr { 10.244.1.0/24 } ip daddr . meta l4proto . th dport @hostip-hostports-v4 meta mark set meta mark | 0x2000
add rule inet nodenet-hostport hostports ip saddr { 10.244.1.0/24 } meta l4proto . th dport @hostports-v4 meta mark set meta mark | 0x2000
add rule inet nodenet-hostport hostports ip6 saddr { fd00:10:244:1::/64 } ip6 daddr . meta l4proto . th dport @hostip-hostports-v6 meta mark set meta mark | 0x2000
add rule inet nodenet-hostport hostports ip6 saddr { fd00:10:244:1::/64 } meta l4proto . th dport @hostports-v6 meta mark set meta mark | 0x2000
add rule inet nodenet-hostport hostports dnat ip to ip daddr . meta l4proto . th dport map @hostip-hostports-v4
add rule inet nodenet-hostport hostports meta nfproto ipv4 dnat ip to meta l4proto . th dport map @hostports-v4
add rule inet nodenet-hostport hostports dnat ip6 to ip6 daddr . meta l4proto . th dport map @hostip-hostports-v6
add rule inet nodenet-hostport hostports meta nfproto ipv6 dnat ip6 to meta l4proto . th dport map @hostports-v6
add rule inet nodenet-hostport output ip saddr 127.0.0.0/8 ip daddr 127.0.0.0/8 return
add rule inet nodenet-hostport output ip6 daddr ::1 return
add rule inet nodenet-hostport output fib daddr type local jump hostports
add rule inet nodenet-hostport postrouting meta mark & 0x2000 == 0 return
add rule inet nodenet-hostport postrouting meta mark set meta mark ^ 0x2000
add rule inet nodenet-hostport postrouting masquerade fully-random
add rule inet nodenet-hostport prerouting fib daddr type local jump hostports
add element inet nodenet-hostport hostip-hostports-v4 { 192.168.1.11 . udp . 53 comment "c-web/eth0 default/web" : 10.244.1.3 . 5353 }
add element inet nodenet-hostport hostports-v4 { tcp . 30080 comment "c-web/eth0 default/web" : 10.244.1.3 . 8080 }
add element inet nodenet-hostport hostports-v6 { tcp . 30080 comment "c-web/eth0 default/web" : fd00:10:244:1::3 . 8080 }
`
	if diff := cmp.Diff(want, h.fake.Dump()); diff != "" {
		t.Errorf("Dump (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"udp/53 on 192.168.1.11"}, h.ct.cleared); diff != "" {
		t.Errorf("conntrack entries cleared for (-want +got):\n%s", diff)
	}

	t.Run("the hairpin rules follow the node's pod CIDRs", func(t *testing.T) {
		h.nw = &cni.NodeNetwork{PodCIDRs: []netip.Prefix{netip.MustParsePrefix("10.244.7.0/24")}}
		if err := h.w.Ready(context.Background(), h.nw); err != nil {
			t.Fatal(err)
		}
		dump := h.fake.Dump()
		if !strings.Contains(dump, "ip saddr { 10.244.7.0/24 } meta l4proto") || strings.Contains(dump, "10.244.1.0/24") || strings.Contains(dump, "ip6 saddr") {
			t.Errorf("rules don't follow the new pod CIDRs:\n%s", dump)
		}
		if len(h.elements()) != 3 {
			t.Errorf("Ready lost elements: %q", h.elements())
		}
	})
}

func TestIdempotency(t *testing.T) {
	t.Run("a retried ADD programs the same mappings again without error", func(t *testing.T) {
		h := newHarness(t)
		p := testPod("web", dual, tcp(30080, 8080))
		h.mustAdd(p)
		before := h.fake.Dump()
		h.mustAdd(p)
		if diff := cmp.Diff(before, h.fake.Dump()); diff != "" {
			t.Errorf("the second Add changed the table (-first +second):\n%s", diff)
		}
		if len(h.ct.cleared) != 0 {
			t.Errorf("tcp mappings cleared conntrack: %q", h.ct.cleared)
		}
	})
	t.Run("a retried ADD with other hostPorts replaces the pod's mappings", func(t *testing.T) {
		h := newHarness(t)
		h.mustAdd(testPod("web", dual, tcp(30080, 8080), tcp(30081, 8081)))
		h.mustAdd(testPod("web", only4, tcp(30080, 9090), tcp(30082, 8082)))
		want := []string{
			"hostports-v4 tcp . 30080 : 10.244.1.5 . 9090 # c-web/eth0 default/web",
			"hostports-v4 tcp . 30082 : 10.244.1.5 . 8082 # c-web/eth0 default/web",
		}
		if diff := cmp.Diff(want, h.elements()); diff != "" {
			t.Errorf("elements (-want +got):\n%s", diff)
		}
		h.mustAdd(testPod("web", only4))
		if got := h.elements(); len(got) != 0 {
			t.Errorf("an ADD without hostPorts left %q", got)
		}
	})
	t.Run("Del twice, and Del of a pod never added, succeed", func(t *testing.T) {
		h := newHarness(t)
		p := testPod("web", dual, tcp(30080, 8080))
		h.mustAdd(p)
		for i := 0; i < 2; i++ {
			if err := h.del(p); err != nil {
				t.Fatalf("Del #%d: %v", i+1, err)
			}
		}
		if err := h.del(testPod("ghost", only4, tcp(1, 1))); err != nil {
			t.Fatalf("Del of a pod never added: %v", err)
		}
		if got := h.elements(); len(got) != 0 {
			t.Errorf("left %q", got)
		}
	})
	t.Run("Del works when nothing was ever programmed", func(t *testing.T) {
		h := newHarness(t)
		h.inner.wired[cni.Attachment{ContainerID: "c-web", IfName: "eth0"}] = true
		if err := h.del(testPod("web", only4)); err != nil {
			t.Fatal(err)
		}
		if h.inner.isWired(cni.Attachment{ContainerID: "c-web", IfName: "eth0"}) {
			t.Error("the inner wiring wasn't removed")
		}
		if h.fake.Table != nil {
			t.Error("Del created the table")
		}
	})
}

func TestRollback(t *testing.T) {
	for _, tc := range []struct {
		name     string
		failures int
		wantErr  bool
	}{
		{name: "a transaction that fails once is retried from the kernel's state", failures: 1},
		{name: "a transaction that keeps failing unwires the pod and leaves no mapping", failures: 2, wantErr: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			h.mustAdd(testPod("api", dual4, tcp(30081, 80)))
			h.nft.failRun = failElementTxs(tc.failures)
			p := testPod("web", dual, tcp(30080, 8080))
			err := h.add(p)
			if (err != nil) != tc.wantErr {
				t.Fatalf("Add: %v, want error %v", err, tc.wantErr)
			}
			if tc.wantErr && !errors.Is(err, errInjected) {
				t.Errorf("Add: %v, want the nft error", err)
			}
			if got := h.inner.isWired(p.Attachment); got == tc.wantErr {
				t.Errorf("pod wired = %v after Add returned %v", got, err)
			}
			n := 0
			for _, e := range h.elements() {
				if strings.Contains(e, "c-web/eth0") {
					n++
				}
			}
			if want := map[bool]int{false: 2, true: 0}[tc.wantErr]; n != want {
				t.Errorf("%d elements of the pod, want %d: %q", n, want, h.elements())
			}
			if len(h.elements())-n != 2 {
				t.Errorf("the other pod's mappings changed: %q", h.elements())
			}
		})
	}
	t.Run("a failing inner Add makes no nft call", func(t *testing.T) {
		h := newHarness(t)
		h.mustAdd(testPod("api", dual4, tcp(30081, 80)))
		h.nft.calls()
		h.inner.addErr = errors.New("no veth today")
		if err := h.add(testPod("web", dual, tcp(30080, 8080))); err == nil || !strings.Contains(err.Error(), "no veth today") {
			t.Fatalf("Add: %v, want the inner error", err)
		}
		if n := h.nft.calls(); n != 0 {
			t.Errorf("%d nft calls, want 0", n)
		}
	})
	t.Run("a conflict seen before wiring doesn't wire the pod at all", func(t *testing.T) {
		h := newHarness(t)
		h.mustAdd(testPod("api", dual4, tcp(30080, 80)))
		h.inner.addErr = errors.New("inner Add must not be called")
		err := h.add(testPod("web", dual, tcp(30080, 8080)))
		if !errors.Is(err, ErrConflict) {
			t.Fatalf("Add: %v, want a conflict", err)
		}
	})
}

func TestRestart(t *testing.T) {
	// The first agent adds pods; a second Wiring over the same kernel (the
	// restarted agent, empty memory) must find them.
	first := newHarness(t)
	first.mustAdd(testPod("web", dual, tcp(30080, 8080)))
	first.mustAdd(testPod("api", only4b, onIP(withProto(tcp(53, 53), "udp"), "192.168.1.11")))
	h := newHarnessOn(t, first.fake)
	ctx := context.Background()

	t.Run("List returns the attachments that have mappings", func(t *testing.T) {
		got, err := h.w.List(ctx, h.nw)
		if err != nil {
			t.Fatal(err)
		}
		want := []cni.Attachment{{ContainerID: "c-web", IfName: "eth0"}, {ContainerID: "c-api", IfName: "eth0"}}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("List (-want +got):\n%s", diff)
		}
	})
	t.Run("a conflict names the pod the first agent mapped", func(t *testing.T) {
		err := h.add(testPod("db", only4, tcp(30080, 5432)))
		if !errors.Is(err, ErrConflict) || !strings.Contains(err.Error(), "pod default/web") {
			t.Fatalf("Add: %v, want a conflict naming pod default/web", err)
		}
	})
	t.Run("Del removes a pod's mappings knowing only its attachment", func(t *testing.T) {
		if err := h.del(&cni.Pod{Attachment: cni.Attachment{ContainerID: "c-web", IfName: "eth0"}}); err != nil {
			t.Fatal(err)
		}
		want := []string{"hostip-hostports-v4 192.168.1.11 . udp . 53 : 10.244.1.6 . 53 # c-api/eth0 default/api"}
		if diff := cmp.Diff(want, h.elements()); diff != "" {
			t.Errorf("elements (-want +got):\n%s", diff)
		}
	})
	t.Run("a mapping added behind the Wiring's back is still refused, naming its owner", func(t *testing.T) {
		// Load the mirror, then change the kernel under it.
		if _, err := h.w.List(ctx, h.nw); err != nil {
			t.Fatal(err)
		}
		tx := h.fake.NewTransaction()
		tx.Add(&knftables.Element{Map: mapAnyV4, Key: []string{"tcp", "31000"}, Value: []string{"10.244.1.9", "80"}, Comment: knftables.PtrTo("c-sneaky/eth0 kube-system/sneaky")})
		if err := h.fake.Run(ctx, tx); err != nil {
			t.Fatal(err)
		}
		err := h.add(testPod("db", only4, tcp(31000, 5432)))
		if !errors.Is(err, ErrConflict) || !strings.Contains(err.Error(), "pod kube-system/sneaky") {
			t.Fatalf("Add: %v, want a conflict naming pod kube-system/sneaky", err)
		}
	})
}

func TestCheck(t *testing.T) {
	ctx := context.Background()
	setup := func(t *testing.T) (*harness, *cni.Pod) {
		h := newHarness(t)
		p := testPod("web", dual, tcp(30080, 8080))
		h.mustAdd(p)
		h.mustAdd(testPod("api", only4b, tcp(30081, 80)))
		return h, p
	}
	deleteElement := func(h *harness, m string, k ...string) {
		tx := h.fake.NewTransaction()
		tx.Delete(&knftables.Element{Map: m, Key: k})
		if err := h.fake.Run(ctx, tx); err != nil {
			h.t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		name    string
		drift   func(h *harness)
		pod     func(p *cni.Pod)
		wantErr string
	}{
		{name: "a pod as Add left it passes"},
		{
			name:    "a missing mapping is named",
			drift:   func(h *harness) { deleteElement(h, mapAnyV6, "tcp", "30080") },
			wantErr: "hostPort tcp/30080 on every IPv6 address → [fd00:10:244:1::3]:8080 is not programmed",
		},
		{
			name: "a mapping to another target is named",
			drift: func(h *harness) {
				deleteElement(h, mapAnyV4, "tcp", "30080")
				tx := h.fake.NewTransaction()
				tx.Add(&knftables.Element{Map: mapAnyV4, Key: []string{"tcp", "30080"}, Value: []string{"10.244.1.6", "80"}, Comment: knftables.PtrTo("c-api/eth0 default/api")})
				if err := h.fake.Run(ctx, tx); err != nil {
					t.Fatal(err)
				}
			},
			wantErr: "hostPort tcp/30080 on every IPv4 address → 10.244.1.3:8080 is not programmed: the kernel maps it to 10.244.1.6:80 for pod default/api",
		},
		{
			name:    "a mapping the pod no longer asks for is named",
			pod:     func(p *cni.Pod) { p.PortMappings = nil },
			wantErr: "hostPort tcp/30080 on every IPv4 address → 10.244.1.3:8080 is programmed for the pod, which doesn't ask for it",
		},
		{
			name: "a missing chain is named",
			drift: func(h *harness) {
				tx := h.fake.NewTransaction()
				tx.Delete(&knftables.Chain{Name: chainPrerouting})
				if err := h.fake.Run(ctx, tx); err != nil {
					t.Fatal(err)
				}
			},
			wantErr: "chain prerouting of table inet nodenet-hostport is missing",
		},
		{
			name:    "the inner wiring's drift is reported",
			drift:   func(h *harness) { delete(h.inner.wired, cni.Attachment{ContainerID: "c-web", IfName: "eth0"}) },
			wantErr: "inner: c-web/eth0 is not wired",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h, p := setup(t)
			if tc.drift != nil {
				tc.drift(h)
			}
			if tc.pod != nil {
				tc.pod(p)
			}
			err := h.check(p)
			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatalf("Check: %v", err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Fatalf("Check: got %v, want an error containing %q", err, tc.wantErr)
			}
		})
	}
}

func TestList(t *testing.T) {
	h := newHarness(t)
	h.mustAdd(testPod("web", dual, tcp(30080, 8080)))
	h.mustAdd(testPod("db", only4))
	// The inner wiring lost "api" but its mappings are left (a crash
	// between the two halves of a Del), and "web" has both.
	h.mustAdd(testPod("api", only4b, tcp(30081, 80)))
	delete(h.inner.wired, cni.Attachment{ContainerID: "c-api", IfName: "eth0"})

	got, err := h.w.List(context.Background(), h.nw)
	if err != nil {
		t.Fatal(err)
	}
	want := []cni.Attachment{{ContainerID: "c-db", IfName: "eth0"}, {ContainerID: "c-web", IfName: "eth0"}, {ContainerID: "c-api", IfName: "eth0"}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("List (-want +got):\n%s", diff)
	}

	t.Run("GC's Del of a mappings-only attachment cleans it", func(t *testing.T) {
		if err := h.del(&cni.Pod{Attachment: cni.Attachment{ContainerID: "c-api", IfName: "eth0"}}); err != nil {
			t.Fatal(err)
		}
		for _, e := range h.elements() {
			if strings.Contains(e, "c-api") {
				t.Errorf("left %q", e)
			}
		}
	})
}

func TestReady(t *testing.T) {
	ctx := context.Background()
	t.Run("the inner wiring's error is returned without touching nftables", func(t *testing.T) {
		h := newHarness(t)
		h.inner.readyErr = errors.New("no bridge")
		if err := h.w.Ready(ctx, h.nw); err == nil || err.Error() != "no bridge" {
			t.Fatalf("Ready: %v", err)
		}
		if n := h.nft.calls(); n != 0 {
			t.Errorf("%d nft calls, want 0", n)
		}
	})
	t.Run("Ready creates the table, and repairs rules that drifted", func(t *testing.T) {
		h := newHarness(t)
		if err := h.w.Ready(ctx, h.nw); err != nil {
			t.Fatal(err)
		}
		h.mustAdd(testPod("web", dual, tcp(30080, 8080)))
		want := h.fake.Dump()
		tx := h.fake.NewTransaction()
		tx.Flush(&knftables.Chain{Name: chainHostPorts})
		if err := h.fake.Run(ctx, tx); err != nil {
			t.Fatal(err)
		}
		if err := h.w.Ready(ctx, h.nw); err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(want, h.fake.Dump()); diff != "" {
			t.Errorf("after Ready (-want +got):\n%s", diff)
		}
	})
	t.Run("a table that vanished is made again by the next Add", func(t *testing.T) {
		h := newHarness(t)
		h.mustAdd(testPod("web", dual, tcp(30080, 8080)))
		tx := h.fake.NewTransaction()
		tx.Delete(&knftables.Table{})
		if err := h.fake.Run(ctx, tx); err != nil {
			t.Fatal(err)
		}
		h.mustAdd(testPod("api", only4b, tcp(30081, 80)))
		want := []string{"hostports-v4 tcp . 30081 : 10.244.1.6 . 80 # c-api/eth0 default/api"}
		if diff := cmp.Diff(want, h.elements()); diff != "" {
			t.Errorf("elements (-want +got):\n%s", diff)
		}
	})
}

func TestNew(t *testing.T) {
	if _, err := New(Options{NFT: knftables.NewFake(knftables.InetFamily, DefaultTableName)}); err == nil {
		t.Error("New without Inner succeeded")
	}
	if _, err := New(Options{Inner: newFakeInner(), NFT: knftables.NewFake(knftables.InetFamily, DefaultTableName), HairpinMark: 0x3000}); err == nil {
		t.Error("New with a two-bit HairpinMark succeeded")
	}
	t.Run("an NFT bound to another table fails loudly instead of writing there", func(t *testing.T) {
		w, err := New(Options{Inner: newFakeInner(), NFT: knftables.NewFake(knftables.InetFamily, "other")})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := w.Add(context.Background(), testNetwork(), testPod("web", only4, tcp(30080, 8080))); err == nil {
			t.Error("Add succeeded")
		}
	})
}

func BenchmarkAddDelFake(b *testing.B) {
	h := newHarness(b)
	ctx := context.Background()
	if err := h.w.Ready(ctx, h.nw); err != nil {
		b.Fatal(err)
	}
	p := testPod("web", dual, tcp(30080, 8080))
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := h.w.Add(ctx, h.nw, p); err != nil {
			b.Fatal(err)
		}
		if err := h.w.Del(ctx, h.nw, p); err != nil {
			b.Fatal(err)
		}
	}
}
