package agent

import (
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/nodenet/nodenet/agent/status"
	"github.com/nodenet/nodenet/cni"
	"github.com/nodenet/nodenet/cni/cri"
)

// newSandboxReconciler builds what releases the CNI server's allocations
// that no pod sandbox of the runtime at cni.runtimeEndpoint holds, after
// cni.orphanGracePeriod (see cni.SandboxReconciler). It returns nil (and a
// no-op close) when that period is 0, and on the simulator, whose pods
// are not the runtime's. It does not connect yet.
func (a *Agent) newSandboxReconciler(srv *cni.Server, reg prometheus.Registerer) (*cni.SandboxReconciler, func(), error) {
	c := a.cfg.CNI
	if a.opts.Dataplane == DataplaneSim || c.OrphanGracePeriod == nil || c.OrphanGracePeriod.Duration <= 0 {
		a.log.Info("Not releasing addresses no pod sandbox holds", "dataplane", a.opts.Dataplane, "orphanGracePeriod", c.OrphanGracePeriod)
		return nil, func() {}, nil
	}
	client, err := cri.New(cri.Options{Endpoint: c.RuntimeEndpoint})
	if err != nil {
		return nil, nil, fmt.Errorf("cni.runtimeEndpoint: %w", err)
	}
	log := a.log.WithValues("runtimeEndpoint", c.RuntimeEndpoint)
	r, err := cni.NewReconciler(cni.ReconcilerOptions{
		Server:      srv,
		Sandboxes:   client,
		GracePeriod: c.OrphanGracePeriod.Duration,
		Registerer:  reg,
		Logger:      &log,
	})
	if err != nil {
		client.Close()
		return nil, nil, err
	}
	return r, func() { client.Close() }, nil
}

// orphanReleaseStatus is the local API's view of r; nil when r is.
func (a *Agent) orphanReleaseStatus(r *cni.SandboxReconciler) *status.OrphanReleaseStatus {
	if r == nil {
		return nil
	}
	s := r.Status()
	out := &status.OrphanReleaseStatus{
		RuntimeEndpoint: a.cfg.CNI.RuntimeEndpoint,
		GracePeriod:     s.GracePeriod.String(),
		Interval:        s.Interval.String(),
		LastRun:         s.LastRun,
		LastError:       s.LastError,
		Sandboxes:       s.Sandboxes,
		Released:        s.Released,
	}
	for _, rel := range s.LastReleased {
		out.LastReleased = append(out.LastReleased, status.ReleasedAttachment{
			ContainerID: rel.ContainerID,
			IfName:      rel.IfName,
			IPs:         addrStrings(rel.IPs),
			Age:         rel.Released.Sub(rel.Allocated).Round(time.Second).String(),
			Released:    rel.Released,
		})
	}
	return out
}
