package hnslb

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"net/netip"
	"slices"
	"sort"
	"time"

	"github.com/nodenet/nodenet/config"
	"github.com/nodenet/nodenet/hns"
	"github.com/nodenet/nodenet/overlay"
	"github.com/nodenet/nodenet/proxy"
)

// netFacts are the network facts one sync works from: the local network
// and the remote node table, indexed for per-backend questions.
type netFacts struct {
	local    *overlay.LocalNetwork
	overlay  bool
	features hns.Features
	// families are the service IP families this network can serve.
	families map[proxy.IPFamily]bool
	nodeIP   map[proxy.IPFamily]netip.Addr
	// sourceVIP is the SNAT address for KEP-5100 rule (c) per family: the
	// overlay source VIP, the node IP on l2bridge.
	sourceVIP map[proxy.IPFamily]netip.Addr
	// localCIDRs are this node's pod CIDRs.
	localCIDRs []netip.Prefix
	// clusterCIDRs are Options.ClusterCIDRs, or every known pod CIDR.
	clusterCIDRs []netip.Prefix
	// configuredCIDRs says clusterCIDRs came from Options: only then can
	// a pod address of a node not in the table yet be told apart from an
	// address outside the cluster.
	configuredCIDRs bool
	// remoteByCIDR maps a remote node's pod CIDR to its provider address;
	// remoteBits lists the prefix lengths in use, so a lookup masks an
	// address once per length instead of scanning every node.
	remoteByCIDR map[netip.Prefix]netip.Addr
	remoteBits   []int
	// remoteNodeIPs are the other nodes' addresses (hostNetwork backends).
	remoteNodeIPs map[netip.Addr]bool
	// key fingerprints everything above: a change forces a full sync.
	key string
}

// errNetworkNotReady is returned while the network part has no network.
var errNetworkNotReady = errors.New("the node network is not ready yet")

// facts reads the network part and, once, the HNS features.
func (b *Backend) facts(ctx context.Context) (*netFacts, error) {
	local := b.network.Local()
	if local == nil {
		return nil, errNetworkNotReady
	}
	if local.ID == "" {
		return nil, fmt.Errorf("the node network %q has no HNS network ID", local.Name)
	}
	feat, err := b.hnsFeatures(ctx)
	if err != nil {
		return nil, err
	}
	if b.opts.EnableDSR && !feat.DSR {
		return nil, fmt.Errorf("proxy.enableDSR is set but this host's HNS lacks DSR (needs HNS %s)", hns.SupportedVersions(hns.FeatureDSR))
	}
	return newNetFacts(local, b.network.Remotes(), b.opts.ClusterCIDRs, feat), nil
}

func (b *Backend) hnsFeatures(ctx context.Context) (hns.Features, error) {
	if b.features != nil {
		return *b.features, nil
	}
	start := time.Now()
	f, err := b.hns.Features(ctx)
	b.observe(OpFeatures, start, err)
	if err != nil {
		return hns.Features{}, fmt.Errorf("read HNS features: %w", err)
	}
	b.features = &f
	b.modifyLB = f.ModifyLoadbalancer
	return f, nil
}

func newNetFacts(local *overlay.LocalNetwork, remotes []overlay.RemoteNode, clusterCIDRs []netip.Prefix, feat hns.Features) *netFacts {
	f := &netFacts{
		local:         local,
		overlay:       local.Mode == config.NetworkModeOverlay,
		features:      feat,
		families:      map[proxy.IPFamily]bool{},
		nodeIP:        map[proxy.IPFamily]netip.Addr{},
		sourceVIP:     map[proxy.IPFamily]netip.Addr{},
		localCIDRs:    local.PodCIDRs,
		remoteByCIDR:  map[netip.Prefix]netip.Addr{},
		remoteNodeIPs: map[netip.Addr]bool{},
	}
	if local.NodeIP.IsValid() {
		f.families[proxy.IPv4] = true
		f.nodeIP[proxy.IPv4] = local.NodeIP
		f.sourceVIP[proxy.IPv4] = local.NodeIP
	}
	if f.overlay {
		// Overlay is IPv4 only; its SNAT address is the source VIP.
		if local.SourceVIP.IsValid() {
			f.sourceVIP[proxy.IPv4] = local.SourceVIP
		}
	} else if local.NodeIPv6.IsValid() && feat.IPv6DualStack {
		f.families[proxy.IPv6] = true
		f.nodeIP[proxy.IPv6] = local.NodeIPv6
		f.sourceVIP[proxy.IPv6] = local.NodeIPv6
	}
	bits := map[int]bool{}
	for _, r := range remotes {
		for _, c := range r.PodCIDRs {
			c = c.Masked()
			pa := r.NodeIP
			if c.Addr().Is6() {
				pa = r.NodeIPv6
			}
			f.remoteByCIDR[c] = pa
			bits[c.Bits()] = true
		}
		if r.NodeIP.IsValid() {
			f.remoteNodeIPs[r.NodeIP] = true
		}
		if r.NodeIPv6.IsValid() {
			f.remoteNodeIPs[r.NodeIPv6] = true
		}
	}
	for n := range bits {
		f.remoteBits = append(f.remoteBits, n)
	}
	sort.Sort(sort.Reverse(sort.IntSlice(f.remoteBits)))
	f.clusterCIDRs = clusterCIDRs
	f.configuredCIDRs = len(clusterCIDRs) > 0
	if len(f.clusterCIDRs) == 0 {
		f.clusterCIDRs = slices.Clone(local.PodCIDRs)
		for c := range f.remoteByCIDR {
			f.clusterCIDRs = append(f.clusterCIDRs, c)
		}
	}
	f.key = fingerprint(local, remotes, feat)
	return f
}

