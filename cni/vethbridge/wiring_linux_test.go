//go:build linux

package vethbridge

// Address plan (these addresses exist only inside the test's netnses):
//
//	node netns     bridge nn-test     10.244.1.1/24, fd00:10:244:1::1/64
//	pod 0          eth0               10.244.1.10/24, fd00:10:244:1::a/64
//	pod 1          eth0               10.244.1.11/24, fd00:10:244:1::b/64
//	pod 2          eth0               10.244.1.12/24, fd00:10:244:1::c/64
//	TCP            port 8080 on pod 1 and on the node's gateway addresses
//	DNS            10.96.0.10, search svc.cluster.local (the node's fallback)

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"os"
	"testing"
	"time"

	"github.com/containernetworking/cni/pkg/types"
	current "github.com/containernetworking/cni/pkg/types/100"
	"github.com/containernetworking/plugins/pkg/netlinksafe"
	"github.com/containernetworking/plugins/pkg/ns"
	"github.com/google/go-cmp/cmp"
	"github.com/vishvananda/netlink"

	"github.com/nodenet/nodenet/cni"
	"github.com/nodenet/nodenet/internal/netaddr"
)

func TestAddConnectsPodsWithRealPackets(t *testing.T) {
	requireRoot(t)
	for _, tc := range []struct {
		name      string
		dualStack bool
		mtu       int
		wantMTU   int
	}{
		{name: "IPv4 pods with MTU 1400 reach each other and the node", mtu: 1400, wantMTU: 1400},
		{name: "dual-stack pods with MTU 0 get the kernel's 1500 and reach each other and the node over both families", dualStack: true, wantMTU: 1500},
	} {
		t.Run(tc.name, func(t *testing.T) {
			node := newNode(t, nodeOptions{dualStack: tc.dualStack, mtu: tc.mtu})
			pods := []*cni.Pod{node.newPod(t, 0), node.newPod(t, 1)}
			nses := []ns.NetNS{node.podNS(pods[0]), node.podNS(pods[1])}
			for i, pod := range pods {
				res, err := node.w.Add(context.Background(), node.nw, pod)
				if err != nil {
					t.Fatalf("Add pod %d: %v", i, err)
				}
				host := link(t, node.ns, HostVethName(pod.Attachment))
				cont := link(t, nses[i], pod.IfName)
				if host == nil || cont == nil {
					t.Fatalf("pod %d: host veth %v, pod interface %v; want both", i, host, cont)
				}
				if diff := cmp.Diff(wantResult(node.nw, pod, host, cont), res); diff != "" {
					t.Errorf("pod %d result (-want +got):\n%s", i, diff)
				}
				if host.Attrs().MTU != tc.wantMTU || cont.Attrs().MTU != tc.wantMTU {
					t.Errorf("pod %d MTU: host %d, pod %d; want %d on both", i, host.Attrs().MTU, cont.Attrs().MTU, tc.wantMTU)
				}
				if !hairpin(t, node.ns, host.Attrs().Name) {
					t.Errorf("pod %d: hairpin mode is off on host veth %s", i, host.Attrs().Name)
				}
				if err := node.w.Check(context.Background(), node.nw, pod, res); err != nil {
					t.Errorf("Check pod %d right after Add: %v", i, err)
				}
				type sysctlWant struct {
					ns         ns.NetNS
					name, want string
				}
				wantSysctls := []sysctlWant{
					{nses[i], "net/ipv4/conf/eth0/arp_notify", "1"},
					{node.ns, "net/ipv6/conf/" + host.Attrs().Name + "/accept_ra", "0"},
				}
				if tc.dualStack {
					wantSysctls = append(wantSysctls, sysctlWant{nses[i], "net/ipv6/conf/eth0/accept_dad", "0"})
				}
				for _, s := range wantSysctls {
					if got := readSysctl(t, s.ns, s.name); got != s.want {
						t.Errorf("pod %d: sysctl %s = %s, want %s", i, s.name, got, s.want)
					}
				}
			}

			for _, a := range pods[1].Addresses {
				serveTCP(t, nses[1], netip.AddrPortFrom(a.IP.Addr(), 8080), "pod 1")
			}
			for _, gw := range node.nw.Gateways {
				serveTCP(t, node.ns, netip.AddrPortFrom(gw, 8080), "node")
			}
			for fam := range pods[0].Addresses {
				a0, a1 := pods[0].Addresses[fam].IP.Addr(), pods[1].Addresses[fam].IP.Addr()
				gw := node.nw.Gateways[fam]
				for _, p := range []struct {
					from ns.NetNS
					to   netip.Addr
				}{{nses[0], a1}, {nses[1], a0}, {nses[0], gw}, {nses[1], gw}} {
					if err := ping(p.from, p.to); err != nil {
						t.Error(err)
					}
				}
				for _, d := range []struct {
					to   netip.AddrPort
					want string
				}{{netip.AddrPortFrom(a1, 8080), "pod 1"}, {netip.AddrPortFrom(gw, 8080), "node"}} {
					got, err := dialTCP(nses[0], d.to)
					if err != nil {
						t.Error(err)
					} else if got != d.want {
						t.Errorf("tcp %s from pod 0 answered %q, want %q", d.to, got, d.want)
					}
				}
			}
		})
	}
}

