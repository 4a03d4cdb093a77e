package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/nodenet/nodenet/agent/status"
	"github.com/nodenet/nodenet/cni/hnsendpoint"
	"github.com/nodenet/nodenet/hns"
	"github.com/nodenet/nodenet/overlay/hnsnet"
	"github.com/nodenet/nodenet/overlay/hostroute"
	"github.com/nodenet/nodenet/proxy"
	"github.com/nodenet/nodenet/proxy/hnslb"
	"github.com/nodenet/nodenet/proxy/proxier"
)

// hnsParts are the HNS-side inputs shared by the real host and the
// simulator.
type hnsParts struct {
	hns      hns.Interface
	routes   hostroute.Interface
	adapters func(context.Context) ([]hnsnet.Adapter, error) // nil: the host's
	// simulated marks the simulator, for the local API.
	simulated bool
}

// buildHNS builds the Windows dataplane over parts: hnsnet for the
// network, hnsendpoint for pods and hnslb for the proxy.
func buildHNS(parts hnsParts, in buildInputs) (*dataplane, error) {
	network, err := hnsnet.New(hnsnet.Options{
		HNS: parts.hns, HostRoutes: parts.routes, Adapters: parts.adapters, Logger: in.logger,
	})
	if err != nil {
		return nil, fmt.Errorf("HNS network: %w", err)
	}
	wiring, err := hnsendpoint.New(hnsendpoint.Options{HNS: parts.hns})
	if err != nil {
		return nil, fmt.Errorf("HNS pod wiring: %w", err)
	}
	h := parts.hns
	return &dataplane{
		network: network,
		wiring:  wiring,
		newBackend: func(b backendInputs) (proxy.Backend, error) {
			return newHNSBackend(h, b)
		},
		dump: func(ctx context.Context) ([]status.Section, error) { return dumpHNS(ctx, h) },
		hnsStatus: func(ctx context.Context) *status.HNSStatus {
			return status.ReadHNS(ctx, h, int(in.cfg.Windows.MaxBackendsPerLoadBalancer), parts.simulated)
		},
		healthCheckPorts: true,
		close:            func() {},
	}, nil
}

// newHNSBackend is the Windows proxy backend on h, reading the network
// part live (source VIP, remote nodes).
func newHNSBackend(h hns.Interface, in backendInputs) (proxy.Backend, error) {
	opts := proxier.HNSOptions(in.cfg, in.network)
	opts.HNS = h
	opts.Recorder = in.recorder
	m := in.metrics
	opts.Observe = func(op string, err error, d time.Duration) { m.ObserveOperation("hns", op, err, d) }
	opts.Logger = in.logger
	return hnslb.New(opts)
}

// dumpHNS lists what HNS holds, each object as the JSON `hnsdiag list
// ... -d` prints, sorted by ID.
func dumpHNS(ctx context.Context, h hns.Interface) ([]status.Section, error) {
	networks, err := h.ListNetworks(ctx)
	if err != nil {
		return nil, fmt.Errorf("list HNS networks: %w", err)
	}
	endpoints, err := h.ListEndpoints(ctx, "")
	if err != nil {
		return nil, fmt.Errorf("list HNS endpoints: %w", err)
	}
	lbs, err := h.ListLoadBalancers(ctx)
	if err != nil {
		return nil, fmt.Errorf("list HNS load balancers: %w", err)
	}
	var out []status.Section
	if v, err := h.Version(ctx); err == nil {
		out = append(out, status.Section{Title: "HNS version", Text: v.String() + "\n"})
	}
	sort.Slice(networks, func(i, j int) bool { return networks[i].ID < networks[j].ID })
	sort.Slice(endpoints, func(i, j int) bool { return endpoints[i].ID < endpoints[j].ID })
	sort.Slice(lbs, func(i, j int) bool { return lbs[i].ID < lbs[j].ID })
	return append(out,
		status.Section{Title: fmt.Sprintf("HNS networks (%d)", len(networks)), Text: jsonLines(networks)},
		status.Section{Title: fmt.Sprintf("HNS endpoints (%d)", len(endpoints)), Text: jsonLines(endpoints)},
		status.Section{Title: fmt.Sprintf("HNS load balancers (%d)", len(lbs)), Text: jsonLines(lbs)},
	), nil
}

// jsonLines renders each element as indented JSON, one after the other.
func jsonLines[T any](items []T) string {
	var b strings.Builder
	for _, it := range items {
		j, err := json.MarshalIndent(it, "", "  ")
		if err != nil {
			fmt.Fprintf(&b, "(unprintable: %v)\n", err)
			continue
		}
		b.Write(j)
		b.WriteByte('\n')
	}
	return b.String()
}
