package apiserver

import (
	"context"
	"errors"
	"fmt"
)

// StopAPIServer kills kube-apiserver and leaves etcd, and so every object,
// as it is: an API outage. Clients get connection refused until
// StartAPIServer. Calling it again does nothing.
func (s *Server) StopAPIServer() {
	s.apiserver.stop()
}

// StartAPIServer runs kube-apiserver again after StopAPIServer, on the
// same address and port with the same certificate, token and etcd, so
// existing clients and kubeconfigs reconnect on their own. It returns
// once /readyz answers. Each run logs to its own file in Dir.
func (s *Server) StartAPIServer(ctx context.Context) error {
	select {
	case <-s.apiserver.done:
	default:
		return errors.New("kube-apiserver is running; StopAPIServer first")
	}
	s.restarts++
	p, _, err := s.launchAPIServer(ctx, s.bins.kubeAPIServer, s.opts, fmt.Sprintf("kube-apiserver.%d.log", s.restarts))
	if p != nil {
		s.apiserver = p
	}
	if err != nil {
		return fmt.Errorf("restart kube-apiserver: %w", err)
	}
	return nil
}