// wantResult is the result Add must return for the links it made.
func wantResult(nw *cni.NodeNetwork, pod *cni.Pod, host, cont netlink.Link) *current.Result {
	res := &current.Result{
		CNIVersion: current.ImplementedSpecVersion,
		Interfaces: []*current.Interface{
			{Name: host.Attrs().Name, Mac: host.Attrs().HardwareAddr.String()},
			{Name: pod.IfName, Mac: cont.Attrs().HardwareAddr.String(), Sandbox: pod.Netns},
		},
		DNS: types.DNS{Nameservers: []string{"10.96.0.10"}, Search: []string{"svc.cluster.local"}},
	}
	for _, a := range pod.Addresses {
		res.IPs = append(res.IPs, &current.IPConfig{Interface: current.Int(1), Address: *netaddr.IPNet(a.IP), Gateway: a.Gateway.AsSlice()})
		dst := net.IPNet{IP: net.IPv6zero, Mask: net.CIDRMask(0, 128)}
		if a.IP.Addr().Is4() {
			dst = net.IPNet{IP: net.IPv4zero.To4(), Mask: net.CIDRMask(0, 32)}
		}
		res.Routes = append(res.Routes, &types.Route{Dst: dst, GW: a.Gateway.AsSlice()})
	}
	return res
}

func TestAddIsIdempotent(t *testing.T) {
	requireRoot(t)
	node := newNode(t, nodeOptions{dualStack: true, mtu: 1400})
	pod := node.newPod(t, 0)
	first, err := node.w.Add(context.Background(), node.nw, pod)
	if err != nil {
		t.Fatalf("first Add: %v", err)
	}
	index := link(t, node.ns, HostVethName(pod.Attachment)).Attrs().Index

	second, err := node.w.Add(context.Background(), node.nw, pod)
	if err != nil {
		t.Fatalf("second Add: %v", err)
	}
	if diff := cmp.Diff(first, second); diff != "" {
		t.Errorf("second Add returned another result (-first +second):\n%s", diff)
	}
	if got := link(t, node.ns, HostVethName(pod.Attachment)).Attrs().Index; got != index {
		t.Errorf("second Add remade the host veth: ifindex %d, was %d", got, index)
	}
	got, err := node.w.List(context.Background(), node.nw)
	if err != nil {
		t.Fatalf("List: %v", err)
	}
	if diff := cmp.Diff([]cni.Attachment{pod.Attachment}, got); diff != "" {
		t.Errorf("List after two Adds (-want +got):\n%s", diff)
	}
}

