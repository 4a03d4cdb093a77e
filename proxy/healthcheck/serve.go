package healthcheck

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"time"

	"k8s.io/klog/v2"
)

// readHeaderTimeout bounds how long a client may take to send its request
// headers, so stuck probers can't pile up connections.
const readHeaderTimeout = 10 * time.Second

// shutdownTimeout bounds how long Serve waits for in-flight requests once
// its context is done.
const shutdownTimeout = 5 * time.Second

// Serve listens on addr (host:port, e.g. "0.0.0.0:10256") and serves handler
// until ctx is done, then shuts down and returns nil. An empty addr or port 0
// means the server is disabled: Serve returns nil at once. Errors are
// returned, not logged.
func Serve(ctx context.Context, addr string, handler http.Handler, logger klog.Logger) error {
	if addr == "" {
		return nil
	}
	_, portStr, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("invalid address %q: %w", addr, err)
	}
	port, err := strconv.ParseUint(portStr, 10, 16)
	if err != nil {
		return fmt.Errorf("invalid port in address %q: %w", addr, err)
	}
	if logger.GetSink() == nil {
		logger = klog.Background()
	}
	if port == 0 {
		logger.V(2).Info("HTTP server disabled", "address", addr)
		return nil
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", addr, err)
	}
	logger.V(2).Info("Serving HTTP", "address", ln.Addr().String())
	return serveListener(ctx, ln, handler)
}

// serveListener serves on ln until ctx is done, and closes ln.
func serveListener(ctx context.Context, ln net.Listener, handler http.Handler) error {
	srv := &http.Server{Handler: handler, ReadHeaderTimeout: readHeaderTimeout}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()

	select {
	case err := <-done:
		return fmt.Errorf("serve on %s: %w", ln.Addr(), err)
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), shutdownTimeout)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		// Requests still running after the grace period are cut off.
		_ = srv.Close()
	}
	if err := <-done; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("serve on %s: %w", ln.Addr(), err)
	}
	return nil
}
