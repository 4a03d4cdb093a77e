package healthcheck

import (
	"errors"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/nodenet/nodenet/proxy"
)

var (
	svcA = types.NamespacedName{Namespace: "default", Name: "a"}
	svcB = types.NamespacedName{Namespace: "default", Name: "b"}
	svcC = types.NamespacedName{Namespace: "other", Name: "c"}
)

var loopback = []netip.Addr{netip.MustParseAddr("127.0.0.1")}

// listenLog wraps net.Listen and records every call.
type listenLog struct {
	mu    sync.Mutex
	calls []string // "network addr"
	fail  map[string]error
	// open are the listeners handed out, to check they get closed.
	open []net.Listener
}

func (l *listenLog) listen(network, addr string) (net.Listener, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.calls = append(l.calls, network+" "+addr)
	if err := l.fail[addr]; err != nil {
		return nil, err
	}
	ln, err := net.Listen(network, addr)
	if err == nil {
		l.open = append(l.open, ln)
	}
	return ln, err
}

func (l *listenLog) takeCalls() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	c := l.calls
	l.calls = nil
	return c
}

func newServiceHealth(t *testing.T, opts ServiceHealthOptions) *ServiceHealth {
	t.Helper()
	if opts.Addresses == nil {
		opts.Addresses = loopback
	}
	s := NewServiceHealth(opts)
	t.Cleanup(s.Close)
	return s
}

var client = &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}

type answer struct {
	code   int
	body   string
	weight string
	ctype  string
	nosnif string
}