func TestAddReplacesStaleWiring(t *testing.T) {
	requireRoot(t)
	for _, tc := range []struct {
		name string
		// stale breaks or fakes the wiring of pod (already added when
		// added is true).
		added bool
		stale func(t *testing.T, node *testNode, pod *cni.Pod, podNS ns.NetNS)
	}{
		{
			name:  "a host veth detached from the bridge is replaced",
			added: true,
			stale: func(t *testing.T, node *testNode, pod *cni.Pod, _ ns.NetNS) {
				host := link(t, node.ns, HostVethName(pod.Attachment))
				in(t, node.ns, func() error { return netlink.LinkSetNoMaster(host) })
			},
		},
		{
			name:  "a pod interface that lost its address is replaced",
			added: true,
			stale: func(t *testing.T, _ *testNode, pod *cni.Pod, podNS ns.NetNS) {
				in(t, podNS, func() error {
					l, err := netlinksafe.LinkByName(pod.IfName)
					if err != nil {
						return err
					}
					return netlink.AddrDel(l, &netlink.Addr{IPNet: netaddr.IPNet(pod.Addresses[0].IP)})
				})
			},
		},
		{
			name:  "a pod that got other addresses is rewired with them",
			added: true,
			stale: func(_ *testing.T, _ *testNode, pod *cni.Pod, _ ns.NetNS) {
				pod.Addresses[0].IP = podIP(podCIDR4, 20)
			},
		},
		{
			name: "a half-made veth pair without aliases, off the bridge, is replaced",
			stale: func(t *testing.T, node *testNode, pod *cni.Pod, podNS ns.NetNS) {
				in(t, podNS, func() error {
					attrs := netlink.NewLinkAttrs()
					attrs.Name = pod.IfName
					return netlink.LinkAdd(&netlink.Veth{LinkAttrs: attrs, PeerName: HostVethName(pod.Attachment), PeerNamespace: netlink.NsFd(int(node.ns.Fd()))})
				})
			},
		},
		{
			name: "a pod interface of ours whose host end is gone is replaced",
			stale: func(t *testing.T, _ *testNode, pod *cni.Pod, podNS ns.NetNS) {
				in(t, podNS, func() error { return addVeth(pod.IfName, "stale0", linkAlias(pod.Attachment), "") })
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			node := newNode(t, nodeOptions{mtu: 1400})
			pod := node.newPod(t, 0)
			n := node.podNS(pod)
			if tc.added {
				node.add(t, pod)
			}
			tc.stale(t, node, pod, n)
			if err := node.w.Check(context.Background(), node.nw, pod, nil); err == nil {
				t.Fatal("Check passed on the stale wiring; the test broke nothing")
			}

			res, err := node.w.Add(context.Background(), node.nw, pod)
			if err != nil {
				t.Fatalf("Add over stale wiring: %v", err)
			}
			if err := node.w.Check(context.Background(), node.nw, pod, res); err != nil {
				t.Errorf("Check after Add: %v", err)
			}
			if err := ping(n, gw4); err != nil {
				t.Error(err)
			}
		})
	}
}

func TestAddRefusesInterfacesThatArentOurs(t *testing.T) {
	requireRoot(t)
	for _, tc := range []struct {
		name    string
		foreign func(t *testing.T, node *testNode, pod *cni.Pod, podNS ns.NetNS) (ns.NetNS, string)
		wantErr string
	}{
		{
			name: "a pod interface of someone else's with the pod's name is refused and kept",
			foreign: func(t *testing.T, _ *testNode, pod *cni.Pod, podNS ns.NetNS) (ns.NetNS, string) {
				in(t, podNS, func() error { return addVeth(pod.IfName, "other0", "", "") })
				return podNS, pod.IfName
			},
			wantErr: "interface eth0 already exists",
		},
		{
			name: "a host link of someone else's with the host veth's name is refused and kept",
			foreign: func(t *testing.T, node *testNode, pod *cni.Pod, _ ns.NetNS) (ns.NetNS, string) {
				name := HostVethName(pod.Attachment)
				in(t, node.ns, func() error {
					attrs := netlink.NewLinkAttrs()
					attrs.Name = name
					return netlink.LinkAdd(&netlink.Bridge{LinkAttrs: attrs})
				})
				return node.ns, name
			},
			wantErr: "is taken by a bridge link",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			node := newNode(t, nodeOptions{})
			pod := node.newPod(t, 0)
			where, name := tc.foreign(t, node, pod, node.podNS(pod))
			_, err := node.w.Add(context.Background(), node.nw, pod)
			mustContain(t, err, tc.wantErr)
			if link(t, where, name) == nil {
				t.Errorf("Add deleted %s, which isn't nodenet's", name)
			}
		})
	}
}

