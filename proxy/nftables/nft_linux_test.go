package nftables

import (
	"context"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/vishvananda/netns"
	"sigs.k8s.io/knftables"

	"github.com/nodenet/nodenet/internal/nftnl/nftnltest"
	"github.com/nodenet/nodenet/internal/nsexec"
	"github.com/nodenet/nodenet/internal/testroot"
	"github.com/nodenet/nodenet/proxy"
)

// newNetns returns a throwaway network namespace, closed at cleanup
// (the kernel frees it, and our table with it, once unused).
func newNetns(tb testing.TB) netns.NsHandle {
	tb.Helper()
	testroot.Require(tb, "a network namespace and nftables")
	ns, err := nsexec.New()
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { ns.Close() })
	return ns
}

// newKernelBackend returns a Backend that programs ns over netlink, as
// the agent's does: New opens its socket inside ns. opts builds its
// options (given a nil knftables.Interface: no knftables).
func newKernelBackend(ns netns.NsHandle, opts func(knftables.Interface) Options) (*Backend, error) {
	var b *Backend
	err := nsexec.Do(ns, func() error {
		var err error
		b, err = New(opts(nil))
		return err
	})
	return b, err
}

// nftList returns `nft list table inet nodenet` in ns.
func nftList(ns netns.NsHandle) (string, error) {
	var out []byte
	err := nsexec.Do(ns, func() error {
		var err error
		out, err = exec.Command("nft", "list", "table", "inet", TableName).CombinedOutput()
		if err != nil {
			return fmt.Errorf("nft list: %w: %s", err, out)
		}
		return nil
	})
	return string(out), err
}

// nftRuleExpressions returns the expressions the kernel holds for the
// rules of table inet nodenet in ns (nft --debug=netlink).
func nftRuleExpressions(ns netns.NsHandle) (string, error) {
	var out string
	err := nsexec.Do(ns, func() error {
		b, err := exec.Command("nft", "--debug=netlink", "list", "table", "inet", TableName).CombinedOutput()
		if err != nil {
			return fmt.Errorf("nft list: %w: %s", err, b)
		}
		out = nftnltest.RuleExpressions(string(b))
		return nil
	})
	return out, err
}

