package hostport

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"

	current "github.com/containernetworking/cni/pkg/types/100"
	"k8s.io/klog/v2"
	"sigs.k8s.io/knftables"

	"github.com/nodenet/nodenet/cni"
	"github.com/nodenet/nodenet/internal/nftnl"
)

// Defaults of Options.
const (
	DefaultTableName   = "nodenet-hostport"
	DefaultHairpinMark = 0x2000
)

// Options configures a Wiring.
type Options struct {
	// Inner is the pod wiring this one decorates (cni/vethbridge). Required.
	Inner cni.Wiring
	// NFT, if set, runs our transactions and listings through knftables
	// instead of netlink: an Interface bound to family inet and table
	// TableName (knftables.NewFake with the same arguments in tests;
	// knftables.New, which runs nft, to compare with what nft writes).
	// nil (the agent): the kernel's, programmed over a netlink socket
	// opened in HostNetNS by New; nft is never run.
	NFT knftables.Interface
	// TableName is our table. Default: DefaultTableName.
	TableName string
	// HostNetNS is the path of the node's network namespace, as in
	// vethbridge.Options; "" means the agent's own. It is where the table
	// is programmed when NFT is nil, and where stale UDP conntrack entries
	// are deleted.
	HostNetNS string
	// HairpinMark is the packet mark bit that carries "masquerade this
	// hairpin connection" from the DNAT chain to postrouting; it must not
	// be used by anything else on the node. Default: DefaultHairpinMark,
	// the bit the reference portmap plugin uses.
	HairpinMark uint32
	// Logger logs conntrack cleanup failures and kernel state that wasn't
	// what we expected. Default: klog.Background().
	Logger *klog.Logger
}

// conntrack deletes conntrack entries that would bypass a new mapping.
type conntrack interface {
	clearUDP(k key) error
}

// Wiring adds pods' hostPorts to another wiring; see the package doc.
type Wiring struct {
	inner cni.Wiring
	nft   nftnl.Interface
	ct    conntrack
	log   klog.Logger
	table string
	mark  uint32

	// mu serializes every change to our table and guards the mirror.
	mu sync.Mutex
	// ensured is the fingerprint of the ruleset last programmed; "" until
	// the first, and again whenever the kernel surprised us.
	ensured string
	// loaded says entries mirror the kernel's map elements. The mirror
	// spares Del and Add the kernel calls for pods without hostPorts; it is
	// loaded from the kernel on first use (so an agent restart recovers
	// every mapping), and dropped and loaded again whenever a transaction
	// fails.
	loaded  bool
	entries map[key]entry
}

var _ cni.Wiring = (*Wiring)(nil)

// New returns a Wiring over opts.Inner. With opts.NFT nil it opens a
// netlink socket in opts.HostNetNS; it writes nothing.
func New(opts Options) (*Wiring, error) {
	if opts.Inner == nil {
		return nil, errors.New("hostport: Options.Inner is required")
	}
	w := &Wiring{
		inner: opts.Inner,
		table: opts.TableName,
		mark:  opts.HairpinMark,
		ct:    newConntrack(opts.HostNetNS),
		log:   klog.Background(),
	}
	if w.table == "" {
		w.table = DefaultTableName
	}
	if w.mark == 0 {
		w.mark = DefaultHairpinMark
	}
	if w.mark&(w.mark-1) != 0 {
		return nil, fmt.Errorf("hostport: HairpinMark %#x is not a single bit", w.mark)
	}
	if opts.Logger != nil {
		w.log = *opts.Logger
	}
	if opts.NFT != nil {
		w.nft = nftnl.Knftables(opts.NFT, w.table)
		return w, nil
	}
	conn, err := openConn(w.table, opts.HostNetNS)
	if err != nil {
		return nil, fmt.Errorf("hostport: nftables: %w", err)
	}
	w.nft = conn
	return w, nil
}

