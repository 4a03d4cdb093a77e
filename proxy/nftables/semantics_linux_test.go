package nftables

import (
	"net/netip"
	"testing"
	"time"

	"github.com/nodenet/nodenet/proxy"
)

// semanticsState has one service per behavior the traces check. Node
// ports answer on 192.168.0.0/24 only; the node also has 172.16.0.10,
// and 198.51.100.102, a VIP-mode load-balancer IP routed locally.
func semanticsState() *proxy.State {
	local, remote := ep("10.244.1.5:8080", true), ep("10.244.2.7:8080", false)
	return state(
		port("default/web:http/TCP", "10.96.0.10", 80, eps(local, remote), nodePort(30080)),
		port("default/ext:/TCP", "10.96.0.11", 80, eps(remote), externalIPs("198.51.100.1")),
		port("default/lb:/TCP", "10.96.0.30", 443, eps(remote), nodePort(30443),
			loadBalancer("198.51.100.100"), sourceRanges("203.0.113.0/25", "192.0.2.0/24")),
		port("default/lb-node:/TCP", "10.96.0.31", 443, eps(remote),
			loadBalancer("198.51.100.102"), sourceRanges("203.0.113.0/25", "192.168.0.0/24")),
		port("default/local:/TCP", "10.96.0.40", 80, eps(local, remote), nodePort(30040),
			loadBalancer("198.51.100.101"), externalLocal),
		port("default/remote-only:/TCP", "10.96.0.41", 80, eps(remote), nodePort(30041),
			externalIPs("198.51.100.2"), externalLocal),
		port("default/itp:/TCP", "10.96.0.70", 80, eps(remote), internalLocal),
		port("default/empty:/TCP", "10.96.0.60", 80, nil, nodePort(30060), externalIPs("198.51.100.3")),
		port("default/dns:dns/UDP", "10.96.0.53", 53, eps(ep("10.244.2.8:53", false))),
		port("default/sctp:/SCTP", "10.96.0.54", 9999, eps(ep("10.244.2.9:9999", false))),
		port("default/web6:/TCP", "fd00:96::10", 80, eps(ep("[fd00:244:1::5]:8080", true))),
	)
}

