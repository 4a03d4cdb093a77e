package healthcheck

import (
	"context"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"k8s.io/klog/v2"
)

// freePort returns a TCP port on 127.0.0.1 that was free a moment ago.
func freePort(t *testing.T) uint16 {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return uint16(ln.Addr().(*net.TCPAddr).Port)
}

func addrOf(port uint16) string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(int(port))) }

func TestServeIsDisabledByAnEmptyAddressOrPortZero(t *testing.T) {
	for _, addr := range []string{"", "0.0.0.0:0", "[::]:0", "127.0.0.1:0"} {
		// Serve would block if it served: returning at all is the check.
		if err := Serve(context.Background(), addr, http.NotFoundHandler(), klog.Logger{}); err != nil {
			t.Errorf("Serve(%q) = %v, want nil", addr, err)
		}
	}
}

func TestServeRejectsBadAddresses(t *testing.T) {
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()

	tests := []struct {
		name    string
		addr    string
		wantErr string
	}{
		{name: "an address without a port is invalid", addr: "127.0.0.1", wantErr: "invalid address"},
		{name: "a port beyond 65535 is invalid", addr: "127.0.0.1:70000", wantErr: "invalid port"},
		{name: "a port in use fails to listen", addr: busy.Addr().String(), wantErr: "listen on"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := Serve(context.Background(), tt.addr, http.NotFoundHandler(), klog.Logger{})
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("Serve(%q) = %v, want an error containing %q", tt.addr, err, tt.wantErr)
			}
		})
	}
}

func TestServeAnswersUntilItsContextEnds(t *testing.T) {
	addr := addrOf(freePort(t))
	h := NewProxyHealth(ProxyHealthOptions{})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Serve(ctx, addr, h.Handler(), klog.Logger{}) }()

	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	var resp *http.Response
	var err error
	// Serve listens in its goroutine: retry until it does.
	for range 500 {
		if resp, err = client.Get("http://" + addr + "/livez"); err == nil {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err != nil {
		t.Fatalf("GET /livez: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("/livez status %d, want 200", resp.StatusCode)
	}

	cancel()
	if err := <-done; err != nil {
		t.Errorf("Serve returned %v after its context ended, want nil", err)
	}
	if _, err := client.Get("http://" + addr + "/livez"); err == nil {
		t.Error("the address still answers after Serve returned")
	}
}
