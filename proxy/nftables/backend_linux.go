package nftables

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"reflect"
	"slices"
	"strings"
	"sync"
	"time"

	"k8s.io/klog/v2"
	"sigs.k8s.io/knftables"

	"github.com/nodenet/nodenet/internal/nftnl"
	"github.com/nodenet/nodenet/proxy"
)

// Options configure New.
type Options struct {
	// NFT, if set, runs the backend's transactions through knftables
	// instead of netlink: an Interface for the inet family and table
	// TableName. Tests and `nodenetctl proxy render` pass
	// knftables.NewFake(knftables.InetFamily, TableName); a debugging
	// session may pass knftables.New, which runs nft. Nil (the agent):
	// the backend programs the kernel itself over a netlink socket
	// opened by New, in the network namespace New runs in, and never
	// starts nft.
	NFT knftables.Interface
	// Families are the IP families to program; service ports of other
	// families are ignored. Required.
	Families []proxy.IPFamily
	// LocalTrafficCIDRs say which sources are this cluster's pods
	// (detect-local: the cluster CIDRs, or this node's pod CIDRs). Other
	// sources reaching a cluster IP are masqueraded, and with eTP Local
	// these sources may still use cluster-wide endpoints. Empty for a
	// family: no masquerading of cluster IP traffic and no pod
	// short-circuit in that family, as kube-proxy without detect-local.
	LocalTrafficCIDRs []netip.Prefix
	// ServiceCIDRs are where cluster IPs come from: traffic to an address
	// inside them that is no cluster IP is dropped.
	ServiceCIDRs []netip.Prefix
	// NodePortAddresses limit the local addresses node ports answer on; a
	// family with no prefix here answers on all of its local addresses
	// (kube-proxy's rule), loopback excepted.
	NodePortAddresses []netip.Prefix
	// NodeIPs are this node's IPs (its primary IP per family, as
	// kube-proxy's node IPs). When loadBalancerSourceRanges include one
	// of them, the service's load-balancer IPs are allowed as sources
	// too: a VIP-mode load-balancer IP is often a local address, so the
	// node's own connections to it loop back with it as their source.
	// Empty for a family: no such exception in that family.
	NodeIPs []netip.Addr
	// MasqueradeAll masquerades all traffic to cluster IPs.
	MasqueradeAll bool
	// MasqueradeMark is the packet mark bit that asks for masquerading;
	// 0 means 0x4000 (kube-proxy's default bit 14).
	MasqueradeMark uint32
	// Conntrack, if set, is called after each successful sync to flush
	// the conntrack entries the sync made stale.
	Conntrack Conntrack
	// Observe, if set, is called after each nft transaction with its
	// kind ("full-sync", "partial-sync" or "stale-chains"), its error and
	// how long building and running it took.
	Observe func(op string, err error, d time.Duration)
	// Logger receives structured logs; the zero value uses klog's.
	Logger klog.Logger
}

// Conntrack flushes the conntrack entries a sync made stale: NAT is
// decided on a flow's first packet, so a UDP or SCTP client that keeps its
// source port would otherwise stick to an endpoint that is gone, or to the
// reject of a service that now has endpoints. proxy/conntrack's Cleaner
// implements it. prev is the state last programmed (nil before the first
// sync), next the state just programmed, changed the keys that differ
// between them (nil: any key may).
type Conntrack interface {
	Flush(prev, next *proxy.State, changed map[proxy.ServicePortKey]struct{}) error
}

// staleChainDelay is how long a chain whose vmap element was deleted must
// wait before it can be deleted: before kernel 6.2 the kernel notices a
// little later that the chain is no longer referenced. Until then it is
// kept empty.
const staleChainDelay = time.Second

// Backend is the Linux proxy.Backend: it programs the table inet nodenet
// (see the package documentation for its layout).
type Backend struct {
	tr            transport
	log           klog.Logger
	conntrack     Conntrack
	observe       func(string, error, time.Duration)
	fams          []*family
	byFamily      map[proxy.IPFamily]*family
	maps          map[string]bool // the names of the per-family maps
	mark          string          // the masquerade mark, as nft spells it
	setMark       string          // the statement that sets it
	masqueradeAll bool
	now           func() time.Time

	mu sync.Mutex
	// rebuild is set until the first successful sync and after every
	// failed one: the next sync replaces the table, whatever its content
	// (unless it is still the first, which may adopt it).
	rebuild bool
	// first is set until the first successful sync: the table, if any,
	// is an earlier run's, which adopt may take over as it is.
	first bool
	ports map[proxy.ServicePortKey]*portState // what the table holds
	reg   *registry
	picks map[string]int       // shared pick chains in the table: how many ports use each
	stale map[string]time.Time // emptied chains waiting to be deleted
	prev  *proxy.State         // the state last programmed, for Conntrack
	// fp is the fingerprint of what the table holds, recorded in it as
	// the name of an empty marker chain; skeletonFP is its skeleton's
	// part.
	fp, skeletonFP fingerprint
	hasher         stateHasher
}