func TestPacketsFollowEveryServiceSemantic(t *testing.T) {
	b, fake := newFakeBackend(t, func(o *Options) {
		o.NodePortAddresses = []netip.Prefix{netip.MustParsePrefix("192.168.0.0/24")}
	})
	mustSync(t, b, proxy.Update{State: semanticsState(), Full: true})

	tests := []struct {
		name, from, proto, src, dst string
		pick                        int
		want                        string
	}{
		{"a pod reaches a cluster IP unmasqueraded", "pod", "tcp", "10.244.1.9", "10.96.0.10:80", 1, "accept, DNAT to 10.244.2.7:8080"},
		{"every endpoint can be picked", "pod", "tcp", "10.244.1.9", "10.96.0.10:80", 0, "accept, DNAT to 10.244.1.5:8080"},
		{"traffic from outside the cluster to a cluster IP is masqueraded", "outside", "tcp", "203.0.113.7", "10.96.0.10:80", 1, "accept, DNAT to 10.244.2.7:8080, masqueraded"},
		{"the node reaching a cluster IP is masqueraded", "node", "tcp", "192.168.0.10", "10.96.0.10:80", 1, "accept, DNAT to 10.244.2.7:8080, masqueraded"},
		{"a pod reaching itself through a service is masqueraded", "pod", "tcp", "10.244.1.5", "10.96.0.10:80", 0, "accept, DNAT to 10.244.1.5:8080, masqueraded"},
		{"an unknown port of a cluster IP is rejected", "pod", "tcp", "10.244.1.9", "10.96.0.10:81", 0, "reject"},
		{"an unallocated cluster IP is dropped", "pod", "tcp", "10.244.1.9", "10.96.5.5:80", 0, "drop"},
		{"the node's traffic to an unallocated cluster IP is dropped", "node", "tcp", "192.168.0.10", "10.96.5.5:80", 0, "drop"},
		{"an address outside the service CIDRs is left alone", "pod", "tcp", "10.244.1.9", "10.97.0.1:80", 0, "accept"},
		{"a node port on a node-port address is DNATed and masqueraded", "outside", "tcp", "203.0.113.7", "192.168.0.10:30080", 1, "accept, DNAT to 10.244.2.7:8080, masqueraded"},
		{"a node port on another local address is not served", "outside", "tcp", "203.0.113.7", "172.16.0.10:30080", 0, "accept"},
		{"a node port on loopback is not served", "node", "tcp", "127.0.0.1", "127.0.0.1:30080", 0, "accept"},
		{"a node port's protocol must match", "outside", "udp", "203.0.113.7", "192.168.0.10:30080", 0, "accept"},
		{"an external IP is DNATed and masqueraded", "outside", "tcp", "203.0.113.7", "198.51.100.1:80", 0, "accept, DNAT to 10.244.2.7:8080, masqueraded"},
		{"a load-balancer IP admits a source in its ranges", "outside", "tcp", "203.0.113.7", "198.51.100.100:443", 0, "accept, DNAT to 10.244.2.7:8080, masqueraded"},
		{"a load-balancer IP admits a source in its other range", "outside", "tcp", "192.0.2.7", "198.51.100.100:443", 0, "accept, DNAT to 10.244.2.7:8080, masqueraded"},
		{"a load-balancer IP drops a source outside its ranges", "outside", "tcp", "203.0.113.200", "198.51.100.100:443", 0, "drop"},
		{"the node is outside the ranges too", "node", "tcp", "192.168.0.10", "198.51.100.100:443", 0, "drop"},
		{"source ranges that include the node allow the service's own load-balancer IP as a source", "node", "tcp", "198.51.100.102", "198.51.100.102:443", 0, "accept, DNAT to 10.244.2.7:8080, masqueraded"},
		{"source ranges that include the node admit the node's own IP", "node", "tcp", "192.168.0.10", "198.51.100.102:443", 0, "accept, DNAT to 10.244.2.7:8080, masqueraded"},
		{"source ranges that include the node still drop other sources", "outside", "tcp", "203.0.113.200", "198.51.100.102:443", 0, "drop"},
		{"source ranges that include the node do not admit another service's load-balancer IP", "node", "tcp", "198.51.100.100", "198.51.100.102:443", 0, "drop"},
		{"source ranges that exclude the node do not", "node", "tcp", "198.51.100.100", "198.51.100.100:443", 0, "drop"},
		{"source ranges do not guard the node port", "outside", "tcp", "203.0.113.200", "192.168.0.10:30443", 0, "accept, DNAT to 10.244.2.7:8080, masqueraded"},
		{"eTP Local keeps the client's IP and uses a local endpoint", "outside", "tcp", "203.0.113.7", "198.51.100.101:80", 1, "accept, DNAT to 10.244.1.5:8080"},
		{"eTP Local node ports keep the client's IP too", "outside", "tcp", "203.0.113.7", "192.168.0.10:30040", 1, "accept, DNAT to 10.244.1.5:8080"},
		{"eTP Local lets a local pod use every endpoint", "pod", "tcp", "10.244.1.9", "198.51.100.101:80", 1, "accept, DNAT to 10.244.2.7:8080"},
		{"eTP Local with only remote endpoints drops external traffic", "outside", "tcp", "203.0.113.7", "192.168.0.10:30041", 0, "drop"},
		{"eTP Local with only remote endpoints drops external traffic to an external IP", "outside", "tcp", "203.0.113.7", "198.51.100.2:80", 0, "drop"},
		{"eTP Local with only remote endpoints still serves a local pod", "pod", "tcp", "10.244.1.9", "192.168.0.10:30041", 0, "accept, DNAT to 10.244.2.7:8080"},
		{"eTP Local with only remote endpoints still serves the node, masqueraded", "node", "tcp", "192.168.0.10", "192.168.0.10:30041", 0, "accept, DNAT to 10.244.2.7:8080, masqueraded"},
		{"eTP Local does not change cluster IP traffic", "pod", "tcp", "10.244.1.9", "10.96.0.41:80", 0, "accept, DNAT to 10.244.2.7:8080"},
		{"iTP Local with only remote endpoints drops cluster IP traffic", "pod", "tcp", "10.244.1.9", "10.96.0.70:80", 0, "drop"},
		{"the node's cluster IP traffic is dropped by iTP Local too", "node", "tcp", "192.168.0.10", "10.96.0.70:80", 0, "drop"},
		{"a service without endpoints rejects its cluster IP", "pod", "tcp", "10.244.1.9", "10.96.0.60:80", 0, "reject"},
		{"a service without endpoints rejects its node port", "outside", "tcp", "203.0.113.7", "192.168.0.10:30060", 0, "reject"},
		{"a service without endpoints rejects its external IP", "outside", "tcp", "203.0.113.7", "198.51.100.3:80", 0, "reject"},
		{"the node gets a reject from a service without endpoints", "node", "tcp", "192.168.0.10", "10.96.0.60:80", 0, "reject"},
		{"UDP services are DNATed", "pod", "udp", "10.244.1.9", "10.96.0.53:53", 0, "accept, DNAT to 10.244.2.8:53"},
		{"TCP to a UDP service port is rejected", "pod", "tcp", "10.244.1.9", "10.96.0.53:53", 0, "reject"},
		{"SCTP services are DNATed", "pod", "sctp", "10.244.1.9", "10.96.0.54:9999", 0, "accept, DNAT to 10.244.2.9:9999"},
		{"IPv6 cluster IPs are DNATed", "pod", "tcp", "fd00:244:1::9", "[fd00:96::10]:80", 0, "accept, DNAT to [fd00:244:1::5]:8080"},
		{"IPv6 off-cluster traffic is masqueraded", "outside", "tcp", "2001:db8::7", "[fd00:96::10]:80", 0, "accept, DNAT to [fd00:244:1::5]:8080, masqueraded"},
		{"an unallocated IPv6 cluster IP is dropped", "pod", "tcp", "fd00:244:1::9", "[fd00:96::99]:80", 0, "drop"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tr := newTracer(t, fake, "192.168.0.10", "172.16.0.10", "198.51.100.102", "fd00:1::10")
			tr.pick = tt.pick
			if got := tr.Trace(tt.from, tt.proto, tt.src, tt.dst); got.String() != tt.want {
				t.Errorf("%s %s -> %s from %s: got %s, want %s", tt.proto, tt.src, tt.dst, tt.from, tr.describe(got), tt.want)
			}
		})
	}
}

