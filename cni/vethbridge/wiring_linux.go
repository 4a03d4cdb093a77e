//go:build linux

package vethbridge

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strings"
	"time"

	current "github.com/containernetworking/cni/pkg/types/100"
	"github.com/containernetworking/plugins/pkg/ip"
	"github.com/containernetworking/plugins/pkg/ipam"
	"github.com/containernetworking/plugins/pkg/netlinksafe"
	"github.com/containernetworking/plugins/pkg/ns"
	"github.com/containernetworking/plugins/pkg/utils/sysctl"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
	"k8s.io/klog/v2"

	"github.com/nodenet/nodenet/cni"
	"github.com/nodenet/nodenet/internal/netaddr"
)

// agentNetNS is the agent's own netns: the main thread's, whatever netns
// the calling goroutine's thread happens to be in.
const agentNetNS = "/proc/self/ns/net"

// portUpTimeout bounds how long Add waits for the host veth to be
// operationally up, the sign that the bridge forwards on the port (as the
// reference bridge plugin does, which waits 2.55 s).
const portUpTimeout = 3 * time.Second

// Wiring connects pods to the node bridge with veth pairs. It holds no
// state besides its options: everything it knows is read from the kernel,
// so it survives agent restarts. Its methods are safe for concurrent use
// on different attachments.
type Wiring struct {
	hostNetNS string
	log       klog.Logger
}

// New returns the wiring for the bridge in opts.HostNetNS; it fails when
// that path is not a network namespace.
func New(opts Options) (*Wiring, error) {
	path := opts.HostNetNS
	if path == "" {
		path = agentNetNS
	}
	if err := ns.IsNSorErr(path); err != nil {
		return nil, fmt.Errorf("host netns %s: %w", path, err)
	}
	log := klog.Background()
	if opts.Logger != nil {
		log = *opts.Logger
	}
	return &Wiring{hostNetNS: path, log: log}, nil
}