// portState is a programmed service port: its plan can be recomputed
// from sp, which the brain never mutates.
type portState struct {
	owner string // sp.Key.String(): the registry owner and sort key
	sp    *proxy.ServicePort
	hash  fingerprint // of its plan, part of the state fingerprint
}

var _ proxy.Backend = (*Backend)(nil)

// New checks opts and returns a Backend. It does not touch the table: the
// first Sync adopts the table inet nodenet holds if it is exactly the one
// it would write, and replaces it otherwise.
func New(opts Options) (*Backend, error) {
	b := &Backend{
		log:           opts.Logger,
		conntrack:     opts.Conntrack,
		observe:       opts.Observe,
		byFamily:      map[proxy.IPFamily]*family{},
		maps:          map[string]bool{},
		masqueradeAll: opts.MasqueradeAll,
		now:           time.Now,
		rebuild:       true,
		first:         true,
		ports:         map[proxy.ServicePortKey]*portState{},
		reg:           newRegistry(0),
		picks:         map[string]int{},
		stale:         map[string]time.Time{},
	}
	if b.log.GetSink() == nil {
		b.log = klog.Background()
	}
	b.log = b.log.WithName("nftables")
	if len(opts.Families) == 0 {
		return nil, errors.New("nftables: no IP family to program")
	}
	for _, fam := range opts.Families {
		if fam != proxy.IPv4 && fam != proxy.IPv6 {
			return nil, fmt.Errorf("nftables: unknown IP family %q", fam)
		}
		if b.byFamily[fam] != nil {
			continue
		}
		f := newFamily(fam)
		var err error
		if f.localTrafficPrefixes, err = familyPrefixes(fam, opts.LocalTrafficCIDRs, "local traffic CIDR"); err != nil {
			return nil, err
		}
		if f.serviceCIDRPrefixes, err = familyPrefixes(fam, opts.ServiceCIDRs, "service CIDR"); err != nil {
			return nil, err
		}
		if f.nodePortPrefixes, err = familyPrefixes(fam, opts.NodePortAddresses, "node port address"); err != nil {
			return nil, err
		}
		if f.nodeIPs, err = familyAddrs(fam, opts.NodeIPs, "node IP"); err != nil {
			return nil, err
		}
		b.fams = append(b.fams, f)
		b.byFamily[fam] = f
		for _, m := range []string{f.serviceIPs, f.serviceNodePorts, f.noEndpointServices, f.noEndpointNodePorts, f.firewallIPs} {
			b.maps[m] = true
		}
		for _, proto := range protocols {
			b.maps[f.endpointsMap(proto, false)] = true
			b.maps[f.endpointsMap(proto, true)] = true
		}
	}
	mark := opts.MasqueradeMark
	if mark == 0 {
		mark = 0x4000
	}
	b.mark = fmt.Sprintf("0x%08x", mark)
	b.setMark = "meta mark set meta mark | " + b.mark
	skeleton := nftnl.NewRecording(TableName)
	b.writeSkeleton(skeleton)
	b.skeletonFP = b.skeletonHash(skeleton)
	if opts.NFT != nil {
		b.tr = knftablesTransport{opts.NFT}
		return b, nil
	}
	conn, err := nftnl.Open(TableName)
	if err != nil {
		return nil, fmt.Errorf("nftables: %w", err)
	}
	// The elements of the skeleton's sets and maps are written by
	// transactions that do not declare them.
	for _, o := range skeleton.Ops() {
		if o.Verb != nftnl.VerbAdd {
			continue
		}
		if err := conn.Declare(o.Obj); err != nil {
			conn.Close()
			return nil, fmt.Errorf("nftables: %w", err)
		}
	}
	b.tr = netlinkTransport{conn}
	return b, nil
}

// familyPrefixes returns the valid prefixes of fam in ps, normalized.
func familyPrefixes(fam proxy.IPFamily, ps []netip.Prefix, what string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, p := range ps {
		if !p.IsValid() {
			return nil, fmt.Errorf("nftables: invalid %s %v", what, p)
		}
		if proxy.FamilyOf(p.Addr()) == fam {
			out = append(out, netip.PrefixFrom(p.Addr().Unmap(), p.Bits()))
		}
	}
	return normalizePrefixes(out), nil
}