func TestWithoutNodeIPsNoLoadBalancerIPIsAdmittedAsASource(t *testing.T) {
	b, fake := newFakeBackend(t, func(o *Options) { o.NodeIPs = nil })
	mustSync(t, b, proxy.Update{State: semanticsState(), Full: true})
	tr := newTracer(t, fake, "192.168.0.10", "198.51.100.102")
	if got := tr.Trace("node", "tcp", "198.51.100.102", "198.51.100.102:443"); got.String() != "drop" {
		t.Errorf("got %s, want drop", tr.describe(got))
	}
	// The ranges themselves still apply.
	if got := tr.Trace("node", "tcp", "192.168.0.10", "198.51.100.102:443"); got.String() != "accept, DNAT to 10.244.2.7:8080, masqueraded" {
		t.Errorf("got %s, want the node admitted by the ranges", tr.describe(got))
	}
}

func TestNodePortsAnswerOnEveryLocalAddressWithoutNodePortAddresses(t *testing.T) {
	b, fake := newFakeBackend(t)
	mustSync(t, b, proxy.Update{State: semanticsState(), Full: true})
	tr := newTracer(t, fake, "192.168.0.10", "172.16.0.10")
	tr.pick = 1
	for _, dst := range []string{"192.168.0.10:30080", "172.16.0.10:30080"} {
		if got := tr.Trace("outside", "tcp", "203.0.113.7", dst).String(); got != "accept, DNAT to 10.244.2.7:8080, masqueraded" {
			t.Errorf("%s: got %s", dst, got)
		}
	}
	if got := tr.Trace("node", "tcp", "127.0.0.1", "127.0.0.1:30080").String(); got != "accept" {
		t.Errorf("loopback: got %s, want no DNAT", got)
	}
}

