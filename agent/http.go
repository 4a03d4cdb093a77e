package agent

import (
	"context"
	"fmt"
	"net/http"
	"strings"

	"k8s.io/klog/v2"

	"github.com/nodenet/nodenet/proxy/healthcheck"
)

// PathReadyz answers 200 once the node network is ready, the CNI server
// has it and the proxy has synced at least once; 503 with the reasons
// before.
const PathReadyz = "/readyz"

// healthHandler serves kube-proxy's /healthz and /livez (the proxy's
// health) and the agent's /readyz.
func (a *Agent) healthHandler(h *healthcheck.ProxyHealth) http.Handler {
	mux := http.NewServeMux()
	ph := h.Handler()
	mux.Handle("/healthz", ph)
	mux.Handle("/livez", ph)
	mux.HandleFunc(PathReadyz, func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		if problems := a.notReady(); len(problems) > 0 {
			w.WriteHeader(http.StatusServiceUnavailable)
			fmt.Fprintf(w, "not ready: %s\n", strings.Join(problems, "; "))
			return
		}
		fmt.Fprintln(w, "ok")
	})
	return mux
}

// notReady lists what keeps the agent from being ready; empty when ready.
func (a *Agent) notReady() []string {
	a.mu.Lock()
	rt := a.rt
	a.mu.Unlock()
	var out []string
	switch {
	case rt.ctrl == nil:
		out = append(out, "network: starting")
	case rt.ctrl.Ready() != nil:
		out = append(out, "network: "+rt.ctrl.Ready().Error())
	}
	if !rt.cniReady {
		out = append(out, "cni: waiting for the network")
	}
	switch {
	case rt.proxier == nil:
		out = append(out, "proxy: not started")
	case rt.proxier.Syncs() == 0:
		out = append(out, "proxy: not synced yet")
	}
	return out
}

// serveHTTP serves h on addr until ctx ends; an empty address or port 0
// disables it.
func serveHTTP(ctx context.Context, addr string, h http.Handler, log klog.Logger) error {
	if err := healthcheck.Serve(ctx, addr, h, log); err != nil {
		return err
	}
	<-ctx.Done()
	return nil
}