// familyAddrs returns the valid addresses of fam in as, without
// duplicates.
func familyAddrs(fam proxy.IPFamily, as []netip.Addr, what string) ([]netip.Addr, error) {
	var out []netip.Addr
	for _, a := range as {
		if !a.IsValid() {
			return nil, fmt.Errorf("nftables: invalid %s", what)
		}
		if a = a.Unmap(); proxy.FamilyOf(a) == fam && !slices.Contains(out, a) {
			out = append(out, a)
		}
	}
	return out, nil
}

// Name is part of proxy.Backend.
func (b *Backend) Name() string { return "nftables" }

// Sync is part of proxy.Backend. The first sync adopts the table an
// earlier run left if it is exactly the one update.State needs, writing
// nothing; otherwise it, and the first sync after a failure, replace the
// table in one transaction. A full sync re-asserts the shared chains and
// sets and re-plans every service port; a partial sync re-plans only
// update.Changed. Either way only what differs from the table is written.
func (b *Backend) Sync(ctx context.Context, update proxy.Update) error {
	if update.State == nil {
		return errors.New("nftables: sync without a state")
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.deleteStaleChains(ctx)

	changed := update.Changed
	var err error
	switch {
	case b.rebuild && b.first:
		changed = nil
		if !b.adoptTable(ctx, update.State) {
			err = b.replaceTable(ctx, update.State)
		}
	case b.rebuild:
		err = b.replaceTable(ctx, update.State)
		changed = nil
	case update.Full:
		err = b.reconcile(ctx, update.State, nil)
		changed = nil
	default:
		err = b.reconcile(ctx, update.State, update.Changed)
	}
	if err != nil {
		b.rebuild = true
		return err
	}
	b.rebuild, b.first = false, false
	if b.conntrack != nil {
		if err := b.conntrack.Flush(b.prev, update.State, changed); err != nil {
			// The rules are right; stale flows only wait for their timeout.
			b.log.Error(err, "Flushing stale conntrack entries failed")
		}
		b.prev = update.State
	}
	return nil
}

// Cleanup deletes nodenet's table, if there is one.
func (b *Backend) Cleanup(ctx context.Context) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	tx := b.tr.newTxn()
	tx.Add(&knftables.Table{})
	tx.Delete(&knftables.Table{})
	b.rebuild = true
	if err := b.tr.run(ctx, tx); err != nil {
		return fmt.Errorf("nftables: delete table inet %s: %w", TableName, err)
	}
	return nil
}

// wanted returns the ServicePort of key this backend programs, or nil
// (other families and protocols, or a port filed under another key).
func (b *Backend) wanted(state *proxy.State, key proxy.ServicePortKey) *proxy.ServicePort {
	sp := state.ServicePorts[key]
	if sp == nil || sp.Key != key || b.byFamily[key.Family] == nil || protoName(key.Protocol) == "" {
		return nil
	}
	return sp
}

func (b *Backend) isMap(name string) bool { return b.maps[name] }

// tableComment is the comment of nodenet's table.
const tableComment = "nodenet service proxy"

// adoptTable adopts the table an earlier run left if it is exactly the
// one state needs, and reports whether it did.
func (b *Backend) adoptTable(ctx context.Context, state *proxy.State) bool {
	start := b.now()
	why, err := b.adopt(ctx, state)
	if err != nil {
		b.log.Error(err, "Cannot tell whether the table can be kept; replacing it")
		return false
	}
	if why != "" {
		b.log.Info("Writing the table anew", "reason", why)
		return false
	}
	b.log.Info("Kept the table an earlier run left: it is the one the state needs",
		"servicePorts", len(b.ports), "state", b.fp.marker(), "duration", b.now().Sub(start))
	return true
}

// replaceTable builds the whole table anew in one transaction: whatever
// inet nodenet held (a previous run's table, or one we lost track of after
// a failure) is replaced atomically.
func (b *Backend) replaceTable(ctx context.Context, state *proxy.State) error {
	start := b.now()
	tx := b.tr.newTxn()
	tx.Add(&knftables.Table{})
	tx.Delete(&knftables.Table{})
	tx.Add(&knftables.Table{Comment: knftables.PtrTo(tableComment)})
	b.writeSkeleton(tx)
	t := b.buildTable(state, tx, false)
	tx.Add(&knftables.Chain{Name: t.fp.marker()})

	if err := b.run(ctx, tx, "full-sync", start); err != nil {
		return fmt.Errorf("nftables: replace table inet %s: %w", TableName, err)
	}
	b.install(t)
	b.log.V(2).Info("Replaced the table", "servicePorts", len(t.ports), "operations", tx.NumOperations(), "duration", b.now().Sub(start))
	return nil
}

