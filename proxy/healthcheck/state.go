package healthcheck

import (
	"net/netip"

	"k8s.io/apimachinery/pkg/types"

	"github.com/nodenet/nodenet/proxy"
)

// HealthCheckNodePorts returns the health-check node port of every service
// in st that has one, for ServiceHealth.SyncServices. family limits it to
// that family's service ports; "" takes every family.
func HealthCheckNodePorts(st *proxy.State, family proxy.IPFamily) map[types.NamespacedName]uint16 {
	ports := map[types.NamespacedName]uint16{}
	if st == nil {
		return ports
	}
	for key, sp := range st.ServicePorts {
		if sp.HealthCheckNodePort == 0 || (family != "" && key.Family != family) {
			continue
		}
		name := key.NamespacedName
		// The port is a Service field, so all ports agree; taking the
		// smallest keeps a (broken) disagreement deterministic.
		if p, ok := ports[name]; !ok || sp.HealthCheckNodePort < p {
			ports[name] = sp.HealthCheckNodePort
		}
	}
	return ports
}

// LocalReadyEndpoints returns, for every service in st with a health-check
// node port, how many ready endpoints it has on this node, for
// ServiceHealth.SyncEndpoints.
//
// Like kube-proxy, it counts distinct IPs over all the service's ports (a
// pod serving ports 80 and 443 is one endpoint, not two; summing the ports
// would double it): the ready endpoints of each port's LocalEndpoints, and
// at least the largest LocalReadyEndpoints of a port. kube-proxy runs one
// health server per family; with family "" (one server for both) a service
// gets its largest per-family count, so a dual-stack pod counts once.
func LocalReadyEndpoints(st *proxy.State, family proxy.IPFamily) map[types.NamespacedName]int {
	type key struct {
		name   types.NamespacedName
		family proxy.IPFamily
	}
	ips := map[key]map[netip.Addr]struct{}{}
	floor := map[key]int{}
	if st != nil {
		for spKey, sp := range st.ServicePorts {
			if sp.HealthCheckNodePort == 0 || (family != "" && spKey.Family != family) {
				continue
			}
			k := key{spKey.NamespacedName, spKey.Family}
			set := ips[k]
			if set == nil {
				set = map[netip.Addr]struct{}{}
				ips[k] = set
			}
			for _, ep := range sp.LocalEndpoints {
				if ep.Local && ep.Ready {
					set[ep.IP] = struct{}{}
				}
			}
			floor[k] = max(floor[k], sp.LocalReadyEndpoints)
		}
	}
	counts := map[types.NamespacedName]int{}
	for k, set := range ips {
		n := max(len(set), floor[k])
		counts[k.name] = max(counts[k.name], n)
	}
	return counts
}
