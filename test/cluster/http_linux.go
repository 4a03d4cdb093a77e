package cluster

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/netip"
	"strings"
	"time"

	"github.com/nodenet/nodenet/test/netnode"
)

// RequestTimeout bounds one Get.
const RequestTimeout = 2 * time.Second

// ServeHTTP serves HTTP on port inside pod until t's cleanup, answering
// every request with "<pod name> <client address>": which backend a
// service picked, and the source address it saw.
func ServeHTTP(t netnode.TB, pod *netnode.Pod, port int) {
	t.Helper()
	l, err := pod.Listen(port)
	if err != nil {
		t.Fatalf("cluster: listen in pod %s: %v", pod.Name, err)
	}
	srv := &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			client, _ := netip.ParseAddrPort(r.RemoteAddr)
			fmt.Fprintf(w, "%s %s\n", pod.Name, client.Addr().Unmap())
		}),
		ReadHeaderTimeout: RequestTimeout,
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = srv.Serve(l)
	}()
	t.Cleanup(func() {
		srv.Close()
		<-done
	})
}

// Answer is what a ServeHTTP backend said.
type Answer struct {
	// Backend is the pod that answered.
	Backend string
	// Client is the source address the backend saw.
	Client netip.Addr
}

func (a Answer) String() string { return a.Backend + " (saw " + a.Client.String() + ")" }

// Get sends one HTTP GET over a new TCP connection from inside from to
// dst and reads the answer. A nil from is the host: the root namespace,
// on the underlay at Env.HostIP, outside the cluster.
func Get(ctx context.Context, from *netnode.NS, dst netip.AddrPort) (Answer, error) {
	ctx, cancel := context.WithTimeout(ctx, RequestTimeout)
	defer cancel()
	where := "host"
	if from != nil {
		where = from.Name
	}
	tr := netnode.HTTPTransport(from, dst)
	defer tr.CloseIdleConnections()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+dst.String()+"/", nil)
	if err != nil {
		return Answer{}, err
	}
	resp, err := (&http.Client{Transport: tr}).Do(req)
	if err != nil {
		return Answer{}, fmt.Errorf("GET from %s to %s: %w", where, dst, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1024))
	if err != nil {
		return Answer{}, fmt.Errorf("GET from %s to %s: %w", where, dst, err)
	}
	if resp.StatusCode != http.StatusOK {
		return Answer{}, fmt.Errorf("GET from %s to %s: %s", where, dst, resp.Status)
	}
	name, client, ok := strings.Cut(strings.TrimSpace(string(body)), " ")
	addr, perr := netip.ParseAddr(client)
	if !ok || perr != nil {
		return Answer{}, fmt.Errorf("GET from %s to %s: bad answer %q", where, dst, body)
	}
	return Answer{Backend: name, Client: addr}, nil
}

// GetEventually retries Get until it answers: the first packets after a
// change may race the agents programming it.
func GetEventually(ctx context.Context, from *netnode.NS, dst netip.AddrPort) (Answer, error) {
	var a Answer
	err := netnode.Eventually(ctx, Converge, func(ctx context.Context) (err error) {
		a, err = Get(ctx, from, dst)
		return err
	})
	return a, err
}

// Spread sends GETs from from to dst until every backend in want has
// answered (at most 100 attempts, retrying failures as convergence) and
// returns how many times each backend answered; an unknown backend, or
// one in want missing, is an error.
func Spread(ctx context.Context, from *netnode.NS, dst netip.AddrPort, want ...string) (map[string]int, error) {
	seen := map[string]int{}
	missing := func() []string {
		var m []string
		for _, w := range want {
			if seen[w] == 0 {
				m = append(m, w)
			}
		}
		return m
	}
	var lastErr error
	for i := 0; i < 100 && len(missing()) > 0; i++ {
		a, err := Get(ctx, from, dst)
		if err != nil {
			lastErr = err
			if ctx.Err() != nil {
				break
			}
			time.Sleep(100 * time.Millisecond)
			continue
		}
		known := false
		for _, w := range want {
			known = known || w == a.Backend
		}
		if !known {
			return seen, fmt.Errorf("%s answered %s, want one of %v", dst, a.Backend, want)
		}
		seen[a.Backend]++
	}
	if m := missing(); len(m) > 0 {
		return seen, errors.Join(fmt.Errorf("%s: backends %v never answered (answers %v)", dst, m, seen), lastErr)
	}
	return seen, nil
}

// AddrPort is ip:port.
func AddrPort(ip string, port int32) netip.AddrPort {
	a, _ := netip.ParseAddr(ip)
	return netip.AddrPortFrom(a, uint16(port))
}