func probe(t *testing.T, port uint16) (answer, error) {
	t.Helper()
	resp, err := client.Get("http://" + addrOf(port) + "/")
	if err != nil {
		return answer{}, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return answer{
		code:   resp.StatusCode,
		body:   string(body),
		weight: resp.Header.Get("X-Load-Balancing-Endpoint-Weight"),
		ctype:  resp.Header.Get("Content-Type"),
		nosnif: resp.Header.Get("X-Content-Type-Options"),
	}, nil
}

func mustProbe(t *testing.T, port uint16) answer {
	t.Helper()
	a, err := probe(t, port)
	if err != nil {
		t.Fatalf("probe port %d: %v", port, err)
	}
	return a
}

func TestHealthCheckPortsAnswerLikeKubeProxy(t *testing.T) {
	stale := func() *ProxyHealth {
		clk := clocktesting.NewFakeClock(t0)
		h := NewProxyHealth(ProxyHealthOptions{Clock: clk, HealthTimeout: timeout})
		h.Updated(proxy.IPv4)
		h.QueuedUpdate(proxy.IPv4)
		clk.Step(timeout)
		return h
	}
	tests := []struct {
		name        string
		proxyHealth *ProxyHealth
		counts      map[types.NamespacedName]int
		want        answer
	}{
		{
			name:   "local endpoints and no proxy health to ask answer 200",
			counts: map[types.NamespacedName]int{svcA: 2},
			want:   answer{code: 200, weight: "2", body: "{\n\t\"service\": {\n\t\t\"namespace\": \"default\",\n\t\t\"name\": \"a\"\n\t},\n\t\"localEndpoints\": 2,\n\t\"serviceProxyHealthy\": true\n}"},
		},
		{
			name:        "local endpoints and a healthy proxy answer 200",
			proxyHealth: NewProxyHealth(ProxyHealthOptions{}),
			counts:      map[types.NamespacedName]int{svcA: 1, svcB: 5},
			want:        answer{code: 200, weight: "1", body: "{\n\t\"service\": {\n\t\t\"namespace\": \"default\",\n\t\t\"name\": \"a\"\n\t},\n\t\"localEndpoints\": 1,\n\t\"serviceProxyHealthy\": true\n}"},
		},
		{
			name:   "no local endpoints answer 503",
			counts: map[types.NamespacedName]int{svcB: 3},
			want:   answer{code: 503, weight: "0", body: "{\n\t\"service\": {\n\t\t\"namespace\": \"default\",\n\t\t\"name\": \"a\"\n\t},\n\t\"localEndpoints\": 0,\n\t\"serviceProxyHealthy\": true\n}"},
		},
		{
			name:        "an unhealthy proxy answers 503 even with local endpoints",
			proxyHealth: stale(),
			counts:      map[types.NamespacedName]int{svcA: 4},
			want:        answer{code: 503, weight: "4", body: "{\n\t\"service\": {\n\t\t\"namespace\": \"default\",\n\t\t\"name\": \"a\"\n\t},\n\t\"localEndpoints\": 4,\n\t\"serviceProxyHealthy\": false\n}"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newServiceHealth(t, ServiceHealthOptions{ProxyHealth: tt.proxyHealth})
			port := freePort(t)
			if err := s.SyncServices(map[types.NamespacedName]uint16{svcA: port}); err != nil {
				t.Fatal(err)
			}
			if err := s.SyncEndpoints(tt.counts); err != nil {
				t.Fatal(err)
			}
			want := tt.want
			want.ctype, want.nosnif = "application/json", "nosniff"
			if diff := cmp.Diff(want, mustProbe(t, port), cmp.AllowUnexported(answer{})); diff != "" {
				t.Errorf("answer (-want +got):\n%s", diff)
			}
		})
	}
}

func TestSyncServicesOpensNewPortsClosesOldOnesAndKeepsTheRest(t *testing.T) {
	log := &listenLog{}
	s := newServiceHealth(t, ServiceHealthOptions{Listen: log.listen})
	pa, pb, pb2, pc := freePort(t), freePort(t), freePort(t), freePort(t)
	counts := map[types.NamespacedName]int{svcA: 1, svcB: 2, svcC: 3}
	if err := s.SyncEndpoints(counts); err != nil {
		t.Fatal(err)
	}

	if err := s.SyncServices(map[types.NamespacedName]uint16{svcA: pa, svcB: pb}); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"tcp4 " + addrOf(pa), "tcp4 " + addrOf(pb)}, log.takeCalls()); diff != "" {
		t.Errorf("first sync listened (-want +got):\n%s", diff)
	}

	// a stays, b moves to another port, c is new.
	if err := s.SyncServices(map[types.NamespacedName]uint16{svcA: pa, svcB: pb2, svcC: pc}); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"tcp4 " + addrOf(pb2), "tcp4 " + addrOf(pc)}, log.takeCalls()); diff != "" {
		t.Errorf("second sync listened (-want +got):\n%s", diff)
	}
	for port, want := range map[uint16]string{pa: "1", pb2: "2", pc: "3"} {
		if got := mustProbe(t, port).weight; got != want {
			t.Errorf("port %d answers weight %s, want %s", port, got, want)
		}
	}
	if _, err := probe(t, pb); err == nil {
		t.Errorf("b's old port %d still answers", pb)
	}

	// Everything but c goes away.
	if err := s.SyncServices(map[types.NamespacedName]uint16{svcC: pc}); err != nil {
		t.Fatal(err)
	}
	if calls := log.takeCalls(); len(calls) != 0 {
		t.Errorf("third sync listened again: %v", calls)
	}
	for _, port := range []uint16{pa, pb2} {
		if _, err := probe(t, port); err == nil {
			t.Errorf("removed port %d still answers", port)
		}
	}
	if got := mustProbe(t, pc).code; got != 200 {
		t.Errorf("c answers %d, want 200", got)
	}
}

func TestAPortThatFailsToBindIsReportedAndRetriedWithoutStoppingTheOthers(t *testing.T) {
	busy, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	pBusy := uint16(busy.Addr().(*net.TCPAddr).Port)
	pFree := freePort(t)

	s := newServiceHealth(t, ServiceHealthOptions{})
	if err := s.SyncEndpoints(map[types.NamespacedName]int{svcA: 1, svcB: 1}); err != nil {
		t.Fatal(err)
	}
	ports := map[types.NamespacedName]uint16{svcA: pBusy, svcB: pFree}
	err = s.SyncServices(ports)
	if err == nil || !strings.Contains(err.Error(), "default/a") || !strings.Contains(err.Error(), strconv.Itoa(int(pBusy))) {
		t.Fatalf("SyncServices = %v, want an error naming default/a and port %d", err, pBusy)
	}
	if got := mustProbe(t, pFree).code; got != 200 {
		t.Errorf("b answers %d, want 200", got)
	}

	busy.Close()
	if err := s.SyncServices(ports); err != nil {
		t.Fatalf("retry after the port was freed: %v", err)
	}
	if got := mustProbe(t, pBusy).code; got != 200 {
		t.Errorf("a answers %d after the retry, want 200", got)
	}
}

