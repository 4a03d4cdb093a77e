//go:build !windows

package apiwait

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/go-logr/logr/funcr"
)

// dialErr is what net/http returns when the dial fails with errno.
func dialErr(errno syscall.Errno) error {
	return &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", errno)}
}

// wrap returns rt with GETs held while the server is unreachable.
func wrap(rt http.RoundTripper, opts Options) http.RoundTripper {
	return &transport{next: rt, tracker: newTracker(opts)}
}

// scripted answers each request with the next error of its script, then
// with 200 OK once the script is used up.
type scripted struct {
	mu     sync.Mutex
	script []error
	calls  int
}

func (s *scripted) RoundTrip(req *http.Request) (*http.Response, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls++
	if len(s.script) > 0 {
		err := s.script[0]
		s.script = s.script[1:]
		if err != nil {
			return nil, err
		}
	}
	return &http.Response{StatusCode: http.StatusOK, Body: http.NoBody, Request: req}, nil
}

func TestTransport(t *testing.T) {
	refused, unreachable := dialErr(syscall.ECONNREFUSED), dialErr(syscall.EHOSTUNREACH)
	tlsErr := errors.New("tls: failed to verify certificate")
	for _, tc := range []struct {
		name      string
		method    string
		body      io.Reader
		script    []error
		wantErr   error
		wantCalls int
	}{
		{name: "a GET to a refusing server is sent again until it gets through",
			method: http.MethodGet, script: []error{refused, refused, refused}, wantCalls: 4},
		{name: "a GET to an unreachable host is sent again until it gets through",
			method: http.MethodGet, script: []error{unreachable, refused}, wantCalls: 3},
		{name: "a GET that reaches the server first time is sent once",
			method: http.MethodGet, wantCalls: 1},
		{name: "a POST to a refusing server fails at once",
			method: http.MethodPost, body: strings.NewReader("{}"), script: []error{refused}, wantErr: refused, wantCalls: 1},
		{name: "a PATCH to a refusing server fails at once",
			method: http.MethodPatch, body: strings.NewReader("{}"), script: []error{refused}, wantErr: refused, wantCalls: 1},
		{name: "a GET failing for another reason fails at once",
			method: http.MethodGet, script: []error{tlsErr}, wantErr: tlsErr, wantCalls: 1},
		{name: "a GET that gets through, then fails for another reason, returns that error",
			method: http.MethodGet, script: []error{refused, tlsErr}, wantErr: tlsErr, wantCalls: 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			inner := &scripted{script: tc.script}
			rt := wrap(inner, Options{Initial: time.Millisecond, Max: 2 * time.Millisecond})
			req, err := http.NewRequestWithContext(t.Context(), tc.method, "https://10.0.0.1:6443/api/v1/services", tc.body)
			if err != nil {
				t.Fatal(err)
			}
			resp, err := rt.RoundTrip(req)
			if !errors.Is(err, tc.wantErr) {
				t.Errorf("error %v, want %v", err, tc.wantErr)
			}
			if err == nil && resp.StatusCode != http.StatusOK {
				t.Errorf("status %d", resp.StatusCode)
			}
			if inner.calls != tc.wantCalls {
				t.Errorf("%d round trips, want %d", inner.calls, tc.wantCalls)
			}
		})
	}
}

func TestAHeldGETEndsWithItsContext(t *testing.T) {
	refused := dialErr(syscall.ECONNREFUSED)
	inner := &scripted{}
	for range 1000 {
		inner.script = append(inner.script, refused)
	}
	rt := wrap(inner, Options{Initial: time.Millisecond, Max: time.Millisecond})
	ctx, cancel := context.WithCancel(t.Context())
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "https://10.0.0.1:6443/api/v1/services?watch=true", nil)
	done := make(chan error)
	go func() {
		_, err := rt.RoundTrip(req)
		done <- err
	}()
	cancel()
	if err := <-done; !errors.Is(err, syscall.ECONNREFUSED) {
		t.Errorf("a cancelled held GET returned %v, want the dial error", err)
	}
}

func TestAnOutageIsLoggedWhenItStartsAndWhenItEnds(t *testing.T) {
	var mu sync.Mutex
	var lines []string
	logger := funcr.New(func(prefix, args string) {
		mu.Lock()
		defer mu.Unlock()
		lines = append(lines, args)
	}, funcr.Options{})
	refused := dialErr(syscall.ECONNREFUSED)
	inner := &scripted{script: []error{refused, refused, refused, nil, refused, refused}}
	rt := wrap(inner, Options{Initial: time.Millisecond, Max: time.Millisecond, Logger: logger})
	for range 2 {
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, "https://10.0.0.1:6443/api", nil)
		if _, err := rt.RoundTrip(req); err != nil {
			t.Fatal(err)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	var down, up int
	for _, l := range lines {
		switch {
		case strings.Contains(l, "API server unreachable"):
			down++
		case strings.Contains(l, "API server reachable again"):
			up++
		}
	}
	if down != 2 || up != 2 {
		t.Errorf("logged %d outages and %d returns for two outages:\n%s", down, up, strings.Join(lines, "\n"))
	}
}

func TestUnreachable(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{nil, false},
		{dialErr(syscall.ECONNREFUSED), true},
		{dialErr(syscall.ENETUNREACH), true},
		{dialErr(syscall.EHOSTUNREACH), true},
		{dialErr(syscall.ECONNRESET), false},
		{dialErr(syscall.ETIMEDOUT), false},
		{io.ErrUnexpectedEOF, false},
	} {
		if got := Unreachable(tc.err); got != tc.want {
			t.Errorf("Unreachable(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
}
