package status

import (
	"context"

	"github.com/nodenet/nodenet/hns"
)

// ReadHNS reads h's version and the host's Windows build for the local
// API: the features nodenet decides on, each with the HNS versions that
// have it, and the backends per load balancer the proxy applies (override,
// the config's windows.maxBackendsPerLoadBalancer, when set; else what the
// host's build takes). A version that cannot be read (HNS restarting) is
// reported in Error, not hidden.
func ReadHNS(ctx context.Context, h hns.Interface, override int, simulated bool) *HNSStatus {
	st := &HNSStatus{Simulated: simulated}
	if b, err := h.OSBuild(ctx); err != nil {
		st.Error = err.Error()
	} else {
		st.WindowsBuild = b.String()
		st.HostMaxBackendsPerLoadBalancer = hns.MaxBackendsPerLoadBalancer(b)
		st.MaxBackendsPerLoadBalancer = st.HostMaxBackendsPerLoadBalancer
	}
	if override > 0 {
		st.MaxBackendsPerLoadBalancer = override
	}
	v, err := h.Version(ctx)
	if err != nil {
		st.Error = err.Error()
		return st
	}
	st.Version = v.String()
	f := hns.FeaturesFor(v)
	for _, name := range hns.AllFeatures {
		st.Features = append(st.Features, HNSFeature{
			Name: string(name), Supported: f.Has(name), Versions: hns.SupportedVersions(name).String(),
		})
	}
	return st
}