func TestAddRollsBackEveryStep(t *testing.T) {
	requireRoot(t)
	node := newNode(t, nodeOptions{dualStack: true, mtu: 1400})
	pod := node.newPod(t, 0)
	n := node.podNS(pod)
	failures := 0
	for limit := 0; ; limit++ {
		if limit > 50 {
			t.Fatal("Add kept failing")
		}
		ctx := &errAfter{Context: context.Background(), limit: limit}
		_, err := node.w.Add(ctx, node.nw, pod)
		if err == nil {
			break
		}
		failures++
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("Add stopped after %d context checks with %v, want context.Canceled", limit, err)
		}
		if l := link(t, node.ns, HostVethName(pod.Attachment)); l != nil {
			t.Errorf("Add stopped after %d context checks left host veth %s behind", limit, l.Attrs().Name)
		}
		if l := link(t, n, pod.IfName); l != nil {
			t.Errorf("Add stopped after %d context checks left %s behind in the pod", limit, pod.IfName)
		}
	}
	// Before anything, after the veth, after attaching it, after
	// configuring the pod end, while waiting for the port.
	if failures < 4 {
		t.Errorf("Add failed at only %d steps; the test no longer reaches the rollback", failures)
	}
	if err := node.w.Check(context.Background(), node.nw, pod, nil); err != nil {
		t.Errorf("Check after the Add that succeeded: %v", err)
	}
}

func TestCheck(t *testing.T) {
	requireRoot(t)
	node := newNode(t, nodeOptions{dualStack: true, mtu: 1400})
	inNode := func(f func(host netlink.Link) error) func(*testing.T, *cni.Pod, ns.NetNS, *current.Result) {
		return func(t *testing.T, pod *cni.Pod, _ ns.NetNS, _ *current.Result) {
			host := link(t, node.ns, HostVethName(pod.Attachment))
			in(t, node.ns, func() error { return f(host) })
		}
	}
	inPod := func(f func(pod *cni.Pod, l netlink.Link) error) func(*testing.T, *cni.Pod, ns.NetNS, *current.Result) {
		return func(t *testing.T, pod *cni.Pod, n ns.NetNS, _ *current.Result) {
			l := link(t, n, pod.IfName)
			in(t, n, func() error { return f(pod, l) })
		}
	}
	for _, tc := range []struct {
		name    string
		drift   func(t *testing.T, pod *cni.Pod, podNS ns.NetNS, prev *current.Result)
		wantErr string // "" = Check passes
	}{
		{name: "the wiring Add made passes"},
		{
			name: "a deleted IPv4 default route is reported with its gateway and netns",
			drift: inPod(func(pod *cni.Pod, l netlink.Link) error {
				dst := defaultDst(gw4)
				return netlink.RouteDel(&netlink.Route{LinkIndex: l.Attrs().Index, Dst: &dst, Gw: gw4.AsSlice()})
			}),
			wantErr: "default route via 10.244.1.1 missing in /",
		},
		{
			name: "a deleted IPv6 default route is reported",
			drift: inPod(func(pod *cni.Pod, l netlink.Link) error {
				dst := defaultDst(gw6)
				return netlink.RouteDel(&netlink.Route{LinkIndex: l.Attrs().Index, Dst: &dst, Gw: gw6.AsSlice()})
			}),
			wantErr: "default route via fd00:10:244:1::1 missing",
		},
		{
			name: "a removed address is reported",
			drift: inPod(func(pod *cni.Pod, l netlink.Link) error {
				return netlink.AddrDel(l, &netlink.Addr{IPNet: netaddr.IPNet(pod.Addresses[1].IP)})
			}),
			wantErr: "address fd00:10:244:1::a/64 missing on eth0",
		},
		{
			name: "an extra address is reported",
			drift: inPod(func(pod *cni.Pod, l netlink.Link) error {
				return netlink.AddrAdd(l, &netlink.Addr{IPNet: netaddr.IPNet(podIP(podCIDR4, 99))})
			}),
			wantErr: "unexpected address 10.244.1.109/24",
		},
		{
			name:    "a pod interface that is down is reported",
			drift:   inPod(func(_ *cni.Pod, l netlink.Link) error { return netlink.LinkSetDown(l) }),
			wantErr: "is down",
		},
		{
			name:    "a changed pod MTU is reported",
			drift:   inPod(func(_ *cni.Pod, l netlink.Link) error { return netlink.LinkSetMTU(l, 1300) }),
			wantErr: "has MTU 1300, want 1400",
		},
		{
			name:    "hairpin mode turned off is reported",
			drift:   inNode(func(host netlink.Link) error { return netlink.LinkSetHairpin(host, false) }),
			wantErr: "hairpin mode is off on host veth nn",
		},
		{
			name:    "a host veth detached from the bridge is reported",
			drift:   inNode(func(host netlink.Link) error { return netlink.LinkSetNoMaster(host) }),
			wantErr: "is not attached to bridge nn-test",
		},
		{
			name:    "a deleted host veth is reported, and the pod end it took along",
			drift:   inNode(func(host netlink.Link) error { return netlink.LinkDel(host) }),
			wantErr: "host veth nn",
		},
		{
			name: "a prevResult with another address is reported",
			drift: func(_ *testing.T, _ *cni.Pod, _ ns.NetNS, prev *current.Result) {
				prev.IPs[0].Address = *netaddr.IPNet(podIP(podCIDR4, 50))
			},
			wantErr: "prevResult address 10.244.1.60/24 is not the pod's",
		},
		{
			name: "a prevResult with another pod MAC is reported",
			drift: func(_ *testing.T, _ *cni.Pod, _ ns.NetNS, prev *current.Result) {
				prev.Interfaces[1].Mac = "02:00:00:00:00:01"
			},
			wantErr: "prevResult says 02:00:00:00:00:01",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pod := node.newPod(t, 0)
			n := node.podNS(pod)
			prev, err := node.w.Add(context.Background(), node.nw, pod)
			if err != nil {
				t.Fatalf("Add: %v", err)
			}
			t.Cleanup(func() {
				if err := node.w.Del(context.Background(), node.nw, pod); err != nil {
					t.Errorf("Del: %v", err)
				}
			})
			if tc.drift != nil {
				tc.drift(t, pod, n, prev)
			}
			err = node.w.Check(context.Background(), node.nw, pod, prev)
			if tc.wantErr == "" {
				if err != nil {
					t.Fatalf("Check: %v", err)
				}
				return
			}
			mustContain(t, err, tc.wantErr)
		})
	}
}

