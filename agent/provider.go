package agent

import (
	"context"
	"errors"
	"net/netip"

	"github.com/nodenet/nodenet/agent/status"
	"github.com/nodenet/nodenet/config"
	"github.com/nodenet/nodenet/overlay"
)

// The Agent is the local API's provider.
var _ status.Provider = (*Agent)(nil)

// Status implements status.Provider.
func (a *Agent) Status(ctx context.Context) status.Status {
	a.mu.Lock()
	rt := a.rt
	a.mu.Unlock()
	cfg := a.cfg
	st := status.Status{
		NodeName:  cfg.NodeName,
		Dataplane: string(a.opts.Dataplane),
		Version:   a.version,
		StartedAt: rt.started,
		Network: status.NetworkStatus{
			Mode: string(cfg.Network.Mode),
			Name: cfg.Network.Name,
		},
		CNI: status.CNIStatus{
			SocketPath:    cfg.CNI.SocketPath,
			ConflistPath:  conflistPath(cfg.CNI.ConfDir, cfg.CNI.ConflistName),
			Ready:         rt.cniReady,
			OrphanRelease: a.orphanReleaseStatus(rt.sandboxes),
		},
		Proxy: status.ProxyStatus{
			Backend: a.opts.Dataplane.ProxyBackend(),
			DSR:     cfg.Proxy.EnableDSR,
			Source:  a.source.String(),
		},
	}
	if v := cfg.Network.VXLAN; v != nil && cfg.Network.Mode == config.NetworkModeOverlay {
		st.Network.VNI, st.Network.Port = int(v.VNI), int(v.Port)
	}
	if rt.ctrl != nil {
		err := rt.ctrl.Ready()
		st.Network.Ready = err == nil
		if err != nil {
			st.Network.Reason, st.Network.Message = notReadyReason(err), err.Error()
		}
		st.Network.RemoteNodes = len(rt.ctrl.Remotes())
	} else {
		st.Network.Reason, st.Network.Message = "Starting", "the dataplane is being built"
	}
	if local := rt.local; local != nil {
		st.Network.Name, st.Network.ID = local.Name, local.ID
		for _, p := range local.PodCIDRs {
			st.Network.PodCIDRs = append(st.Network.PodCIDRs, p.String())
		}
		st.Network.NodeIP = addrString(local.NodeIP)
		st.Network.SourceVIP = addrString(local.SourceVIP)
	}
	if p := rt.proxier; p != nil {
		st.Proxy.Running = true
		st.Proxy.Syncs = p.Syncs()
		if s := p.State(); s != nil {
			st.Proxy.ServicePorts = len(s.ServicePorts)
		}
	}
	if rt.dp != nil && rt.dp.hnsStatus != nil {
		st.HNS = rt.dp.hnsStatus(ctx)
	}
	if h := rt.health; h != nil {
		healthy, last := h.Health()
		st.Proxy.Healthy = healthy
		if st.Proxy.Syncs > 0 {
			st.Proxy.LastSync = last
		}
	}
	return st
}

// Services implements status.Provider.
func (a *Agent) Services(context.Context) status.Services {
	a.mu.Lock()
	p := a.rt.proxier
	a.mu.Unlock()
	if p == nil {
		return ServicesOf(nil)
	}
	return ServicesOf(p.State())
}

// Dump implements status.Provider.
func (a *Agent) Dump(ctx context.Context) (status.Dump, error) {
	a.mu.Lock()
	dp := a.rt.dp
	a.mu.Unlock()
	if dp == nil {
		return status.Dump{}, errors.New("the dataplane is not built yet")
	}
	sections, err := dp.dump(ctx)
	if err != nil {
		return status.Dump{}, err
	}
	return status.Dump{Dataplane: string(a.opts.Dataplane), Sections: sections}, nil
}

// notReadyReason is the NetworkUnavailable reason the controller sets for
// err, as far as the error says.
func notReadyReason(err error) string {
	switch {
	case overlay.IsMismatch(err):
		return overlay.ReasonNetworkMismatch
	case overlay.IsSpecError(err):
		return overlay.ReasonInvalidNetworkConfig
	}
	return "NotReady"
}

func addrString(a netip.Addr) string {
	if !a.IsValid() {
		return ""
	}
	return a.String()
}
