package main

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	gnft "github.com/google/nftables"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/nodenet/nodenet/cni"
	"github.com/nodenet/nodenet/cni/hostport"
	"github.com/nodenet/nodenet/cni/vethbridge"
	"github.com/nodenet/nodenet/config"
	"github.com/nodenet/nodenet/overlay/egress"
	"github.com/nodenet/nodenet/overlay/linuxnet"
	"github.com/nodenet/nodenet/proxy/nftables"
)

// cleanupSupported: this OS has a cleanup.
const cleanupSupported = true

// nftTables are the tables (family inet) of the agent's parts: the
// service proxy, hostPorts and pod egress masquerading.
var nftTables = []string{nftables.TableName, hostport.DefaultTableName, egress.TableName}

// inspectDataplane adds what the agent programmed into this network
// namespace to the plan: its nftables tables, the pods' host veths, the
// vxlan device and the bridge, and the routes it added elsewhere. The
// veths of pods, and anything else on the bridge, are users.
func inspectDataplane(cfg *config.AgentConfiguration, p *cleanupPlan) error {
	if err := inspectNFTables(p); err != nil {
		return err
	}
	return inspectLinks(cfg, p)
}

func inspectNFTables(p *cleanupPlan) error {
	conn, err := gnft.New()
	if err != nil {
		return fmt.Errorf("open nftables: %w", err)
	}
	tables, err := conn.ListTablesOfFamily(gnft.TableFamilyINet)
	if err != nil {
		return fmt.Errorf("list the nftables tables: %w", err)
	}
	for _, name := range nftTables {
		if slices.ContainsFunc(tables, func(t *gnft.Table) bool { return t.Name == name }) {
			p.add("nftables table inet "+name, func() error { return deleteTable(name) })
		}
	}
	return nil
}

// deleteTable deletes table inet name with everything in it, in one
// netlink transaction; a table already gone is fine.
func deleteTable(name string) error {
	conn, err := gnft.New()
	if err != nil {
		return err
	}
	conn.DelTable(&gnft.Table{Name: name, Family: gnft.TableFamilyINet})
	if err := conn.Flush(); err != nil && !errors.Is(err, unix.ENOENT) {
		return err
	}
	return nil
}