func TestClientIPAffinitySendsAClientBackToItsEndpoint(t *testing.T) {
	b, fake := newFakeBackend(t)
	sticky := port("default/sticky:/TCP", "10.96.0.50", 80,
		eps(ep("10.244.1.5:8080", true), ep("10.244.2.7:8080", false), ep("10.244.2.8:8080", false)),
		affinity(3*time.Hour), nodePort(30050))
	mustSync(t, b, proxy.Update{State: state(sticky), Full: true})
	tr := newTracer(t, fake, "192.168.0.10")

	tr.pick = 2
	if got := tr.Trace("pod", "tcp", "10.244.1.9", "10.96.0.50:80").String(); got != "accept, DNAT to 10.244.2.8:8080" {
		t.Fatalf("first connection: got %s", got)
	}
	for _, pick := range []int{0, 1} {
		tr.pick = pick
		if got := tr.Trace("pod", "tcp", "10.244.1.9", "10.96.0.50:80").String(); got != "accept, DNAT to 10.244.2.8:8080" {
			t.Errorf("a later connection picking %d: got %s, want the first endpoint again", pick, got)
		}
	}
	// Affinity is per service port, whichever frontend the client uses
	// (and external traffic is masqueraded).
	if got := tr.Trace("pod", "tcp", "10.244.1.9", "192.168.0.10:30050").String(); got != "accept, DNAT to 10.244.2.8:8080, masqueraded" {
		t.Errorf("through the node port: got %s", got)
	}
	tr.pick = 0
	if got := tr.Trace("pod", "tcp", "10.244.1.10", "10.96.0.50:80").String(); got != "accept, DNAT to 10.244.1.5:8080" {
		t.Errorf("another client: got %s", got)
	}
	set := fake.Table.Sets["aff-default/sticky/tcp/80-v4/10.244.2.8/8080"]
	if set == nil || set.Timeout == nil || *set.Timeout != 3*time.Hour {
		t.Errorf("affinity set %+v, want a 3h timeout", set)
	}
}

func TestMasqueradeAllMasqueradesPodTrafficToo(t *testing.T) {
	b, fake := newFakeBackend(t, func(o *Options) { o.MasqueradeAll = true })
	mustSync(t, b, proxy.Update{State: semanticsState(), Full: true})
	tr := newTracer(t, fake, "192.168.0.10")
	if got := tr.Trace("pod", "tcp", "10.244.1.9", "10.96.0.10:80").String(); got != "accept, DNAT to 10.244.1.5:8080, masqueraded" {
		t.Errorf("got %s", got)
	}
}

func TestWithoutDetectLocalNothingIsMasqueradedForClusterIPs(t *testing.T) {
	b, fake := newFakeBackend(t, func(o *Options) { o.LocalTrafficCIDRs = nil })
	mustSync(t, b, proxy.Update{State: semanticsState(), Full: true})
	tr := newTracer(t, fake, "192.168.0.10")
	if got := tr.Trace("outside", "tcp", "203.0.113.7", "10.96.0.10:80").String(); got != "accept, DNAT to 10.244.1.5:8080" {
		t.Errorf("cluster IP: got %s", got)
	}
	// External traffic is still masqueraded (eTP Cluster).
	if got := tr.Trace("outside", "tcp", "203.0.113.7", "192.168.0.10:30080").String(); got != "accept, DNAT to 10.244.1.5:8080, masqueraded" {
		t.Errorf("node port: got %s", got)
	}
}

func TestACustomMasqueradeMarkIsUsedThroughout(t *testing.T) {
	b, fake := newFakeBackend(t, func(o *Options) { o.MasqueradeMark = 0x10 })
	mustSync(t, b, proxy.Update{State: semanticsState(), Full: true})
	tr := newTracer(t, fake, "192.168.0.10")
	if got := tr.Trace("outside", "tcp", "203.0.113.7", "10.96.0.10:80").String(); got != "accept, DNAT to 10.244.1.5:8080, masqueraded" {
		t.Errorf("got %s", got)
	}
	if dump := fake.Dump(); !containsAll(dump, "meta mark set meta mark | 0x00000010", "meta mark & 0x00000010 == 0 return") {
		t.Errorf("the mark 0x10 is not used:\n%s", dump)
	}
}
