// Package conntrack flushes stale conntrack entries after a proxy sync, so
// UDP and SCTP clients that keep sending from the same source port are not
// stuck on a backend that is gone (kube-proxy's pkg/proxy/conntrack).
//
// NAT is decided on a flow's first packet and then lives in its conntrack
// entry; rules changed later never apply to it. A datagram client that
// never changes ports therefore keeps reaching a deleted endpoint, or keeps
// missing a service that got its first endpoint, until its entry times out
// (which never happens while it keeps sending). TCP and its handshakes
// recover by themselves, so only UDP and SCTP are flushed.
//
// NewPlan is pure: it compares the previous and the new proxy.State and
// says which entries are stale. The Linux Cleaner applies a Plan through
// netlink.
package conntrack

import (
	"net/netip"
	"slices"

	"github.com/nodenet/nodenet/proxy"
)

// Flusher removes the conntrack entries a sync made stale. prev is the
// state last programmed (nil on the first sync), next the state just
// programmed, changed the keys that differ between them (nil means every
// key of both). The nftables backend calls it after a successful sync.
type Flusher interface {
	Flush(prev, next *proxy.State, changed map[proxy.ServicePortKey]struct{}) error
}

// Frontend is where a flow was headed before DNAT: a service address and
// port, or a node port on any of the node's addresses.
type Frontend struct {
	Family   proxy.IPFamily
	Protocol proxy.Protocol
	// Addr is the zero Addr for a node port.
	Addr netip.Addr
	Port uint16
}

// Entry is what a plan reads from a conntrack entry: the original
// direction's protocol and destination, and the reply direction's source,
// which is the endpoint the flow was DNATed to (or the destination itself
// when it was not DNATed).
type Entry struct {
	Protocol proxy.Protocol
	OrigDst  netip.AddrPort
	ReplySrc netip.AddrPort
}

// Plan maps each frontend whose entries may be stale to the endpoints its
// entries may keep: an entry to a planned frontend whose reply source is
// not one of them is stale. An empty Plan flushes nothing.
type Plan struct {
	// Keep holds the planned frontends and their live endpoints.
	Keep map[Frontend]map[netip.AddrPort]struct{}
	// services holds every service address frontend of the new state of a
	// protocol that has a planned node port: a flow to a service address
	// whose port happens to equal a node port is that service's, not the
	// node port's.
	services map[Frontend]struct{}
}

// Empty reports whether the plan flushes nothing.
func (p Plan) Empty() bool { return len(p.Keep) == 0 }

// Families returns the families the plan flushes in, IPv4 first.
func (p Plan) Families() []proxy.IPFamily {
	var fams []proxy.IPFamily
	for _, fam := range []proxy.IPFamily{proxy.IPv4, proxy.IPv6} {
		for f := range p.Keep {
			if f.Family == fam {
				fams = append(fams, fam)
				break
			}
		}
	}
	return fams
}

// Stale reports whether e must be flushed.
func (p Plan) Stale(e Entry) bool {
	if len(p.Keep) == 0 || !e.OrigDst.IsValid() {
		return false
	}
	dst := netip.AddrPortFrom(e.OrigDst.Addr().Unmap(), e.OrigDst.Port())
	reply := netip.AddrPortFrom(e.ReplySrc.Addr().Unmap(), e.ReplySrc.Port())
	f := Frontend{Family: proxy.FamilyOf(dst.Addr()), Protocol: e.Protocol, Addr: dst.Addr(), Port: dst.Port()}
	if keep, ok := p.Keep[f]; ok {
		_, live := keep[reply]
		return !live
	}
	if _, ok := p.services[f]; ok {
		return false
	}
	f.Addr = netip.Addr{}
	if keep, ok := p.Keep[f]; ok {
		_, live := keep[reply]
		return !live
	}
	return false
}

// NewPlan returns what the step from prev to next made stale, for the
// changed UDP and SCTP service ports. A frontend is planned when
//   - it was removed (its entries lead nowhere now);
//   - it lost an endpoint (entries DNATed to it, kube-proxy's
//     DeletedUDPEndpoints);
//   - it is new, or had no endpoints and now has some (entries made before
//     it could be DNATed, kube-proxy's NewlyActiveUDPServices).
//
// Its entries may then keep only the endpoints the new state serves it
// with, in any of its endpoint sets. prev nil is the first sync: every
// frontend is new, so entries left from before a restart are reconciled.
// Like kube-proxy, a node port is matched on its port alone.
func NewPlan(prev, next *proxy.State, changed map[proxy.ServicePortKey]struct{}) Plan {
	planned := map[Frontend]struct{}{}
	for k := range changedKeys(prev, next, changed) {
		if flushed(k.Protocol) {
			planStale(planned, servicePort(prev, k), servicePort(next, k))
		}
	}
	if len(planned) == 0 {
		return Plan{}
	}
	return keepLive(planned, next)
}