func TestAGoneNetnsIsNotFound(t *testing.T) {
	requireRoot(t)
	node := newNode(t, nodeOptions{})
	t.Run("Add into a netns that is gone reports cni.ErrNetnsNotFound", func(t *testing.T) {
		pod := node.newPod(t, 0)
		removeNetNS(t, node.podNS(pod))
		_, err := node.w.Add(context.Background(), node.nw, pod)
		if !errors.Is(err, cni.ErrNetnsNotFound) {
			t.Fatalf("Add = %v, want cni.ErrNetnsNotFound", err)
		}
	})
	t.Run("Check of a pod whose netns is gone reports cni.ErrNetnsNotFound", func(t *testing.T) {
		pod := node.newPod(t, 0)
		prev, err := node.w.Add(context.Background(), node.nw, pod)
		if err != nil {
			t.Fatalf("Add: %v", err)
		}
		removeNetNS(t, node.podNS(pod))
		err = node.w.Check(context.Background(), node.nw, pod, prev)
		if !errors.Is(err, cni.ErrNetnsNotFound) {
			t.Fatalf("Check = %v, want cni.ErrNetnsNotFound", err)
		}
		if err := node.w.Del(context.Background(), node.nw, pod); err != nil {
			t.Fatalf("Del: %v", err)
		}
	})
}