func TestTheKernelAcceptsEverySyncOfTheRepresentativeServices(t *testing.T) {
	ns := newNetns(t)
	ctx := context.Background()
	var b *Backend
	sync := func(u proxy.Update) {
		t.Helper()
		if err := nsexec.Do(ns, func() error { return b.Sync(ctx, u) }); err != nil {
			t.Fatal(err)
		}
	}
	// Someone else's table, which must survive everything below.
	other := "table ip other {\n\tchain input {\n\t\ttype filter hook input priority filter; policy accept;\n\t\tip saddr 192.0.2.1 drop\n\t}\n}\n"
	err := nsexec.Do(ns, func() error {
		cmd := exec.Command("nft", "-f", "-")
		cmd.Stdin = strings.NewReader(other)
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("nft: %w: %s", err, out)
		}
		return nil
	})
	if err == nil {
		b, err = newKernelBackend(ns, testOptions)
	}
	if err != nil {
		t.Fatal(err)
	}
	// Old chains are deleted a second after they were emptied; the test
	// moves time instead of waiting.
	now := time.Now()
	b.now = func() time.Time { return now }

	s := representative()
	sync(proxy.Update{State: s, Full: true})

	web := s.ServicePorts[key("default/web:http/TCP", proxy.IPv4)]
	sticky := s.ServicePorts[key("default/sticky:/TCP", proxy.IPv4)]
	lb := s.ServicePorts[key("default/lb:/TCP", proxy.IPv4)]
	steps := []struct {
		name  string
		ports []*proxy.ServicePort
		drop  []*proxy.ServicePort
	}{
		{"an endpoint is added", []*proxy.ServicePort{port("default/web:http/TCP", "10.96.0.10", 80,
			eps(ep("10.244.1.5:8080", true), ep("10.244.2.7:8080", false), ep("10.244.2.9:8080", false)))}, nil},
		{"affinity's timeout changes", []*proxy.ServicePort{port("default/sticky:/TCP", "10.96.0.50", 80,
			sticky.InternalEndpoints, affinity(time.Hour), nodePort(30050))}, nil},
		{"the load balancer loses its endpoints", []*proxy.ServicePort{port("default/lb:/TCP", "10.96.0.30", 443, nil,
			nodePort(30443), loadBalancer("198.51.100.100"), sourceRanges("203.0.113.0/25", "192.0.2.0/24"), externalIPs("198.51.100.1"))}, nil},
		{"the load balancer's ranges come to include the node", []*proxy.ServicePort{port("default/lb:/TCP", "10.96.0.30", 443,
			lb.ExternalEndpoints, nodePort(30443), loadBalancer("198.51.100.100", "198.51.100.102"),
			sourceRanges("203.0.113.0/25", "192.168.0.0/24"), externalIPs("198.51.100.1"))}, nil},
		{"an IPv6 load balancer's ranges include the node", []*proxy.ServicePort{port("default/lb6:/TCP", "fd00:96::30", 443,
			eps(ep("[fd00:244:1::5]:8080", true)), loadBalancer("2001:db8:100::100"), sourceRanges("fd00:1::/64"))}, nil},
		{"a service is removed", nil, []*proxy.ServicePort{web}},
		{"the service comes back", []*proxy.ServicePort{web}, nil},
		{"the load balancer gets its endpoints back", []*proxy.ServicePort{lb}, nil},
	}
	for _, step := range steps {
		now = now.Add(2 * staleChainDelay)
		s = without(with(s, step.ports...), step.drop...)
		sync(proxy.Update{State: s, Changed: changed(append(step.ports, step.drop...)...)})
		if _, err := nftList(ns); err != nil {
			t.Fatalf("after %s: %v", step.name, err)
		}
	}
	now = now.Add(2 * staleChainDelay)
	sync(proxy.Update{State: s, Full: true})

	// A new backend (a restart) keeps the table it finds: it is the one
	// it would write.
	b, err = newKernelBackend(ns, testOptions)
	if err != nil {
		t.Fatal(err)
	}
	sync(proxy.Update{State: s, Full: true})
	listing, err := nftList(ns)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"chain svc-default/web/tcp/80/http-v4",
		"chain pick-2-tcp-v4",
		"10.96.0.10 . 80 . 1 : 10.244.2.7 . 8080",
		"set aff-default/sticky/tcp/80-v4/10.244.1.5/8080",
		"timeout 1h",
		"ip6 saddr 2001:db8:100::100 return",
	} {
		if !strings.Contains(listing, want) {
			t.Errorf("the table lacks %q:\n%s", want, listing)
		}
	}
	var got []byte
	err = nsexec.Do(ns, func() (err error) {
		got, err = exec.Command("nft", "list", "table", "ip", "other").CombinedOutput()
		return err
	})
	if err != nil || string(got) != other {
		t.Errorf("the other table changed: %v\n%s", err, got)
	}
}

func key(s string, fam proxy.IPFamily) proxy.ServicePortKey {
	ip := "10.96.0.1"
	if fam == proxy.IPv6 {
		ip = "fd00:96::1"
	}
	return port(s, ip, 1, nil).Key
}

// TestTheKernelAcceptsRandomIncrementalSyncs runs the random changes of
// TestIncrementalSyncsMatchAFreshTable through the real nft: the Fake
// does not check that what a transaction deletes is no longer in use.
func TestTheKernelAcceptsRandomIncrementalSyncs(t *testing.T) {
	ns := newNetns(t)
	ctx := context.Background()
	b, err := newKernelBackend(ns, testOptions)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	b.now = func() time.Time { return now }
	ch := newChanges(7)
	steps := 60
	if testing.Short() {
		steps = 10
	}
	for step := range steps {
		u := ch.next()
		if step == 0 || ch.rng.IntN(15) == 0 {
			u.Full = true
		}
		if err := nsexec.Do(ns, func() error { return b.Sync(ctx, u) }); err != nil {
			t.Fatalf("step %d: %v", step, err)
		}
		now = now.Add(staleChainDelay)
	}
}
