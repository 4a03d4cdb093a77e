package status

import (
	"context"
	"errors"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// srvProvider is a Provider with fixed answers.
type srvProvider struct {
	dumpErr error
}

func (srvProvider) Status(context.Context) Status {
	return Status{NodeName: "node-a", Dataplane: "sim", Network: NetworkStatus{Mode: "overlay", Ready: true}}
}

func (srvProvider) Services(context.Context) Services {
	return Services{Ports: []ServicePort{{Name: "default/web:http/TCP", Family: "IPv4", ClusterIP: "10.96.0.10", Port: 80}}}
}

func (p srvProvider) Dump(context.Context) (Dump, error) {
	if p.dumpErr != nil {
		return Dump{}, p.dumpErr
	}
	return Dump{Dataplane: "sim", Sections: []Section{{Title: "HNS (simulated)", Text: "Networks:\n"}}}, nil
}

// srvStart serves p on a socket Listen opened in a fresh short directory.
func srvStart(t *testing.T, p Provider) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "srv")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	path := filepath.Join(dir, SocketName)
	l, err := Listen(path)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Serve(ctx, l, NewHandler(p)) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	return path
}

func TestTheServerAnswersWhatTheClientReads(t *testing.T) {
	path := srvStart(t, srvProvider{})
	c := NewClient(path)
	ctx := t.Context()
	st, err := c.Status(ctx)
	if err != nil || st.NodeName != "node-a" || !st.Network.Ready {
		t.Errorf("Status = %+v, %v", st, err)
	}
	svcs, err := c.Services(ctx)
	if err != nil || len(svcs.Ports) != 1 || svcs.Ports[0].ClusterIP != "10.96.0.10" {
		t.Errorf("Services = %+v, %v", svcs, err)
	}
	d, err := c.Dump(ctx)
	if err != nil || len(d.Sections) != 1 || d.Sections[0].Title != "HNS (simulated)" {
		t.Errorf("Dump = %+v, %v", d, err)
	}
}

func TestAFailedDumpIsAnErrorTheClientShows(t *testing.T) {
	path := srvStart(t, srvProvider{dumpErr: errors.New("nft: command not found")})
	_, err := NewClient(path).Dump(t.Context())
	if err == nil || !strings.Contains(err.Error(), "nft: command not found") {
		t.Errorf("Dump error %v, want the agent's message", err)
	}
}

func TestOnlyGETIsServed(t *testing.T) {
	path := srvStart(t, srvProvider{})
	hc := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", path)
	}}}
	resp, err := hc.Post("http://agent"+PathStatus, "application/json", strings.NewReader("{}"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("POST %s: %s, want 405", PathStatus, resp.Status)
	}
}

func TestListen(t *testing.T) {
	t.Run("the socket is the agent's user's alone", func(t *testing.T) {
		path := srvStart(t, srvProvider{})
		fi, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		// Windows has no modes: the CNI server's directory ACL does it.
		if perm := fi.Mode().Perm(); runtime.GOOS != "windows" && perm != 0o600 {
			t.Errorf("socket mode %v, want 0600", perm)
		}
	})
	t.Run("a second agent on a live socket is refused", func(t *testing.T) {
		path := srvStart(t, srvProvider{})
		if l, err := Listen(path); err == nil {
			l.Close()
			t.Fatal("Listen on a live socket succeeded")
		} else if !strings.Contains(err.Error(), "second nodenet agent") {
			t.Errorf("error %q does not say why", err)
		}
	})
	t.Run("a stale socket from an earlier agent is replaced", func(t *testing.T) {
		dir, err := os.MkdirTemp("", "srv")
		if err != nil {
			t.Fatal(err)
		}
		defer os.RemoveAll(dir)
		path := filepath.Join(dir, SocketName)
		old, err := Listen(path)
		if err != nil {
			t.Fatal(err)
		}
		old.Close() // the file stays: SetUnlinkOnClose(false)
		l, err := Listen(path)
		if err != nil {
			t.Fatalf("Listen over a stale socket: %v", err)
		}
		l.Close()
	})
	t.Run("a file that is not a socket is left alone", func(t *testing.T) {
		dir, err := os.MkdirTemp("", "srv")
		if err != nil {
			t.Fatal(err)
		}
		defer os.RemoveAll(dir)
		path := filepath.Join(dir, SocketName)
		if err := os.WriteFile(path, []byte("keep"), 0o600); err != nil {
			t.Fatal(err)
		}
		if l, err := Listen(path); err == nil {
			l.Close()
			t.Fatal("Listen replaced a regular file")
		}
		if data, _ := os.ReadFile(path); string(data) != "keep" {
			t.Error("the file was changed")
		}
	})
}