func TestConcurrentAddsAndDelsOfDifferentPods(t *testing.T) {
	requireRoot(t)
	node := newNode(t, nodeOptions{dualStack: true, mtu: 1400})
	var pods []*cni.Pod
	var want []cni.Attachment
	for i := range 8 {
		pods = append(pods, node.newPod(t, i))
		want = append(want, pods[i].Attachment)
	}
	run := func(op func(*cni.Pod) error) {
		t.Helper()
		errs := make(chan error, len(pods))
		for _, p := range pods {
			go func() { errs <- op(p) }()
		}
		for range pods {
			if err := <-errs; err != nil {
				t.Error(err)
			}
		}
	}
	run(func(p *cni.Pod) error { _, err := node.w.Add(context.Background(), node.nw, p); return err })
	got, err := node.w.List(context.Background(), node.nw)
	if err != nil {
		t.Fatalf("List: %v", err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("List after concurrent Adds (-want +got):\n%s", diff)
	}
	if err := ping(node.podNS(pods[0]), pods[7].Addresses[1].IP.Addr()); err != nil {
		t.Error(err)
	}
	run(func(p *cni.Pod) error { return node.w.Check(context.Background(), node.nw, p, nil) })
	run(func(p *cni.Pod) error { return node.w.Del(context.Background(), node.nw, p) })
	if got, err := node.w.List(context.Background(), node.nw); err != nil || len(got) != 0 {
		t.Errorf("List after concurrent Dels = %v, %v; want nothing", got, err)
	}
}

func TestDel(t *testing.T) {
	requireRoot(t)
	node := newNode(t, nodeOptions{})
	for _, tc := range []struct {
		name string
		// prepare runs after the pod was added (if added) and returns the
		// pod Del is called with.
		added   bool
		prepare func(t *testing.T, pod *cni.Pod, podNS ns.NetNS) *cni.Pod
		// keep names a link in the pod that must survive Del.
		keep string
	}{
		{
			name:    "Del removes the host veth and the pod interface",
			added:   true,
			prepare: func(_ *testing.T, pod *cni.Pod, _ ns.NetNS) *cni.Pod { return pod },
		},
		{
			name:  "Del with an empty netns removes the host veth",
			added: true,
			prepare: func(_ *testing.T, pod *cni.Pod, _ ns.NetNS) *cni.Pod {
				p := *pod
				p.Netns = ""
				return &p
			},
		},
		{
			name:  "Del after the netns is gone succeeds",
			added: true,
			prepare: func(t *testing.T, pod *cni.Pod, n ns.NetNS) *cni.Pod {
				removeNetNS(t, n)
				return pod
			},
		},
		{
			name:    "Del of an attachment that was never added succeeds",
			prepare: func(_ *testing.T, pod *cni.Pod, _ ns.NetNS) *cni.Pod { return pod },
		},
		{
			name: "Del removes a pod interface of ours whose host end is gone",
			prepare: func(t *testing.T, pod *cni.Pod, n ns.NetNS) *cni.Pod {
				in(t, n, func() error { return addVeth(pod.IfName, "stale0", linkAlias(pod.Attachment), "") })
				return pod
			},
		},
		{
			name: "Del keeps a pod interface that isn't ours",
			prepare: func(t *testing.T, pod *cni.Pod, n ns.NetNS) *cni.Pod {
				in(t, n, func() error { return addVeth(pod.IfName, "other0", "", "") })
				return pod
			},
			keep: "eth0",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pod := node.newPod(t, 0)
			n := node.podNS(pod)
			if tc.added {
				node.add(t, pod)
			}
			delPod := tc.prepare(t, pod, n)
			for i := range 2 { // the second Del finds nothing and must succeed too
				if err := node.w.Del(context.Background(), node.nw, delPod); err != nil {
					t.Fatalf("Del #%d: %v", i+1, err)
				}
			}
			if l := link(t, node.ns, HostVethName(pod.Attachment)); l != nil {
				t.Errorf("host veth %s survived Del", l.Attrs().Name)
			}
			if _, err := os.Stat(pod.Netns); err != nil {
				return // the netns is gone, and its links with it
			}
			l := link(t, n, pod.IfName)
			switch {
			case tc.keep == "" && l != nil:
				t.Errorf("pod interface %s survived Del", pod.IfName)
			case tc.keep != "" && l == nil:
				t.Errorf("Del deleted %s, which isn't nodenet's", tc.keep)
			}
		})
	}
}

func TestList(t *testing.T) {
	requireRoot(t)
	node := newNode(t, nodeOptions{})
	pods := []*cni.Pod{node.newPod(t, 0), node.newPod(t, 1), node.newPod(t, 2)}
	for _, p := range pods {
		node.add(t, p)
	}
	// A veth on the bridge that isn't ours, and one with an alias of ours
	// but not our name for it: neither is listed.
	in(t, node.ns, func() error {
		if err := addVeth("foreign0", "foreign0p", "", testBridge); err != nil {
			return err
		}
		return addVeth("foreign1", "foreign1p", linkAlias(cni.Attachment{ContainerID: "x", IfName: "eth0"}), testBridge)
	})
	list := func() []cni.Attachment {
		t.Helper()
		got, err := node.w.List(context.Background(), node.nw)
		if err != nil {
			t.Fatalf("List: %v", err)
		}
		return got
	}
	want := []cni.Attachment{pods[0].Attachment, pods[1].Attachment, pods[2].Attachment}
	if diff := cmp.Diff(want, list()); diff != "" {
		t.Errorf("List after three Adds (-want +got):\n%s", diff)
	}
	if err := node.w.Del(context.Background(), node.nw, pods[1]); err != nil {
		t.Fatalf("Del: %v", err)
	}
	if diff := cmp.Diff([]cni.Attachment{pods[0].Attachment, pods[2].Attachment}, list()); diff != "" {
		t.Errorf("List after deleting pod 1 (-want +got):\n%s", diff)
	}
}