func inspectLinks(cfg *config.AgentConfiguration, p *cleanupPlan) error {
	links, err := netlink.LinkList()
	if err != nil {
		return fmt.Errorf("list links: %w", err)
	}
	names := make(map[int]string, len(links))
	byName := make(map[string]netlink.Link, len(links))
	for _, l := range links {
		names[l.Attrs().Index] = l.Attrs().Name
		byName[l.Attrs().Name] = l
	}

	// The pods' host veths, as the wiring recognizes them (name and
	// alias), attached to the bridge or not.
	wiring, err := vethbridge.New(vethbridge.Options{})
	if err != nil {
		return err
	}
	attachments, err := wiring.List(context.Background(), nil)
	if err != nil {
		return fmt.Errorf("list the pods' veths: %w", err)
	}
	veths := make(map[string]cni.Attachment, len(attachments))
	for _, a := range attachments {
		veths[vethbridge.HostVethName(a)] = a
	}

	bridgeName := cfg.Network.Name
	var bridge *netlink.Bridge
	if l, ok := byName[bridgeName]; ok {
		if br, ok := l.(*netlink.Bridge); ok {
			bridge = br
		} else {
			p.keep("link %s: a %s, not the bridge nodenet makes", bridgeName, l.Type())
		}
	}
	for _, l := range links {
		name := l.Attrs().Name
		a, ours := veths[name]
		onBridge := bridge != nil && l.Attrs().MasterIndex == bridge.Attrs().Index
		switch {
		case ours:
			pod := fmt.Sprintf("container %s (%s)", shortID(a.ContainerID), a.IfName)
			p.users = append(p.users, fmt.Sprintf("veth %s of %s", name, pod))
			p.add(fmt.Sprintf("veth %s (%s; its pod end goes with it)", name, pod), deleteLink(name))
		case onBridge:
			p.users = append(p.users, fmt.Sprintf("%s %s, a port of bridge %s", l.Type(), name, bridgeName))
		}
	}

	vni := uint32(config.DefaultVNI)
	if cfg.Network.VXLAN != nil && cfg.Network.VXLAN.VNI > 0 {
		vni = uint32(cfg.Network.VXLAN.VNI)
	}
	vxName := linuxnet.VXLANDeviceName(bridgeName, vni)
	var vxlan *netlink.Vxlan
	if l, ok := byName[vxName]; ok {
		if vx, ok := l.(*netlink.Vxlan); ok {
			vxlan = vx
		} else {
			p.keep("link %s: a %s, not the vxlan device nodenet makes", vxName, l.Type())
		}
	}

	// Routes nodenet added (its protocol, the main table).
	routes, err := netlink.RouteListFiltered(netlink.FAMILY_ALL,
		&netlink.Route{Protocol: linuxnet.RouteProtocol, Table: unix.RT_TABLE_MAIN},
		netlink.RT_FILTER_PROTOCOL|netlink.RT_FILTER_TABLE)
	if err != nil {
		return fmt.Errorf("list routes: %w", err)
	}
	onVXLAN := 0
	var elsewhere []netlink.Route
	for _, r := range routes {
		if vxlan != nil && r.LinkIndex == vxlan.Attrs().Index {
			onVXLAN++
			continue
		}
		elsewhere = append(elsewhere, r)
	}

	if vxlan != nil {
		neighs, err := netlink.NeighList(vxlan.Attrs().Index, netlink.FAMILY_V4)
		if err != nil {
			return fmt.Errorf("list the neighbours of %s: %w", vxName, err)
		}
		neighs = slices.DeleteFunc(neighs, func(n netlink.Neigh) bool { return n.State&netlink.NUD_PERMANENT == 0 })
		fdb, err := netlink.NeighList(vxlan.Attrs().Index, unix.AF_BRIDGE)
		if err != nil {
			return fmt.Errorf("list the FDB of %s: %w", vxName, err)
		}
		p.add(fmt.Sprintf("vxlan device %s (VNI %d, with its %s, %s and %s)", vxName, vxlan.VxlanId,
			plural(onVXLAN, "route"), plural(len(neighs), "neighbour"), fdbEntries(len(fdb))), deleteLink(vxName))
	}
	if bridge != nil {
		addrs, err := netlink.AddrList(bridge, netlink.FAMILY_ALL)
		if err != nil {
			return fmt.Errorf("list the addresses of %s: %w", bridgeName, err)
		}
		var gateways []string
		for _, a := range addrs {
			if a.IP.IsLinkLocalUnicast() {
				continue
			}
			gateways = append(gateways, a.IPNet.String())
		}
		what := "bridge " + bridgeName
		if len(gateways) > 0 {
			what += fmt.Sprintf(" (with its addresses %s and their routes)", strings.Join(gateways, ", "))
		}
		p.add(what, deleteLink(bridgeName))
	}
	for _, r := range elsewhere {
		p.add("route "+describeRoute(r, names), deleteRoute(r))
	}
	return nil
}

func fdbEntries(n int) string {
	if n == 1 {
		return "1 FDB entry"
	}
	return fmt.Sprintf("%d FDB entries", n)
}

// deleteLink returns a remover of link name; one already gone is fine.
func deleteLink(name string) func() error {
	return func() error {
		l, err := netlink.LinkByName(name)
		var notFound netlink.LinkNotFoundError
		if errors.As(err, &notFound) {
			return nil
		}
		if err != nil {
			return err
		}
		if err := netlink.LinkDel(l); err != nil && !errors.Is(err, unix.ENODEV) {
			return err
		}
		return nil
	}
}

// deleteRoute returns a remover of r; one already gone is fine.
func deleteRoute(r netlink.Route) func() error {
	return func() error {
		if err := netlink.RouteDel(&r); err != nil && !errors.Is(err, unix.ESRCH) {
			return err
		}
		return nil
	}
}

// describeRoute writes r as ip route shows it.
func describeRoute(r netlink.Route, links map[int]string) string {
	dst := "default"
	if r.Dst != nil {
		dst = r.Dst.String()
	}
	s := dst
	if r.Gw != nil {
		s += " via " + r.Gw.String()
	}
	if name, ok := links[r.LinkIndex]; ok {
		s += " dev " + name
	}
	s += fmt.Sprintf(" proto %d", r.Protocol)
	if r.Flags&int(netlink.FLAG_ONLINK) != 0 {
		s += " onlink"
	}
	return s
}