// Ready reports whether the bridge exists, is up and holds the gateway of
// every pod CIDR.
func (w *Wiring) Ready(ctx context.Context, nw *cni.NodeNetwork) error {
	if err := validateNetwork(nw); err != nil {
		return err
	}
	hostNS, err := w.openHost(ctx)
	if err != nil {
		return err
	}
	defer hostNS.Close()

	var missing []string
	err = hostNS.Do(func(ns.NetNS) error {
		l, err := netlinksafe.LinkByName(nw.Name)
		if isNotFound(err) {
			missing = append(missing, fmt.Sprintf("bridge %s not found in %s", nw.Name, w.hostNetNS))
			return nil
		}
		if err != nil {
			return fmt.Errorf("look up bridge %s in %s: %w", nw.Name, w.hostNetNS, err)
		}
		if _, ok := l.(*netlink.Bridge); !ok {
			missing = append(missing, fmt.Sprintf("%s in %s is a %s link, not a bridge", nw.Name, w.hostNetNS, l.Type()))
			return nil
		}
		if l.Attrs().Flags&net.FlagUp == 0 {
			missing = append(missing, fmt.Sprintf("bridge %s is down", nw.Name))
		}
		addrs, err := netlinksafe.AddrList(l, netlink.FAMILY_ALL)
		if err != nil {
			return fmt.Errorf("list addresses of bridge %s: %w", nw.Name, err)
		}
		flags := map[netip.Addr]int{}
		for _, a := range addrs {
			if p, ok := netaddr.FromIPNet(a.IPNet); ok {
				flags[p.Addr()] = a.Flags
			}
		}
		for i, gw := range nw.Gateways {
			f, ok := flags[gw]
			switch {
			case !ok:
				missing = append(missing, fmt.Sprintf("bridge %s lacks gateway %s of pod CIDR %s", nw.Name, gw, nw.PodCIDRs[i]))
			case f&unix.IFA_F_DADFAILED != 0:
				missing = append(missing, fmt.Sprintf("gateway %s on bridge %s failed duplicate address detection", gw, nw.Name))
			case f&unix.IFA_F_TENTATIVE != 0:
				missing = append(missing, fmt.Sprintf("gateway %s on bridge %s is tentative (duplicate address detection in progress)", gw, nw.Name))
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	if len(missing) > 0 {
		return fmt.Errorf("node network %s is not ready: %s", nw.Name, strings.Join(missing, "; "))
	}
	return nil
}

// Add wires the pod: see the package documentation for what it makes.
func (w *Wiring) Add(ctx context.Context, nw *cni.NodeNetwork, pod *cni.Pod) (_ *current.Result, err error) {
	if err := validateRequest(nw, pod); err != nil {
		return nil, err
	}
	hostNS, err := w.openHost(ctx)
	if err != nil {
		return nil, err
	}
	defer hostNS.Close()
	podNS, err := openPodNS(pod.Netns)
	if err != nil {
		return nil, err
	}
	defer podNS.Close()

	st, err := w.inspect(hostNS, podNS, nw, pod)
	if err != nil {
		return nil, err
	}
	if st.bridgeProblem != "" {
		return nil, errors.New(st.bridgeProblem)
	}
	if len(st.drift) == 0 {
		return buildResult(nw, pod, st.host.Attrs().HardwareAddr.String(), st.pod.Attrs().HardwareAddr.String()), nil
	}
	if st.host != nil || st.pod != nil {
		w.log.Info("Replacing stale pod wiring", "containerID", pod.ContainerID, "ifname", pod.IfName, "netns", pod.Netns, "drift", st.drift)
		if err := w.teardown(hostNS, podNS, pod, st); err != nil {
			return nil, err
		}
	}

	hostName := HostVethName(pod.Attachment)
	success := false
	defer func() {
		if success {
			return
		}
		if rerr := hostNS.Do(func(ns.NetNS) error { return delLink(hostName) }); rerr != nil {
			err = errors.Join(err, fmt.Errorf("roll back: %w", rerr))
		}
	}()
	res, err := w.create(ctx, hostNS, podNS, nw, pod)
	if err != nil {
		return nil, err
	}
	success = true
	return res, nil
}

// create makes the veth pair and configures both ends.
func (w *Wiring) create(ctx context.Context, hostNS, podNS ns.NetNS, nw *cni.NodeNetwork, pod *cni.Pod) (*current.Result, error) {
	hostName := HostVethName(pod.Attachment)
	alias := linkAlias(pod.Attachment)
	// The MACs are filled in below; ConfigureIface needs the result's
	// addresses, routes and interface names.
	res := buildResult(nw, pod, "", "")
	var has4, has6 bool
	for _, a := range pod.Addresses {
		has4 = has4 || a.IP.Addr().Is4()
		has6 = has6 || a.IP.Addr().Is6()
	}

	err := podNS.Do(func(ns.NetNS) error {
		hostIf, podIf, err := ip.SetupVethWithName(pod.IfName, hostName, nw.MTU, "", hostNS)
		if err != nil {
			return fmt.Errorf("create veth %s in %s with host end %s: %w", pod.IfName, pod.Netns, hostName, err)
		}
		res.Interfaces[hostIfaceIndex].Mac = hostIf.HardwareAddr.String()
		res.Interfaces[podIfaceIndex].Mac = podIf.HardwareAddr.String()
		podLink, err := netlinksafe.LinkByName(pod.IfName)
		if err != nil {
			return fmt.Errorf("look up interface %s in %s: %w", pod.IfName, pod.Netns, err)
		}
		if err := netlink.LinkSetAlias(podLink, alias); err != nil {
			return fmt.Errorf("set alias of interface %s in %s: %w", pod.IfName, pod.Netns, err)
		}
		if has6 {
			if err := setSysctl(fmt.Sprintf("net/ipv6/conf/%s/accept_dad", pod.IfName), "0"); err != nil {
				return err
			}
		}
		if has4 {
			if err := setSysctl(fmt.Sprintf("net/ipv4/conf/%s/arp_notify", pod.IfName), "1"); err != nil {
				return err
			}
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		// Attach the host end before the pod end comes up, so that the
		// gratuitous ARP it sends then reaches the bridge.
		if err := hostNS.Do(func(ns.NetNS) error { return attachHostVeth(hostName, alias, nw.Name) }); err != nil {
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := ipam.ConfigureIface(pod.IfName, res); err != nil {
			return fmt.Errorf("configure interface %s in %s: %w", pod.IfName, pod.Netns, err)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	err = hostNS.Do(func(ns.NetNS) error {
		l, err := waitOperUp(ctx, hostName)
		if err != nil {
			return err
		}
		res.Interfaces[hostIfaceIndex].Mac = l.Attrs().HardwareAddr.String()
		return nil
	})
	if err != nil {
		return nil, err
	}
	return res, nil
}

// attachHostVeth labels the host end, makes it a hairpin port of the
// bridge. Run in the host netns.
func attachHostVeth(name, alias, bridge string) error {
	l, err := netlinksafe.LinkByName(name)
	if err != nil {
		return fmt.Errorf("look up host veth %s: %w", name, err)
	}
	if err := netlink.LinkSetAlias(l, alias); err != nil {
		return fmt.Errorf("set alias of host veth %s: %w", name, err)
	}
	br, err := netlinksafe.LinkByName(bridge)
	if err != nil {
		return fmt.Errorf("look up bridge %s: %w", bridge, err)
	}
	if err := netlink.LinkSetMaster(l, br); err != nil {
		return fmt.Errorf("attach host veth %s to bridge %s: %w", name, bridge, err)
	}
	if err := netlink.LinkSetHairpin(l, true); err != nil {
		return fmt.Errorf("set hairpin mode on host veth %s: %w", name, err)
	}
	return nil
}

// waitOperUp waits until the host veth is operationally up: the kernel
// enables a bridge port only once its carrier is on, which it notices
// asynchronously after the pod end comes up. Run in the host netns.
func waitOperUp(ctx context.Context, name string) (netlink.Link, error) {
	deadline := time.Now().Add(portUpTimeout)
	delay := time.Millisecond
	for {
		l, err := netlinksafe.LinkByName(name)
		if err != nil {
			return nil, fmt.Errorf("look up host veth %s: %w", name, err)
		}
		if l.Attrs().OperState == netlink.OperUp {
			return l, nil
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("bridge port %s is not up after %v: operstate %s", name, portUpTimeout, l.Attrs().OperState)
		}
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("wait for bridge port %s: %w", name, err)
		}
		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, fmt.Errorf("wait for bridge port %s: %w", name, ctx.Err())
		case <-t.C:
		}
		delay = min(2*delay, 50*time.Millisecond)
	}
}

// Check compares the pod's wiring with what Add makes and with prev.
func (w *Wiring) Check(ctx context.Context, nw *cni.NodeNetwork, pod *cni.Pod, prev *current.Result) error {
	if err := validateRequest(nw, pod); err != nil {
		return err
	}
	hostNS, err := w.openHost(ctx)
	if err != nil {
		return err
	}
	defer hostNS.Close()
	podNS, err := openPodNS(pod.Netns)
	if err != nil {
		return err
	}
	defer podNS.Close()

	st, err := w.inspect(hostNS, podNS, nw, pod)
	if err != nil {
		return err
	}
	drift := st.drift
	if i := prevHostIface(pod, prev); i != nil && st.host != nil && i.Mac != "" && !strings.EqualFold(i.Mac, st.host.Attrs().HardwareAddr.String()) {
		drift = append(drift, fmt.Sprintf("host veth %s has MAC %s, prevResult says %s", st.host.Attrs().Name, st.host.Attrs().HardwareAddr, i.Mac))
	}
	if i := prevPodIface(pod, prev); i != nil && st.pod != nil && i.Mac != "" && !strings.EqualFold(i.Mac, st.pod.Attrs().HardwareAddr.String()) {
		drift = append(drift, fmt.Sprintf("interface %s in %s has MAC %s, prevResult says %s", pod.IfName, pod.Netns, st.pod.Attrs().HardwareAddr, i.Mac))
	}
	drift = append(drift, prevDrift(pod, prev)...)
	return driftError(pod, drift)
}

// Del removes the host veth, which takes the pod end with it. When the
// host veth is already gone, it removes a pod interface of ours that was
// left behind in a netns that still exists.
func (w *Wiring) Del(ctx context.Context, _ *cni.NodeNetwork, pod *cni.Pod) error {
	if pod == nil {
		return errors.New("no pod")
	}
	hostName := HostVethName(pod.Attachment)
	alias := linkAlias(pod.Attachment)
	hostNS, err := w.openHost(ctx)
	if err != nil {
		return err
	}
	defer hostNS.Close()

	deleted := false
	err = hostNS.Do(func(ns.NetNS) error {
		l, err := netlinksafe.LinkByName(hostName)
		if isNotFound(err) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("look up host veth %s: %w", hostName, err)
		}
		if !isOurHostVeth(l, alias) {
			// Another attachment's, or not ours at all: not to be touched.
			return nil
		}
		if err := delLink(hostName); err != nil {
			return err
		}
		deleted = true
		return nil
	})
	if err != nil || deleted || pod.Netns == "" || validateIfName(pod.IfName) != nil {
		return err
	}

	podNS, err := ns.GetNS(pod.Netns)
	if isNetnsGone(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("open pod netns %s: %w", pod.Netns, err)
	}
	defer podNS.Close()
	return podNS.Do(func(ns.NetNS) error {
		l, err := netlinksafe.LinkByName(pod.IfName)
		if isNotFound(err) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("look up interface %s in %s: %w", pod.IfName, pod.Netns, err)
		}
		if _, ok := l.(*netlink.Veth); !ok || l.Attrs().Alias != alias {
			return nil
		}
		if err := netlink.LinkDel(l); err != nil && !isGone(err) {
			return fmt.Errorf("delete interface %s in %s: %w", pod.IfName, pod.Netns, err)
		}
		return nil
	})
}

// List returns the attachments of every host veth Add made, recognized by
// name and alias, attached to the bridge or not (an Add interrupted by a
// crash may have left one unattached, and GC must find it too).
func (w *Wiring) List(ctx context.Context, _ *cni.NodeNetwork) ([]cni.Attachment, error) {
	hostNS, err := w.openHost(ctx)
	if err != nil {
		return nil, err
	}
	defer hostNS.Close()

	var out []cni.Attachment
	err = hostNS.Do(func(ns.NetNS) error {
		links, err := netlinksafe.LinkList()
		if err != nil {
			return fmt.Errorf("list links in %s: %w", w.hostNetNS, err)
		}
		for _, l := range links {
			if _, ok := l.(*netlink.Veth); !ok {
				continue
			}
			a, ok := parseAlias(l.Attrs().Alias)
			if ok && l.Attrs().Name == HostVethName(a) {
				out = append(out, a)
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	slices.SortFunc(out, func(a, b cni.Attachment) int {
		return strings.Compare(a.ContainerID+"\x00"+a.IfName, b.ContainerID+"\x00"+b.IfName)
	})
	return out, nil
}

// state is what inspect found of a pod's wiring.
type state struct {
	// host and pod are the host veth and the pod interface; nil when
	// absent.
	host, pod netlink.Link
	// bridgeProblem says why the bridge can't take ports; "" when it can.
	bridgeProblem string
	// drift lists every difference from what Add makes.
	drift []string
}

// inspect reads the pod's wiring from both netnses and compares it with
// what Add makes. An error means the kernel could not be read.
func (w *Wiring) inspect(hostNS, podNS ns.NetNS, nw *cni.NodeNetwork, pod *cni.Pod) (*state, error) {
	st := &state{}
	if err := hostNS.Do(func(ns.NetNS) error { return w.inspectHost(st, nw, pod) }); err != nil {
		return nil, err
	}
	if err := podNS.Do(func(ns.NetNS) error { return inspectPod(st, nw, pod) }); err != nil {
		return nil, err
	}
	return st, nil
}

// inspectHost checks the bridge and the host veth. Run in the host netns.
func (w *Wiring) inspectHost(st *state, nw *cni.NodeNetwork, pod *cni.Pod) error {
	name := HostVethName(pod.Attachment)
	br, err := netlinksafe.LinkByName(nw.Name)
	switch {
	case isNotFound(err):
		st.bridgeProblem = fmt.Sprintf("bridge %s not found in %s", nw.Name, w.hostNetNS)
		br = nil
	case err != nil:
		return fmt.Errorf("look up bridge %s in %s: %w", nw.Name, w.hostNetNS, err)
	case br.Type() != "bridge":
		st.bridgeProblem = fmt.Sprintf("%s in %s is a %s link, not a bridge", nw.Name, w.hostNetNS, br.Type())
		br = nil
	}
	if st.bridgeProblem != "" {
		st.drift = append(st.drift, st.bridgeProblem)
	}

	l, err := netlinksafe.LinkByName(name)
	if isNotFound(err) {
		st.drift = append(st.drift, fmt.Sprintf("host veth %s missing in %s", name, w.hostNetNS))
		return nil
	}
	if err != nil {
		return fmt.Errorf("look up host veth %s: %w", name, err)
	}
	st.host = l
	if _, ok := l.(*netlink.Veth); !ok {
		st.drift = append(st.drift, fmt.Sprintf("host interface %s is a %s link, not a veth", name, l.Type()))
		return nil
	}
	attrs := l.Attrs()
	if want := linkAlias(pod.Attachment); attrs.Alias != want {
		st.drift = append(st.drift, fmt.Sprintf("host veth %s has alias %q, want %q", name, attrs.Alias, want))
	}
	if attrs.Flags&net.FlagUp == 0 {
		st.drift = append(st.drift, fmt.Sprintf("host veth %s is down", name))
	}
	if nw.MTU != 0 && attrs.MTU != nw.MTU {
		st.drift = append(st.drift, fmt.Sprintf("host veth %s has MTU %d, want %d", name, attrs.MTU, nw.MTU))
	}
	if br == nil {
		return nil
	}
	if attrs.MasterIndex != br.Attrs().Index {
		st.drift = append(st.drift, fmt.Sprintf("host veth %s is not attached to bridge %s", name, nw.Name))
		return nil
	}
	pi, err := netlinksafe.LinkGetProtinfo(l)
	if err != nil {
		return fmt.Errorf("read bridge port flags of host veth %s: %w", name, err)
	}
	if !pi.Hairpin {
		st.drift = append(st.drift, fmt.Sprintf("hairpin mode is off on host veth %s", name))
	}
	return nil
}

// inspectPod checks the pod interface, its addresses and default routes.
// Run in the pod's netns, after inspectHost.
func inspectPod(st *state, nw *cni.NodeNetwork, pod *cni.Pod) error {
	where := fmt.Sprintf("in %s", pod.Netns)
	l, err := netlinksafe.LinkByName(pod.IfName)
	if isNotFound(err) {
		st.drift = append(st.drift, fmt.Sprintf("interface %s missing %s", pod.IfName, where))
		return nil
	}
	if err != nil {
		return fmt.Errorf("look up interface %s %s: %w", pod.IfName, where, err)
	}
	st.pod = l
	attrs := l.Attrs()
	if _, ok := l.(*netlink.Veth); !ok {
		st.drift = append(st.drift, fmt.Sprintf("interface %s %s is a %s link, not a veth", pod.IfName, where, l.Type()))
		return nil
	}
	if h := st.host; h != nil && (attrs.ParentIndex != h.Attrs().Index || h.Attrs().ParentIndex != attrs.Index) {
		st.drift = append(st.drift, fmt.Sprintf("interface %s %s is not the peer of host veth %s", pod.IfName, where, h.Attrs().Name))
	}
	if want := linkAlias(pod.Attachment); attrs.Alias != want {
		st.drift = append(st.drift, fmt.Sprintf("interface %s %s has alias %q, want %q", pod.IfName, where, attrs.Alias, want))
	}
	if attrs.Flags&net.FlagUp == 0 {
		st.drift = append(st.drift, fmt.Sprintf("interface %s %s is down", pod.IfName, where))
	}
	if nw.MTU != 0 && attrs.MTU != nw.MTU {
		st.drift = append(st.drift, fmt.Sprintf("interface %s %s has MTU %d, want %d", pod.IfName, where, attrs.MTU, nw.MTU))
	}

	addrs, err := netlinksafe.AddrList(l, netlink.FAMILY_ALL)
	if err != nil {
		return fmt.Errorf("list addresses of %s %s: %w", pod.IfName, where, err)
	}
	have := map[netip.Prefix]bool{}
	for _, a := range addrs {
		p, ok := netaddr.FromIPNet(a.IPNet)
		if !ok {
			continue
		}
		have[p] = true
		if p.Addr().IsGlobalUnicast() && !slices.ContainsFunc(pod.Addresses, func(w cni.Address) bool { return w.IP == p }) {
			st.drift = append(st.drift, fmt.Sprintf("unexpected address %s on %s %s", p, pod.IfName, where))
		}
	}
	for _, a := range pod.Addresses {
		if !have[a.IP] {
			st.drift = append(st.drift, fmt.Sprintf("address %s missing on %s %s", a.IP, pod.IfName, where))
		}
	}

	for _, gw := range defaultGateways(pod) {
		family := netlink.FAMILY_V6
		if gw.Is4() {
			family = netlink.FAMILY_V4
		}
		routes, err := netlinksafe.RouteList(l, family)
		if err != nil {
			return fmt.Errorf("list routes of %s %s: %w", pod.IfName, where, err)
		}
		gwIP := net.IP(gw.AsSlice())
		if !slices.ContainsFunc(routes, func(r netlink.Route) bool { return ip.IsIPNetZero(r.Dst) && gwIP.Equal(r.Gw) }) {
			st.drift = append(st.drift, fmt.Sprintf("default route via %s missing %s", gw, where))
		}
	}
	return nil
}

// teardown removes stale wiring so that Add can make it again: the host
// veth (and with it its peer), then a pod interface of ours that is left.
// Anything not ours is refused, never deleted.
func (w *Wiring) teardown(hostNS, podNS ns.NetNS, pod *cni.Pod, st *state) error {
	hostName := HostVethName(pod.Attachment)
	alias := linkAlias(pod.Attachment)
	if st.host != nil {
		if !isOurHostVeth(st.host, alias) {
			return fmt.Errorf("host interface name %s is taken by a %s link with alias %q, not nodenet's veth for container %s interface %s",
				hostName, st.host.Type(), st.host.Attrs().Alias, pod.ContainerID, pod.IfName)
		}
		if err := hostNS.Do(func(ns.NetNS) error { return delLink(hostName) }); err != nil {
			return err
		}
	}
	if st.pod == nil {
		return nil
	}
	return podNS.Do(func(ns.NetNS) error {
		l, err := netlinksafe.LinkByName(pod.IfName)
		if isNotFound(err) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("look up interface %s in %s: %w", pod.IfName, pod.Netns, err)
		}
		if _, ok := l.(*netlink.Veth); !ok || l.Attrs().Alias != alias {
			return fmt.Errorf("interface %s already exists in %s and is not nodenet's (a %s link with alias %q)", pod.IfName, pod.Netns, l.Type(), l.Attrs().Alias)
		}
		if err := netlink.LinkDel(l); err != nil && !isGone(err) {
			return fmt.Errorf("delete stale interface %s in %s: %w", pod.IfName, pod.Netns, err)
		}
		return nil
	})
}

// isOurHostVeth says whether l, found under the attachment's host veth
// name, is Add's: a veth with the attachment's alias, or with none (an
// Add interrupted before it set the alias).
func isOurHostVeth(l netlink.Link, alias string) bool {
	_, ok := l.(*netlink.Veth)
	return ok && (l.Attrs().Alias == alias || l.Attrs().Alias == "")
}

// delLink deletes the link by name; absent is fine. Run in its netns.
func delLink(name string) error {
	l, err := netlinksafe.LinkByName(name)
	if isNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("look up %s: %w", name, err)
	}
	if err := netlink.LinkDel(l); err != nil && !isGone(err) {
		return fmt.Errorf("delete %s: %w", name, err)
	}
	return nil
}

// openHost opens the node's netns, unless ctx is already done: every
// method starts here, so this is where a cancelled request stops.
func (w *Wiring) openHost(ctx context.Context) (ns.NetNS, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	n, err := ns.GetNS(w.hostNetNS)
	if err != nil {
		return nil, fmt.Errorf("open host netns %s: %w", w.hostNetNS, err)
	}
	return n, nil
}

// openPodNS opens the pod's netns; a missing one is cni.ErrNetnsNotFound.
func openPodNS(path string) (ns.NetNS, error) {
	if path == "" {
		return nil, fmt.Errorf("no pod netns given: %w", cni.ErrNetnsNotFound)
	}
	n, err := ns.GetNS(path)
	if isNetnsGone(err) {
		return nil, fmt.Errorf("pod netns %s: %w (%w)", path, cni.ErrNetnsNotFound, err)
	}
	if err != nil {
		return nil, fmt.Errorf("open pod netns %s: %w", path, err)
	}
	return n, nil
}

// setSysctl writes one sysctl of the calling thread's netns.
func setSysctl(name, value string) error {
	if _, err := sysctl.Sysctl(name, value); err != nil {
		return fmt.Errorf("set sysctl %s=%s: %w", name, value, err)
	}
	return nil
}

func isNotFound(err error) bool {
	var nf netlink.LinkNotFoundError
	return err != nil && errors.As(err, &nf)
}

// isGone recognizes a link deleted under our feet (with its peer).
func isGone(err error) bool {
	return errors.Is(err, unix.ENODEV) || isNotFound(err)
}

// isNetnsGone recognizes a netns path that is not (or no longer) a netns.
func isNetnsGone(err error) bool {
	var notExist ns.NSPathNotExistErr
	var notNS ns.NSPathNotNSErr
	return err != nil && (errors.As(err, &notExist) || errors.As(err, &notNS))
}
