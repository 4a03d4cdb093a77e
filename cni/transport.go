package cni

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"time"

	"github.com/containernetworking/cni/pkg/types"

	"github.com/nodenet/nodenet/cni/api"
)

// shutdownTimeout bounds how long Serve waits for requests in flight when
// its context ends; they are bounded by RequestTimeout anyway.
const shutdownTimeout = 30 * time.Second

// Listen opens the server's unix socket, hardened (see listenUnix).
// Listening before the network is ready lets the plugin get a clear
// "try again later" rather than "agent not reachable".
func (s *Server) Listen() (net.Listener, error) {
	return listenUnix(s.opts.SocketPath)
}

// Serve answers requests on l until ctx ends, then waits for the requests
// in flight.
func (s *Server) Serve(ctx context.Context, l net.Listener) error {
	srv := &http.Server{
		Handler:           s,
		ReadHeaderTimeout: 10 * time.Second,
		BaseContext:       func(net.Listener) context.Context { return ctx },
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		<-ctx.Done()
		shutdownCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), shutdownTimeout)
		defer cancel()
		_ = srv.Shutdown(shutdownCtx)
	}()
	err := srv.Serve(l)
	if errors.Is(err, http.ErrServerClosed) {
		<-done
		return nil
	}
	return err
}

// ServeHTTP decodes a api.Request, handles it and writes the Response. CNI
// errors travel in the body with status 200; only transport problems
// (wrong path or method, oversized or undecodable body) get other statuses,
// still with a api.Response body the plugin can print.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != api.RequestPath {
		writeResponse(w, http.StatusNotFound, &api.Response{Error: api.Errorf(types.ErrInvalidNetworkConfig, "no such path %q; requests go to %s", r.URL.Path, api.RequestPath)})
		return
	}
	if r.Method != http.MethodPost {
		writeResponse(w, http.StatusMethodNotAllowed, &api.Response{Error: api.Errorf(types.ErrInvalidNetworkConfig, "method %s not allowed; use POST", r.Method)})
		return
	}
	var req api.Request
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, s.opts.MaxRequestBytes))
	if err := dec.Decode(&req); err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			writeResponse(w, http.StatusRequestEntityTooLarge, &api.Response{Error: api.Errorf(types.ErrDecodingFailure, "request is larger than %d bytes", s.opts.MaxRequestBytes)})
			return
		}
		writeResponse(w, http.StatusBadRequest, &api.Response{Error: api.Errorf(types.ErrDecodingFailure, "request is not valid JSON: %v", err)})
		return
	}
	writeResponse(w, http.StatusOK, s.Handle(r.Context(), &req))
}

func writeResponse(w http.ResponseWriter, status int, resp *api.Response) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(resp)
}
