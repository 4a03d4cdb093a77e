package main

import (
	"fmt"
	"strings"

	"github.com/nodenet/nodenet/agent/status"
)

// hnsFeatureUse says, for each HNS feature the agent reports, what nodenet
// uses it for and what it does on a host without it (docs/hns-versions.md
// has the same per Windows release).
var hnsFeatureUse = map[string]struct{ use, without string }{
	"RemoteSubnet":       {"routes to other nodes' pod subnets", "no overlay network: use l2bridge"},
	"HostRoute":          {"the node reaching its own pods on overlay", "on overlay the node cannot reach its own pods"},
	"DSR":                {"DSR", "no DSR: externalTrafficPolicy Local and preserve-destination backends see the node's address, and proxy.enableDSR is refused"},
	"SessionAffinity":    {"session affinity ClientIP", "ClientIP affinity is left out (an event on each such Service)"},
	"IPv6DualStack":      {"IPv6", "IPv4 only"},
	"VxlanPort":          {"a VXLAN port other than 4789", "VXLAN port 4789 only"},
	"ModifyLoadbalancer": {"in-place load-balancer updates", "an endpoint change deletes and re-creates the load balancer"},
}

// hnsKnownBugs are why a feature is left out on a version inside what
// once was its range, by feature and HNS version.
var hnsKnownBugs = map[string]map[string]string{
	"ModifyLoadbalancer": {"15.4": "15.4 accepts an update and keeps the old endpoints, kubernetes issue 131466"},
}

// checkHNS reports, on the HNS dataplanes, the host's HNS version and
// Windows build, what nodenet uses of it and what it does without, each
// with the HNS versions that have the feature, and the backend limit.
func checkHNS(st *status.Status) []check {
	h := st.HNS
	if h == nil {
		return nil
	}
	host := "HNS " + h.Version
	if h.WindowsBuild != "" {
		host += " on Windows build " + h.WindowsBuild
	}
	if h.Simulated {
		host += " (simulated)"
	}
	if h.Version == "" {
		return []check{warned("hns", "cannot read the HNS version: "+h.Error,
			"HNS may be restarting: run doctor again in a minute; if it stays, read the agent's log and the hns service's")}
	}
	var uses []string
	var lacks []check
	for _, f := range h.Features {
		u, known := hnsFeatureUse[f.Name]
		if !known {
			u.use, u.without = f.Name, "nodenet does without "+f.Name
		}
		if f.Supported {
			uses = append(uses, fmt.Sprintf("%s (HNS %s)", u.use, f.Versions))
			continue
		}
		detail := fmt.Sprintf("no %s on HNS %s (needs HNS %s): %s", u.use, h.Version, f.Versions, u.without)
		if bug := hnsKnownBugs[f.Name][h.Version]; bug != "" {
			detail = fmt.Sprintf("no %s on HNS %s (needs HNS %s; %s): %s", u.use, h.Version, f.Versions, bug, u.without)
		}
		fix := fmt.Sprintf("a Windows update or release with HNS %s (docs/hns-versions.md)", f.Versions)
		if f.Name == "DSR" && st.Proxy.DSR {
			lacks = append(lacks, failed("hns "+f.Name, detail, "unset proxy.enableDSR, or "+fix))
			continue
		}
		lacks = append(lacks, warned("hns "+f.Name, detail, fix))
	}
	checks := []check{passed("hns", "%s: nodenet uses %s", host, orNone(strings.Join(uses, ", ")))}
	checks = append(checks, lacks...)
	return append(checks, checkBackendLimit(h))
}

// checkBackendLimit reports the backends per load balancer: the host's
// (its build's) or the config's, which must not exceed the host's.
func checkBackendLimit(h *status.HNSStatus) check {
	const name = "hns backends"
	switch {
	case h.HostMaxBackendsPerLoadBalancer == 0:
		return warned(name, "the Windows build is unknown: "+h.Error, "read the agent's log")
	case h.MaxBackendsPerLoadBalancer > h.HostMaxBackendsPerLoadBalancer:
		return failed(name, fmt.Sprintf("windows.maxBackendsPerLoadBalancer is %d, but build %s takes %d: HNS refuses larger load balancers (\"invalid number of destinations\")",
			h.MaxBackendsPerLoadBalancer, h.WindowsBuild, h.HostMaxBackendsPerLoadBalancer),
			"unset windows.maxBackendsPerLoadBalancer (the host's limit is then used)")
	case h.MaxBackendsPerLoadBalancer < h.HostMaxBackendsPerLoadBalancer:
		return passed(name, "up to %d backends per load balancer (windows.maxBackendsPerLoadBalancer; build %s takes %d)",
			h.MaxBackendsPerLoadBalancer, h.WindowsBuild, h.HostMaxBackendsPerLoadBalancer)
	}
	return passed(name, "up to %d backends per load balancer, what build %s takes (64 before Windows Server 2019 build 17763.2746, 1024 from it on)",
		h.MaxBackendsPerLoadBalancer, h.WindowsBuild)
}
