package brain

import (
	"cmp"
	"slices"

	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/klog/v2"

	"github.com/nodenet/nodenet/proxy"
)

// portKey names the endpoints of one service port in one family.
type portKey struct {
	name     string
	protocol proxy.Protocol
	family   proxy.IPFamily
}

// endpoint is a proxy.Endpoint plus what topology needs from its hints,
// already evaluated for this node.
type endpoint struct {
	proxy.Endpoint
	// zoneHinted and nodeHinted: the endpoint has hints of that kind.
	zoneHinted, nodeHinted bool
	// forZone and forNode: a hint names this node's zone / this node.
	forZone, forNode bool
}

// candidate is an endpoint before de-duplication, with the index of the
// slice it came from.
type candidate struct {
	endpoint
	slice int
}

// endpoints merges a service's slices into, per port and family, the
// sorted, de-duplicated endpoints. Each endpoint's port is its own slice's
// port number for the service port's name and protocol: a named target
// port resolves per slice.
func (c *computer) endpoints(svc *v1.Service, epSlices []*discoveryv1.EndpointSlice, ports []portSpec) map[portKey][]endpoint {
	var cands map[portKey][]candidate
	for si, s := range epSlices {
		family := proxy.IPv4
		if s.AddressType == discoveryv1.AddressTypeIPv6 {
			family = proxy.IPv6
		}
		if !c.runs(family) {
			continue
		}
		var parsed []endpoint
		parsedOnce := false
		for pi, sp := range s.Ports {
			name := deref(sp.Name, "")
			proto, ok := protocol(deref(sp.Protocol, ""))
			if !ok || !slices.ContainsFunc(ports, func(p portSpec) bool { return p.name == name && p.protocol == proto }) {
				continue
			}
			if slices.ContainsFunc(s.Ports[:pi], func(q discoveryv1.EndpointPort) bool {
				qp, _ := protocol(deref(q.Protocol, ""))
				return deref(q.Name, "") == name && qp == proto
			}) {
				c.probs.add(kindSlice, s, "port %q/%s listed twice", name, proto)
				continue
			}
			if sp.Port == nil {
				// A nil port means "all ports", which no proxy supports.
				c.log.V(4).Info("Ignoring EndpointSlice port without a number", "endpointSlice", klog.KObj(s), "port", name)
				continue
			}
			if *sp.Port <= 0 || *sp.Port > 65535 {
				c.probs.add(kindSlice, s, "port %q: port %d out of range", name, *sp.Port)
				continue
			}
			if !parsedOnce {
				parsed = c.sliceEndpoints(s, family)
				parsedOnce = true
			}
			if len(parsed) == 0 {
				continue
			}
			if cands == nil {
				cands = map[portKey][]candidate{}
			}
			key := portKey{name: name, protocol: proto, family: family}
			list := slices.Grow(cands[key], len(parsed))
			for _, ep := range parsed {
				ep.Port = uint16(*sp.Port)
				list = append(list, candidate{endpoint: ep, slice: si})
			}
			cands[key] = list
		}
	}
	if len(cands) == 0 {
		return nil
	}
	out := make(map[portKey][]endpoint, len(cands))
	for key, list := range cands {
		out[key] = c.dedupe(list, epSlices)
	}
	return out
}

// sliceEndpoints parses a slice's endpoints (without ports); the bad ones
// are reported and left out.
func (c *computer) sliceEndpoints(s *discoveryv1.EndpointSlice, family proxy.IPFamily) []endpoint {
	out := make([]endpoint, 0, len(s.Endpoints))
	for i := range s.Endpoints {
		e := &s.Endpoints[i]
		if len(e.Addresses) == 0 {
			c.probs.add(kindSlice, s, "endpoint %d has no address", i)
			continue
		}
		// Like kube-proxy, only the first address counts.
		ip, err := parseAddr(e.Addresses[0])
		if err != nil {
			c.probs.add(kindSlice, s, "endpoint address %q is not an IP", e.Addresses[0])
			continue
		}
		if proxy.FamilyOf(ip) != family {
			c.probs.add(kindSlice, s, "endpoint address %s is not %s", ip, family)
			continue
		}
		ep := endpoint{Endpoint: proxy.Endpoint{
			IP:       ip,
			NodeName: deref(e.NodeName, ""),
			Zone:     deref(e.Zone, ""),
			// API defaults: nil ready and serving mean true, nil
			// terminating means false.
			Ready:       deref(e.Conditions.Ready, true),
			Serving:     deref(e.Conditions.Serving, true),
			Terminating: deref(e.Conditions.Terminating, false),
		}}
		ep.Local = c.nodeName != "" && ep.NodeName == c.nodeName
		if h := e.Hints; h != nil {
			ep.zoneHinted = len(h.ForZones) > 0
			ep.forZone = slices.ContainsFunc(h.ForZones, func(z discoveryv1.ForZone) bool { return z.Name == c.zone })
			ep.nodeHinted = len(h.ForNodes) > 0
			ep.forNode = slices.ContainsFunc(h.ForNodes, func(n discoveryv1.ForNode) bool { return n.Name == c.nodeName })
		}
		out = append(out, ep)
	}
	return out
}

// dedupe sorts endpoints by address and keeps one per IP and port: an
// endpoint moving between slices shows up in both for a while, and a pod
// IP may be reused while the old pod terminates. The kept one is the
// non-terminating one, else the ready one, else the first slice's (slices
// are sorted by name).
func (c *computer) dedupe(list []candidate, epSlices []*discoveryv1.EndpointSlice) []endpoint {
	slices.SortStableFunc(list, func(a, b candidate) int {
		return cmp.Or(a.IP.Compare(b.IP), cmp.Compare(a.Port, b.Port))
	})
	out := make([]endpoint, 0, len(list))
	prev := -1
	for i := range list {
		cur := &list[i]
		if prev >= 0 && list[prev].IP == cur.IP && list[prev].Port == cur.Port {
			if list[prev].slice == cur.slice {
				c.probs.add(kindSlice, epSlices[cur.slice], "endpoint %s listed twice", cur.IP)
			}
			if better(cur.Endpoint, list[prev].Endpoint) {
				out[len(out)-1] = cur.endpoint
				prev = i
			}
			continue
		}
		out = append(out, cur.endpoint)
		prev = i
	}
	return out
}

// better reports whether a should win over b for the same address.
func better(a, b proxy.Endpoint) bool {
	if a.Terminating != b.Terminating {
		return !a.Terminating
	}
	return a.Ready && !b.Ready
}

func deref[T any](p *T, def T) T {
	if p == nil {
		return def
	}
	return *p
}
