package status

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/http"
	"os"
	"time"
)

// Provider is what the agent exposes on the local API.
type Provider interface {
	Status(ctx context.Context) Status
	Services(ctx context.Context) Services
	Dump(ctx context.Context) (Dump, error)
}

// NewHandler serves p's Status, Services and Dump as JSON on PathStatus,
// PathServices and PathDump (GET only). A failed Dump answers 500 with the
// error as text.
func NewHandler(p Provider) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET "+PathStatus, func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, p.Status(r.Context()))
	})
	mux.HandleFunc("GET "+PathServices, func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, p.Services(r.Context()))
	})
	mux.HandleFunc("GET "+PathDump, func(w http.ResponseWriter, r *http.Request) {
		d, err := p.Dump(r.Context())
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		writeJSON(w, d)
	})
	return mux
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}

// Listen opens the local API's unix socket at path, readable and writable
// by the agent's user only. Its directory must exist (it is the CNI
// socket's, which the CNI server creates and locks down). A stale socket
// from an earlier agent is replaced; a live one is an error.
func Listen(path string) (net.Listener, error) {
	if fi, err := os.Lstat(path); err == nil {
		if fi.Mode()&fs.ModeSocket == 0 {
			return nil, fmt.Errorf("%s exists and is not a socket", path)
		}
		if c, err := net.DialTimeout("unix", path, time.Second); err == nil {
			c.Close()
			return nil, fmt.Errorf("another process is serving on %s: is a second nodenet agent running on this node?", path)
		}
		if err := os.Remove(path); err != nil {
			return nil, fmt.Errorf("remove stale socket %s: %w", path, err)
		}
	} else if !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	l, err := net.Listen("unix", path)
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w", path, err)
	}
	// A new agent may already own the path when this one closes.
	l.(*net.UnixListener).SetUnlinkOnClose(false)
	if err := os.Chmod(path, 0o600); err != nil {
		l.Close()
		return nil, fmt.Errorf("restrict socket %s: %w", path, err)
	}
	return l, nil
}

// Serve answers requests on l with h until ctx ends, then shuts down,
// giving requests in flight a few seconds.
func Serve(ctx context.Context, l net.Listener, h http.Handler) error {
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(l) }()
	select {
	case err := <-done:
		return fmt.Errorf("local API: %w", err)
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		_ = srv.Close()
	}
	if err := <-done; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("local API: %w", err)
	}
	return nil
}