// Ready checks the inner wiring, then programs our table (table, chains,
// rules, maps; elements are kept), which also repairs rules that drifted.
func (w *Wiring) Ready(ctx context.Context, nw *cni.NodeNetwork) error {
	if err := w.inner.Ready(ctx, nw); err != nil {
		return err
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.ensured = ""
	if err := w.ensureLocked(ctx, nw); err != nil {
		return err
	}
	if !w.loaded {
		return w.loadLocked(ctx)
	}
	return nil
}

// Add wires the pod with the inner wiring, then maps its hostPorts in one
// nftables transaction. A pod without hostPorts costs no call to the
// kernel (once the mirror is loaded, which the first Ready, Add, Del or
// List does). If the mappings can't be programmed (another pod holds one:
// ErrConflict) the pod is unwired again and Add fails.
func (w *Wiring) Add(ctx context.Context, nw *cni.NodeNetwork, pod *cni.Pod) (*current.Result, error) {
	want, err := desired(pod)
	if err != nil {
		return nil, err
	}
	o := ownerOf(pod)
	if len(want) > 0 {
		if _, err := o.comment(); err != nil {
			return nil, err
		}
		// Fail fast, before the pod is wired, on a conflict we can see.
		w.mu.Lock()
		err := w.prepareLocked(ctx, nw)
		if err == nil {
			err = w.conflictLocked(o, want)
		}
		w.mu.Unlock()
		if err != nil {
			return nil, err
		}
	}
	res, err := w.inner.Add(ctx, nw, pod)
	if err != nil {
		return nil, err
	}
	if len(want) == 0 && !w.hasMappings(pod.Attachment) {
		return res, nil
	}
	created, err := w.program(ctx, nw, o, want)
	if err != nil {
		// Undo: the pod isn't wired, so mappings of an earlier attempt of
		// this ADD are no use either.
		errs := []error{err}
		if derr := w.removeMappings(ctx, pod.Attachment); derr != nil {
			errs = append(errs, fmt.Errorf("roll back: %w", derr))
		}
		if derr := w.inner.Del(ctx, nw, pod); derr != nil {
			errs = append(errs, fmt.Errorf("roll back: %w", derr))
		}
		return nil, errors.Join(errs...)
	}
	for _, e := range created {
		if e.proto != "udp" {
			continue
		}
		if err := w.ct.clearUDP(e.key); err != nil {
			w.log.Error(err, "Clearing stale UDP conntrack entries of a new hostPort", "hostPort", e.String(),
				"containerID", pod.ContainerID, "ifname", pod.IfName)
		}
	}
	return res, nil
}

// Check checks the inner wiring, then that the kernel holds exactly the
// pod's mappings.
func (w *Wiring) Check(ctx context.Context, nw *cni.NodeNetwork, pod *cni.Pod, prev *current.Result) error {
	if err := w.inner.Check(ctx, nw, pod, prev); err != nil {
		return err
	}
	want, err := desired(pod)
	if err != nil {
		return err
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(want) > 0 || !w.loaded {
		// Compare with the kernel, not with what we think it holds.
		w.loaded = false
		if err := w.loadLocked(ctx); err != nil {
			return err
		}
	}
	var errs []error
	if len(want) > 0 {
		chains, err := w.nft.List(ctx, "chains")
		if err != nil && !nftnl.IsNotFound(err) {
			return fmt.Errorf("list chains of table %s: %w", w.table, err)
		}
		for _, c := range allChains {
			if !slices.Contains(chains, c) {
				errs = append(errs, fmt.Errorf("chain %s of table inet %s is missing", c, w.table))
			}
		}
	}
	wantKeys := map[key]bool{}
	for _, e := range want {
		wantKeys[e.key] = true
		got, ok := w.entries[e.key]
		switch {
		case !ok:
			errs = append(errs, fmt.Errorf("%s is not programmed", e))
		case got.owner.att != pod.Attachment:
			errs = append(errs, fmt.Errorf("%s is not programmed: the kernel maps it to %s for %s", e, got.podAddrPort(), got.owner))
		case got.podIP != e.podIP || got.podPort != e.podPort:
			errs = append(errs, fmt.Errorf("%s is not programmed: the kernel maps it to %s", e, got.podAddrPort()))
		}
	}
	for _, got := range w.sortedEntries() {
		if got.owner.att == pod.Attachment && !wantKeys[got.key] {
			errs = append(errs, fmt.Errorf("%s is programmed for the pod, which doesn't ask for it", got))
		}
	}
	return errors.Join(errs...)
}

// Del removes the pod's mappings (whatever the kernel holds for its
// attachment, so it needs neither pod.PortMappings nor the agent's memory
// of the ADD), then unwires it with the inner wiring. It does nothing for
// what is absent.
func (w *Wiring) Del(ctx context.Context, nw *cni.NodeNetwork, pod *cni.Pod) error {
	err := w.removeMappings(ctx, pod.Attachment)
	if ierr := w.inner.Del(ctx, nw, pod); ierr != nil {
		err = errors.Join(err, ierr)
	}
	return err
}

// List returns the inner wiring's attachments and those that only have
// mappings left, read from the kernel.
func (w *Wiring) List(ctx context.Context, nw *cni.NodeNetwork) ([]cni.Attachment, error) {
	atts, err := w.inner.List(ctx, nw)
	if err != nil {
		return nil, err
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.loaded = false
	if err := w.loadLocked(ctx); err != nil {
		return nil, err
	}
	seen := map[cni.Attachment]bool{}
	for _, a := range atts {
		seen[a] = true
	}
	for _, e := range w.sortedEntries() {
		if a := e.owner.att; a != (cni.Attachment{}) && !seen[a] {
			seen[a] = true
			atts = append(atts, a)
		}
	}
	return atts, nil
}

// prepareLocked makes sure the table exists with our rules and the mirror
// is loaded.
func (w *Wiring) prepareLocked(ctx context.Context, nw *cni.NodeNetwork) error {
	if err := w.ensureLocked(ctx, nw); err != nil {
		return err
	}
	if !w.loaded {
		return w.loadLocked(ctx)
	}
	return nil
}

// ensureLocked programs the ruleset for nw unless it already is.
func (w *Wiring) ensureLocked(ctx context.Context, nw *cni.NodeNetwork) error {
	r := ruleset{table: w.table, mark: w.mark}
	if nw != nil {
		r.podCIDRs = nw.PodCIDRs
	}
	fp := r.fingerprint()
	if w.ensured == fp {
		return nil
	}
	tx := w.nft.NewTx()
	r.ensure(tx)
	if err := w.nft.Run(ctx, tx); err != nil {
		return fmt.Errorf("program nftables table inet %s: %w", w.table, err)
	}
	w.ensured = fp
	return nil
}

// loadLocked reads every map element from the kernel into the mirror. A
// missing table or map holds nothing.
func (w *Wiring) loadLocked(ctx context.Context) error {
	entries := map[key]entry{}
	for _, m := range allMaps {
		elems, err := w.nft.ListElements(ctx, "map", m)
		if nftnl.IsNotFound(err) {
			continue
		}
		if err != nil {
			return fmt.Errorf("list hostPort map %s: %w", m, err)
		}
		for _, el := range elems {
			e, err := parseElement(m, el.Key, el.Value, el.Comment)
			if err != nil {
				w.log.Error(err, "Ignoring an element of a hostPort map", "table", w.table)
				continue
			}
			entries[e.key] = e
		}
	}
	w.entries = entries
	w.loaded = true
	return nil
}

// conflictLocked returns the ErrConflict error for the first of want that
// collides with another owner's mapping.
func (w *Wiring) conflictLocked(o owner, want []entry) error {
	all := w.sortedEntries()
	for _, e := range want {
		for _, got := range all {
			if got.owner.att == o.att || !conflicts(e.key, got.key) {
				continue
			}
			if got.key == e.key {
				return fmt.Errorf("%w: hostPort %s is mapped to %s for %s", ErrConflict, e.key, got.podAddrPort(), got.owner)
			}
			return fmt.Errorf("%w: hostPort %s conflicts with hostPort %s, mapped to %s for %s", ErrConflict, e.key, got.key, got.podAddrPort(), got.owner)
		}
	}
	return nil
}

// hasMappings says whether the mirror holds mappings of att; false when it
// isn't loaded (a retried ADD that dropped its hostPorts before any other
// call after an agent restart leaves them until Del).
func (w *Wiring) hasMappings(att cni.Attachment) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, e := range w.entries {
		if e.owner.att == att {
			return true
		}
	}
	return false
}

// program makes the kernel hold exactly want for o: one transaction that
// deletes o's mappings that are no longer wanted and creates the new ones
// ("create" fails if the key exists: the kernel is the final judge of a
// conflict). If the transaction fails, the kernel wasn't what the mirror
// said: reload it and try once more. It returns the mappings it created.
func (w *Wiring) program(ctx context.Context, nw *cni.NodeNetwork, o owner, want []entry) ([]entry, error) {
	comment, err := o.comment()
	if err != nil {
		return nil, err
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	for attempt := 0; ; attempt++ {
		if err := w.prepareLocked(ctx, nw); err != nil {
			return nil, err
		}
		if err := w.conflictLocked(o, want); err != nil {
			return nil, err
		}
		wantKeys := map[key]entry{}
		for _, e := range want {
			wantKeys[e.key] = e
		}
		tx := w.nft.NewTx()
		var removed []key
		for _, got := range w.sortedEntries() {
			if got.owner.att != o.att {
				continue
			}
			if e, ok := wantKeys[got.key]; !ok || e.podIP != got.podIP || e.podPort != got.podPort {
				tx.Delete(w.element(got.key, nil))
				removed = append(removed, got.key)
			}
		}
		var created []entry
		for _, e := range want {
			el := w.element(e.key, &e)
			el.Comment = &comment
			if got, ok := w.entries[e.key]; ok && got.owner.att == o.att && got.podIP == e.podIP && got.podPort == e.podPort {
				tx.Add(el) // already there: a no-op that repairs drift
			} else {
				tx.Create(el)
				created = append(created, e)
			}
		}
		if tx.NumOperations() == 0 {
			return nil, nil
		}
		err := w.nft.Run(ctx, tx)
		if err == nil {
			for _, k := range removed {
				delete(w.entries, k)
			}
			for _, e := range want {
				e.owner = o
				w.entries[e.key] = e
			}
			return created, nil
		}
		if attempt > 0 {
			return nil, fmt.Errorf("program hostPorts in table inet %s: %w", w.table, err)
		}
		w.log.Info("A hostPort transaction failed; reloading the table from the kernel and retrying", "table", w.table, "err", err.Error())
		w.ensured, w.loaded = "", false
	}
}

// removeMappings deletes every mapping of att, in one transaction.
func (w *Wiring) removeMappings(ctx context.Context, att cni.Attachment) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	for attempt := 0; ; attempt++ {
		if !w.loaded {
			if err := w.loadLocked(ctx); err != nil {
				return err
			}
		}
		tx := w.nft.NewTx()
		var removed []key
		for _, got := range w.sortedEntries() {
			if got.owner.att == att {
				tx.Delete(w.element(got.key, nil))
				removed = append(removed, got.key)
			}
		}
		if len(removed) == 0 {
			return nil
		}
		err := w.nft.Run(ctx, tx)
		if err == nil {
			for _, k := range removed {
				delete(w.entries, k)
			}
			return nil
		}
		if attempt > 0 {
			return fmt.Errorf("remove hostPorts of container %s interface %s from table inet %s: %w", att.ContainerID, att.IfName, w.table, err)
		}
		w.log.Info("A hostPort transaction failed; reloading the table from the kernel and retrying", "table", w.table, "err", err.Error())
		w.ensured, w.loaded = "", false
	}
}

// element is k's map element, with e's target when e isn't nil.
func (w *Wiring) element(k key, e *entry) *knftables.Element {
	el := &knftables.Element{Family: knftables.InetFamily, Table: w.table, Map: mapName(k), Key: elementKey(k)}
	if e != nil {
		el.Value = []string{e.podIP.String(), fmt.Sprint(e.podPort)}
	}
	return el
}

// sortedEntries returns the mirror in a stable order (error messages and
// transactions don't depend on map iteration).
func (w *Wiring) sortedEntries() []entry {
	out := make([]entry, 0, len(w.entries))
	for _, e := range w.entries {
		out = append(out, e)
	}
	slices.SortFunc(out, compareEntries)
	return out
}
