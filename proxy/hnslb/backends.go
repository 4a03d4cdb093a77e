package hnslb

import (
	"net/netip"
	"slices"

	"github.com/nodenet/nodenet/proxy"
)

// candidate is an endpoint on its way to becoming a backend.
type candidate struct {
	backend
	port  uint16
	ready bool
}

// backends picks what one load balancer of kind gets from eps: each
// address once, in HNS terms, at most MaxBackendsPerLoadBalancer of them
// (ready ones first, then local ones), all with one target port (HNS has
// one internal port per load balancer). It returns them sorted by address
// with that port.
func (p *planner) backends(fe frontend, kind frontendKind, eps []proxy.Endpoint, notes *notes) ([]backend, uint16) {
	cands := p.candidates(eps)
	if len(cands) == 0 {
		return nil, 0
	}
	slices.SortStableFunc(cands, preferred)
	port := cands[0].port
	kept := cands[:0]
	mixed := 0
	for _, c := range cands {
		if c.port != port {
			mixed++
			continue
		}
		kept = append(kept, c)
	}
	if mixed > 0 {
		notes.add(reasonMixedPorts, OpMixedTargetPorts, "an HNS load balancer has one target port: %d endpoints whose port differs from %d are left out of the %s load balancer %s",
			mixed, port, kind, fe)
	}
	if max := p.opts.MaxBackendsPerLoadBalancer; len(kept) > max {
		notes.add(reasonBackendLimit, OpBackendLimit, "%d endpoints exceed the limit of %d backends per HNS load balancer: the %s load balancer %s gets %d (ready and local ones first)",
			len(kept), max, kind, fe, max)
		kept = kept[:max]
	}
	out := make([]backend, len(kept))
	for i, c := range kept {
		out[i] = c.backend
	}
	slices.SortFunc(out, func(a, b backend) int { return a.ip.Compare(b.ip) })
	return out, port
}

// candidates classifies eps, dropping duplicates and addresses that must
// not become remote endpoints.
func (p *planner) candidates(eps []proxy.Endpoint) []candidate {
	f := p.facts
	seen := make(map[netip.Addr]bool, len(eps))
	out := make([]candidate, 0, len(eps))
	for _, ep := range eps {
		ip := ep.IP.Unmap()
		if seen[ip] || !ip.IsValid() {
			continue
		}
		kind := backendRemote
		switch {
		case f.isOwnNodeIP(ip):
			// A hostNetwork pod here has no endpoint of its own, and a
			// remote endpoint for this node's own address is never made
			// (kube-proxy skips it: a local endpoint HNS does not list):
			// the host's endpoint takes its traffic to the node's stack.
			kind = backendHost
		case ep.Local:
			kind = backendLocal
		case f.isLocalPodIP(ip):
			// A remote endpoint inside this node's pod CIDR would shadow
			// (and block) the local pod that owns or will own the
			// address: the slice is stale, leave it out.
			p.report.log.V(2).Info("Skipping a remote endpoint inside this node's pod CIDR", "endpoint", ep.String(), "node", ep.NodeName)
			continue
		case !f.knowsProviderAddress(ip):
			// Its node is not in the remote node table yet: left out
			// until the table has it (a table change forces a full sync).
			p.report.log.V(2).Info("Skipping a remote endpoint whose node is not known yet", "endpoint", ep.String(), "node", ep.NodeName)
			continue
		}
		seen[ip] = true
		out = append(out, candidate{backend: backend{ip: ip, kind: kind}, port: ep.Port, ready: ep.Ready})
	}
	return out
}

// preferred orders candidates for the backend limit: ready before not
// ready (terminating fallbacks), local before remote, then by address.
func preferred(a, b candidate) int {
	if a.ready != b.ready {
		if a.ready {
			return -1
		}
		return 1
	}
	al, bl := a.kind == backendLocal, b.kind == backendLocal
	if al != bl {
		if al {
			return -1
		}
		return 1
	}
	return a.ip.Compare(b.ip)
}
