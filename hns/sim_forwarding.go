package hns

import "strings"

// Host vNIC forwarding. The simulated host also stands for the Windows
// TCP/IP stack of the host vNICs HNS creates ("vEthernet (<adapter>)"):
// on an L2Bridge network the host reaches its pods through the host
// vNIC only with IPv4 forwarding on, which is why flannel's host-gw
// backend turns it on (flannel-io/flannel
// pkg/backend/hostgw/hostgw_windows.go, step 7: Set-NetIPInterface
// -Forwarding Enabled on the management IP's interface and the bridge
// endpoint's, pkg/ip/iface_windows.go). Trace drops host → pod packets
// on an L2Bridge network while it is off.

// EnableHostForwarding turns IPv4 forwarding on for the host vNIC of the
// named (physical) adapter. It is not an HNS call: it is not counted,
// and faults do not apply. An unknown adapter is KindNotFound, as the IP
// Helper API answers an interface that does not exist (ERROR_NOT_FOUND,
// "The specified interface could not be found": Microsoft Learn
// "GetIpInterfaceEntry function").
func (s *Simulator) EnableHostForwarding(adapter string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	a := s.adapter(adapter)
	if a == nil {
		return newError("EnableForwarding", KindNotFound, adapter, "no host adapter %q (adapters: %s)", adapter, s.adapterNames())
	}
	if s.forwarding == nil {
		s.forwarding = map[string]bool{}
	}
	s.forwarding[strings.ToLower(a.Name)] = true
	return nil
}

// HostForwarding reports whether the host vNIC of the named adapter
// forwards.
func (s *Simulator) HostForwarding(adapter string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.forwarding[strings.ToLower(adapter)]
}

// networkAdapter is the adapter a network is bound to: its NetAdapterName
// policy, else the host's first adapter. s.mu held.
func (s *Simulator) networkAdapter(n *Network) *HostAdapter {
	for _, p := range n.Policies {
		if p.NetAdapterName != nil {
			if a := s.adapter(p.NetAdapterName.NetworkAdapterName); a != nil {
				return a
			}
		}
	}
	return &s.opts.HostAdapters[0]
}

// hostCannotForward says why the host cannot reach ep, or "": on L2Bridge
// only, the network flannel's host-gw backend turns forwarding on for
// (flannel-io/flannel pkg/backend/hostgw/hostgw_windows.go). On Overlay
// flannel adds a HostRoute network policy "for local host to local pod
// connectivity" instead (pkg/backend/vxlan/device_windows.go
// ensureNetwork); the tracer does not model a host without it.
// unsourced: that the packet is dropped rather than sent elsewhere; kept
// so a node that skips the step fails its traffic tests. s.mu held.
func (s *Simulator) hostCannotForward(ep *Endpoint) string {
	n := s.networks[ep.HostComputeNetwork]
	if n == nil || n.Type != NetworkTypeL2Bridge {
		return ""
	}
	a := s.networkAdapter(n)
	if s.forwarding[strings.ToLower(a.Name)] {
		return ""
	}
	return "IPv4 forwarding is off on the host vNIC vEthernet (" + a.Name + ") of L2Bridge network " + n.Name
}