// reconcile writes what differs between the table and state for the keys
// in changed, or for every key and the skeleton when changed is nil.
func (b *Backend) reconcile(ctx context.Context, state *proxy.State, changed map[proxy.ServicePortKey]struct{}) error {
	start := b.now()
	op := "partial-sync"
	// Ports are diffed in key order, so transactions are reproducible.
	type named struct {
		key  proxy.ServicePortKey
		name string
	}
	var keys []named
	add := func(k proxy.ServicePortKey) {
		if ps := b.ports[k]; ps != nil {
			keys = append(keys, named{k, ps.owner})
		} else {
			keys = append(keys, named{k, k.String()})
		}
	}
	if changed == nil {
		op = "full-sync"
		for k := range b.ports {
			add(k)
		}
		for k := range state.ServicePorts {
			if _, ok := b.ports[k]; !ok {
				add(k)
			}
		}
	} else {
		for k := range changed {
			add(k)
		}
	}
	slices.SortFunc(keys, func(x, y named) int { return strings.Compare(x.name, y.name) })

	d := newDiff(b)
	for _, k := range keys {
		key := k.key
		old, sp := b.ports[key], b.wanted(state, key)
		switch {
		case old != nil && old.sp == sp:
		case old != nil && sp != nil && reflect.DeepEqual(old.sp, sp):
			// A new snapshot of the same port: planning it again would
			// find nothing to write.
			d.updates[key] = sp
		default:
			d.port(key, old, sp)
		}
	}

	tx := b.tr.newTxn()
	if changed == nil {
		b.writeSkeleton(tx)
	}
	d.write(tx)
	// The marker moves with the state. A transaction that leaves the
	// state alone still flushes the (empty) marker chain: that fails
	// unless the table holds the state this backend believes it does,
	// which catches another writer or a lost table.
	if d.fp != b.fp {
		tx.Delete(&knftables.Chain{Name: b.fp.marker()})
		tx.Add(&knftables.Chain{Name: d.fp.marker()})
	} else if tx.NumOperations() > 0 {
		tx.Flush(&knftables.Chain{Name: b.fp.marker()})
	}
	if tx.NumOperations() == 0 {
		d.commit()
		return nil
	}
	if err := b.run(ctx, tx, op, start); err != nil {
		return fmt.Errorf("nftables: %s of %d service ports: %w", op, len(d.updates), err)
	}
	d.commit()
	b.log.V(2).Info("Synced", "op", op, "servicePorts", len(d.updates), "operations", tx.NumOperations(), "duration", b.now().Sub(start))
	return nil
}

// run runs tx and reports it to Observe.
func (b *Backend) run(ctx context.Context, tx *txn, op string, start time.Time) error {
	if v := b.log.V(9); v.Enabled() {
		v.Info("Running nftables transaction", "op", op, "transaction", tx.String())
	}
	err := b.tr.run(ctx, tx)
	if b.observe != nil {
		b.observe(op, err, b.now().Sub(start))
	}
	return err
}

// deleteStaleChains deletes the chains emptied at least staleChainDelay
// ago, in a transaction of their own.
func (b *Backend) deleteStaleChains(ctx context.Context) {
	if len(b.stale) == 0 || b.rebuild {
		return
	}
	start := b.now()
	var names []string
	for name, since := range b.stale {
		if start.Sub(since) >= staleChainDelay {
			names = append(names, name)
		}
	}
	if len(names) == 0 {
		return
	}
	slices.Sort(names)
	tx := b.tr.newTxn()
	for _, name := range names {
		tx.Delete(&knftables.Chain{Name: name})
	}
	err := b.run(ctx, tx, "stale-chains", start)
	if err != nil && !isNotFound(err) {
		// Still referenced (an old kernel being slow): try again later.
		b.log.Error(err, "Deleting stale chains failed; will retry", "chains", len(names))
		for _, name := range names {
			b.stale[name] = start
		}
		return
	}
	if err != nil {
		b.log.Error(err, "Deleting stale chains failed; forgetting them", "chains", len(names))
	}
	for _, name := range names {
		delete(b.stale, name)
	}
}

func affinitySetObject(s setPlan, fam proxy.IPFamily) *knftables.Set {
	typ := "ipv4_addr"
	if fam == proxy.IPv6 {
		typ = "ipv6_addr"
	}
	return &knftables.Set{
		Name: s.name,
		Type: typ,
		// "dynamic" because the packet path adds to it (nft would add
		// the flag itself, and then a later add without it would fail).
		Flags:   []knftables.SetFlag{knftables.DynamicFlag, knftables.TimeoutFlag},
		Timeout: knftables.PtrTo(s.timeout),
	}
}