// changedKeys is changed, or every key of prev and next when changed is
// nil.
func changedKeys(prev, next *proxy.State, changed map[proxy.ServicePortKey]struct{}) map[proxy.ServicePortKey]struct{} {
	if changed != nil {
		return changed
	}
	keys := map[proxy.ServicePortKey]struct{}{}
	for _, s := range []*proxy.State{prev, next} {
		if s == nil {
			continue
		}
		for k := range s.ServicePorts {
			keys[k] = struct{}{}
		}
	}
	return keys
}

// servicePort is s's port k; nil when s is.
func servicePort(s *proxy.State, k proxy.ServicePortKey) *proxy.ServicePort {
	if s == nil {
		return nil
	}
	return s.ServicePorts[k]
}

// planStale adds to planned the frontends of one service port that the
// step from before to after made stale, by NewPlan's rules. Either may be
// nil: the port is new, or removed.
func planStale(planned map[Frontend]struct{}, before, after *proxy.ServicePort) {
	oldEps, newEps := endpoints(before), endpoints(after)
	oldFronts, newFronts := frontends(before), frontends(after)
	lost := false
	for ep := range oldEps {
		if _, ok := newEps[ep]; !ok {
			lost = true
			break
		}
	}
	activated := len(oldEps) == 0 && len(newEps) > 0
	for f := range oldFronts {
		if _, still := newFronts[f]; !still || lost {
			planned[f] = struct{}{}
		}
	}
	for f := range newFronts {
		if _, was := oldFronts[f]; !was || activated {
			planned[f] = struct{}{}
		}
	}
}

// keepLive is the plan for the planned frontends: each keeps the endpoints
// of every port of next that has it, as a removed service's address may
// already be another's. It also notes the service addresses that a
// planned node port must not claim.
func keepLive(planned map[Frontend]struct{}, next *proxy.State) Plan {
	p := Plan{Keep: make(map[Frontend]map[netip.AddrPort]struct{}, len(planned))}
	for f := range planned {
		p.Keep[f] = map[netip.AddrPort]struct{}{}
	}
	nodePortProtos := map[proxy.Protocol]bool{}
	for f := range planned {
		if !f.Addr.IsValid() {
			nodePortProtos[f.Protocol] = true
		}
	}
	if next == nil {
		return p
	}
	for _, sp := range next.ServicePorts {
		if !flushed(sp.Key.Protocol) {
			continue
		}
		var eps map[netip.AddrPort]struct{}
		for f := range frontends(sp) {
			if nodePortProtos[f.Protocol] && f.Addr.IsValid() {
				if p.services == nil {
					p.services = map[Frontend]struct{}{}
				}
				p.services[f] = struct{}{}
			}
			keep, ok := p.Keep[f]
			if !ok {
				continue
			}
			if eps == nil {
				eps = endpoints(sp)
			}
			for ep := range eps {
				keep[ep] = struct{}{}
			}
		}
	}
	return p
}

// flushed reports whether entries of proto can go stale: datagram flows
// keep their source port, so their entry outlives the endpoint.
func flushed(proto proxy.Protocol) bool { return proto == proxy.UDP || proto == proxy.SCTP }

// frontends returns every address a flow to sp is DNATed from.
func frontends(sp *proxy.ServicePort) map[Frontend]struct{} {
	fs := map[Frontend]struct{}{}
	if sp == nil {
		return fs
	}
	add := func(addr netip.Addr, port uint16) {
		fs[Frontend{Family: sp.Key.Family, Protocol: sp.Key.Protocol, Addr: addr, Port: port}] = struct{}{}
	}
	if sp.ClusterIP.IsValid() {
		add(sp.ClusterIP.Unmap(), sp.Port)
	}
	for _, ip := range slices.Concat(sp.ExternalIPs, sp.LoadBalancerIPs) {
		add(ip.Unmap(), sp.Port)
	}
	if sp.NodePort != 0 {
		add(netip.Addr{}, sp.NodePort)
	}
	return fs
}

// endpoints returns every endpoint any of sp's frontends may be DNATed to.
func endpoints(sp *proxy.ServicePort) map[netip.AddrPort]struct{} {
	eps := map[netip.AddrPort]struct{}{}
	if sp == nil {
		return eps
	}
	for _, set := range [][]proxy.Endpoint{sp.ClusterEndpoints, sp.LocalEndpoints, sp.InternalEndpoints, sp.ExternalEndpoints} {
		for _, ep := range set {
			eps[netip.AddrPortFrom(ep.IP.Unmap(), ep.Port)] = struct{}{}
		}
	}
	return eps
}