// fingerprint hashes the facts a desired state depends on.
func fingerprint(local *overlay.LocalNetwork, remotes []overlay.RemoteNode, feat hns.Features) string {
	h := fnv.New128a()
	fmt.Fprintf(h, "%s|%s|%s|%s|%s|%s|%v|%v|%v|%+v\n", local.ID, local.Mode, local.NodeIP, local.NodeIPv6,
		local.SourceVIP, local.SourceVIPEndpointID, local.PodCIDRs, local.Reserved, local.Name, feat)
	sorted := slices.Clone(remotes)
	slices.SortFunc(sorted, func(a, b overlay.RemoteNode) int {
		switch {
		case a.Name < b.Name:
			return -1
		case a.Name > b.Name:
			return 1
		}
		return 0
	})
	for _, r := range sorted {
		fmt.Fprintf(h, "%s|%v|%s|%s\n", r.Name, r.PodCIDRs, r.NodeIP, r.NodeIPv6)
	}
	return string(h.Sum(nil))
}

// remoteNodePA returns the provider address of the remote node whose pod
// CIDR holds ip.
func (f *netFacts) remoteNodePA(ip netip.Addr) (netip.Addr, bool) {
	for _, bits := range f.remoteBits {
		p, err := ip.Prefix(bits)
		if err != nil {
			continue
		}
		if pa, ok := f.remoteByCIDR[p]; ok {
			return pa, true
		}
	}
	return netip.Addr{}, false
}

// providerAddress is the underlay address a remote endpoint for ip is
// tunneled to on overlay: the owning node's, the node's own address for a
// hostNetwork backend, else this node's (an address outside the cluster
// leaves through this node, as kube-proxy assumes for public IPs).
func (f *netFacts) providerAddress(ip netip.Addr) netip.Addr {
	if !f.overlay {
		return netip.Addr{}
	}
	if pa, ok := f.remoteNodePA(ip); ok {
		return pa
	}
	if f.remoteNodeIPs[ip] {
		return ip
	}
	return f.nodeIP[proxy.FamilyOf(ip)]
}

// knowsProviderAddress reports whether a remote endpoint for ip can be
// programmed right: on overlay, a pod address inside the cluster CIDRs
// needs its node in the remote node table. Before the table has it (the
// proxy's first sync can run before the network part has read the other
// Nodes) the only address at hand would be this node's, which sends the
// pod's traffic nowhere until the next full sync.
func (f *netFacts) knowsProviderAddress(ip netip.Addr) bool {
	if !f.overlay || !f.configuredCIDRs || !inAny(f.clusterCIDRs, ip) || f.isLocalPodIP(ip) || f.remoteNodeIPs[ip] {
		return true
	}
	_, ok := f.remoteNodePA(ip)
	return ok
}

func (f *netFacts) isLocalPodIP(ip netip.Addr) bool { return inAny(f.localCIDRs, ip) }

func (f *netFacts) isOwnNodeIP(ip netip.Addr) bool {
	return ip == f.local.NodeIP || (f.local.NodeIPv6.IsValid() && ip == f.local.NodeIPv6)
}

// needsNodeSourceVIP applies KEP-5100's rules (a) and (b) to one backend:
// a backend outside every cluster CIDR, or another node's own address,
// must see this node's IP, not the source VIP, as the source. Rule (c)
// (local pods, remote pods, this node's IP) keeps the source VIP.
func (f *netFacts) needsNodeSourceVIP(ip netip.Addr) bool {
	if f.isOwnNodeIP(ip) {
		return false
	}
	if f.remoteNodeIPs[ip] {
		return true
	}
	return !inAny(f.clusterCIDRs, ip)
}

func inAny(ps []netip.Prefix, ip netip.Addr) bool {
	for _, p := range ps {
		if p.Contains(ip) {
			return true
		}
	}
	return false
}