func TestReady(t *testing.T) {
	requireRoot(t)
	for _, tc := range []struct {
		name    string
		opts    nodeOptions
		wantErr string // "" = ready
	}{
		{name: "a bridge that is up with every gateway is ready", opts: nodeOptions{dualStack: true}},
		{name: "a missing bridge is reported by name", opts: nodeOptions{noBridge: true}, wantErr: "bridge nn-test not found in /"},
		{name: "a bridge that is down is reported", opts: nodeOptions{bridgeDown: true}, wantErr: "bridge nn-test is down"},
		{name: "a bridge without the IPv6 gateway is reported", opts: nodeOptions{dualStack: true, noGateway6: true}, wantErr: "bridge nn-test lacks gateway fd00:10:244:1::1 of pod CIDR fd00:10:244:1::/64"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			node := newNode(t, tc.opts)
			err := node.w.Ready(context.Background(), node.nw)
			if tc.wantErr == "" {
				if err != nil {
					t.Fatalf("Ready: %v", err)
				}
				return
			}
			mustContain(t, err, tc.wantErr)
		})
	}

	t.Run("a link that isn't a bridge is reported", func(t *testing.T) {
		node := newNode(t, nodeOptions{noBridge: true})
		in(t, node.ns, func() error { return addVeth(testBridge, "peer0", "", "") })
		mustContain(t, node.w.Ready(context.Background(), node.nw), "nn-test in "+node.ns.Path()+" is a veth link, not a bridge")
	})

	t.Run("Add fails naming the missing bridge and leaves nothing behind", func(t *testing.T) {
		node := newNode(t, nodeOptions{noBridge: true})
		pod := node.newPod(t, 0)
		_, err := node.w.Add(context.Background(), node.nw, pod)
		mustContain(t, err, "bridge nn-test not found")
		if l := link(t, node.podNS(pod), pod.IfName); l != nil {
			t.Errorf("failed Add left %s in the pod", pod.IfName)
		}
	})
}

func TestNew(t *testing.T) {
	requireRoot(t)
	t.Run("a path that is not a netns is refused", func(t *testing.T) {
		_, err := New(Options{HostNetNS: t.TempDir()})
		mustContain(t, err, "host netns /")
	})
	t.Run("an empty HostNetNS means the agent's own netns", func(t *testing.T) {
		w, err := New(Options{})
		if err != nil {
			t.Fatalf("New: %v", err)
		}
		// Read-only: a bridge that no agent's netns has.
		nw := &cni.NodeNetwork{Name: "nn-absent0"}
		mustContain(t, w.Ready(context.Background(), nw), "bridge nn-absent0 not found in /proc/self/ns/net")
	})
}

// BenchmarkAddDel measures one Add and one Del of a pod whose netns
// already exists (the runtime makes it before ADD); add-ns/op and
// del-ns/op split the time between the two.
func BenchmarkAddDel(b *testing.B) {
	requireRoot(b)
	node := newNode(b, nodeOptions{mtu: 1400})
	pod := node.newPod(b, 0)
	ctx := context.Background()
	var addTime, delTime time.Duration
	n := 0
	for b.Loop() {
		start := time.Now()
		if _, err := node.w.Add(ctx, node.nw, pod); err != nil {
			b.Fatalf("Add: %v", err)
		}
		mid := time.Now()
		if err := node.w.Del(ctx, node.nw, pod); err != nil {
			b.Fatalf("Del: %v", err)
		}
		addTime += mid.Sub(start)
		delTime += time.Since(mid)
		n++
	}
	b.ReportMetric(float64(addTime.Nanoseconds())/float64(n), "add-ns/op")
	b.ReportMetric(float64(delTime.Nanoseconds())/float64(n), "del-ns/op")
}
