package hnslb

import (
	"fmt"
	"net/netip"
	"strings"

	"github.com/nodenet/nodenet/hns"
	"github.com/nodenet/nodenet/overlay"
)

// RemoteEndpointPrefix starts the name of every remote endpoint this
// package creates, "nodenet-remote:<address>": a remote endpoint on the
// network with such a name is ours to adopt, replace or delete.
const RemoteEndpointPrefix = "nodenet-remote:"

// RemoteEndpointName returns the name of our remote endpoint for ip.
func RemoteEndpointName(ip netip.Addr) string { return RemoteEndpointPrefix + ip.String() }

// remoteEP is a remote endpoint HNS holds on our network.
type remoteEP struct {
	id   string
	ip   netip.Addr
	pa   netip.Addr // its ProviderAddress policy; invalid without one
	ours bool
}

// endpointView is what we know of the network's endpoints: refreshed by
// every full sync (one ListEndpoints) and kept current by our own writes
// in between, so a partial sync needs no listing unless a new local pod
// shows up.
type endpointView struct {
	loaded bool
	// local maps a pod address to its (CNI-made) endpoint.
	local map[netip.Addr]string
	// remote maps an address to the remote endpoint holding it.
	remote map[netip.Addr]*remoteEP
	// hostID is the host's endpoint (source VIP or l2bridge host
	// endpoint); hostMAC its MAC, which kube-proxy gives the cluster-IP
	// remote endpoints.
	hostID  string
	hostMAC string
}

func newEndpointView() *endpointView {
	return &endpointView{local: map[netip.Addr]string{}, remote: map[netip.Addr]*remoteEP{}}
}

// load replaces the view with a listing of the network's endpoints.
func (v *endpointView) load(eps []hns.Endpoint, local *overlay.LocalNetwork) {
	*v = *newEndpointView()
	v.loaded = true
	v.hostID = local.SourceVIPEndpointID
	macs := map[string]string{}
	for i := range eps {
		ep := &eps[i]
		if !strings.EqualFold(ep.HostComputeNetwork, local.ID) {
			continue
		}
		if ep.IsRemote() {
			v.addRemote(ep)
			continue
		}
		macs[strings.ToUpper(ep.ID)] = ep.MacAddress
		for _, s := range ep.IPs() {
			ip, err := netip.ParseAddr(s)
			if err != nil {
				continue
			}
			ip = ip.Unmap()
			v.local[ip] = ep.ID
			// The l2bridge host endpoint holds the reserved address.
			if v.hostID == "" && len(local.Reserved) > 0 && ip == local.Reserved[0] {
				v.hostID = ep.ID
			}
		}
	}
	v.hostMAC = macs[strings.ToUpper(v.hostID)]
}

// addRemote records a remote endpoint HNS holds. When two share an
// address (a Windows bug kube-proxy works around), ours wins.
func (v *endpointView) addRemote(ep *hns.Endpoint) {
	ips := ep.IPs()
	if len(ips) == 0 {
		return
	}
	ip, err := netip.ParseAddr(ips[0])
	if err != nil {
		return
	}
	r := &remoteEP{id: ep.ID, ip: ip.Unmap(), ours: strings.HasPrefix(ep.Name, RemoteEndpointPrefix)}
	for _, p := range ep.Policies {
		if p.ProviderAddress != nil {
			if pa, err := netip.ParseAddr(p.ProviderAddress.ProviderAddress); err == nil {
				r.pa = pa
			}
		}
	}
	if cur := v.remote[r.ip]; cur != nil && cur.ours && !r.ours {
		return
	}
	v.remote[r.ip] = r
}

// remoteSpec is a remote endpoint we want.
type remoteSpec struct {
	ip  netip.Addr
	pa  netip.Addr
	vip bool // holds a cluster IP: kube-proxy gives it the host's MAC
}

// fits reports whether an existing remote endpoint serves as want.
func (r *remoteEP) fits(want remoteSpec) bool { return r.pa == want.pa }

// endpoint returns the HNS endpoint for want on network.
func (want remoteSpec) endpoint(networkID, hostMAC string) *hns.Endpoint {
	ep := &hns.Endpoint{
		Name:               RemoteEndpointName(want.ip),
		HostComputeNetwork: networkID,
		IpConfigurations:   []hns.IPConfig{{IpAddress: want.ip.String()}},
		MacAddress:         conjuredMAC(want.ip),
		Flags:              hns.EndpointFlagsRemoteEndpoint,
		SchemaVersion:      hns.V2,
	}
	if want.vip && hostMAC != "" {
		ep.MacAddress = hostMAC
	}
	if want.pa.IsValid() {
		ep.Policies = []hns.EndpointPolicy{{
			Type:            hns.EndpointPolicyProviderAddress,
			ProviderAddress: &hns.ProviderAddressPolicy{ProviderAddress: want.pa.String()},
		}}
	}
	return ep
}

// conjuredMAC derives a remote endpoint's MAC from its address, as
// kube-proxy does (prefix 02-11, a locally administered range, then the
// last four address bytes): unique per address, never sent on the wire.
func conjuredMAC(ip netip.Addr) string {
	b := ip.As16()
	return fmt.Sprintf("02-11-%02X-%02X-%02X-%02X", b[12], b[13], b[14], b[15])
}