func TestAFailedBindClosesTheServicesOtherListeners(t *testing.T) {
	port := freePort(t)
	// The IPv6 bind fails by injection, so the host needs no IPv6.
	log := &listenLog{fail: map[string]error{
		net.JoinHostPort("::1", strconv.Itoa(int(port))): errors.New("injected failure"),
	}}
	s := newServiceHealth(t, ServiceHealthOptions{
		Addresses: []netip.Addr{netip.MustParseAddr("127.0.0.1"), netip.MustParseAddr("::1")},
		Listen:    log.listen,
	})

	if err := s.SyncServices(map[types.NamespacedName]uint16{svcA: port}); err == nil || !strings.Contains(err.Error(), "injected failure") {
		t.Fatalf("SyncServices = %v, want the injected failure", err)
	}
	if len(log.open) != 1 {
		t.Fatalf("%d listeners opened, want 1 (the IPv4 one)", len(log.open))
	}
	if _, err := probe(t, port); err == nil {
		t.Error("the IPv4 listener still answers after its sibling failed")
	}
}

func TestListenersFollowTheAddressesAndFamily(t *testing.T) {
	v4, v6 := netip.MustParseAddr("192.0.2.1"), netip.MustParseAddr("2001:db8::1")
	tests := []struct {
		name   string
		addrs  []netip.Addr
		family proxy.IPFamily
		want   []string
	}{
		{name: "no addresses and no family listen dual-stack on every address", want: []string{"tcp :8080"}},
		{name: "no addresses and IPv4 listen on 0.0.0.0", family: proxy.IPv4, want: []string{"tcp4 0.0.0.0:8080"}},
		{name: "no addresses and IPv6 listen on ::", family: proxy.IPv6, want: []string{"tcp6 [::]:8080"}},
		{name: "addresses listen on each, by their family", addrs: []netip.Addr{v4, v6, v4}, want: []string{"tcp4 192.0.2.1:8080", "tcp6 [2001:db8::1]:8080"}},
		{name: "a family keeps only its addresses", addrs: []netip.Addr{v4, v6}, family: proxy.IPv6, want: []string{"tcp6 [2001:db8::1]:8080"}},
		{name: "a family without addresses listens nowhere", addrs: []netip.Addr{v4}, family: proxy.IPv6, want: nil},
		{name: "mapped addresses count as IPv4", addrs: []netip.Addr{netip.MustParseAddr("::ffff:192.0.2.1")}, family: proxy.IPv4, want: []string{"tcp4 192.0.2.1:8080"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var calls []string
			s := NewServiceHealth(ServiceHealthOptions{
				Addresses: tt.addrs,
				Family:    tt.family,
				Listen: func(network, addr string) (net.Listener, error) {
					calls = append(calls, network+" "+addr)
					return net.Listen("tcp", "127.0.0.1:0")
				},
			})
			defer s.Close()
			if err := s.SyncServices(map[types.NamespacedName]uint16{svcA: 8080}); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, calls); diff != "" {
				t.Errorf("listens (-want +got):\n%s", diff)
			}
		})
	}
}

func TestCloseStopsEveryPortAndLaterSyncsFail(t *testing.T) {
	s := NewServiceHealth(ServiceHealthOptions{Addresses: loopback})
	pa, pb := freePort(t), freePort(t)
	if err := s.SyncServices(map[types.NamespacedName]uint16{svcA: pa, svcB: pb}); err != nil {
		t.Fatal(err)
	}
	mustProbe(t, pa)

	s.Close()
	for _, port := range []uint16{pa, pb} {
		if _, err := probe(t, port); err == nil {
			t.Errorf("port %d answers after Close", port)
		}
	}
	if err := s.SyncServices(map[types.NamespacedName]uint16{svcA: pa}); err == nil {
		t.Error("SyncServices after Close succeeded")
	}
}
