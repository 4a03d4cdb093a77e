package hostroute

import (
	"context"
	"fmt"
	"net/netip"
	"sort"
	"sync"
)

// FakeInterface is an interface of the fake host: its index and the
// prefixes on it (next hops must fall inside one of them).
type FakeInterface struct {
	Index    int
	Name     string
	Prefixes []netip.Prefix
}

// Fake is an in-memory route table. It rejects what Windows rejects: a
// duplicate key (ErrExists), deleting an absent route (ErrNotFound), and,
// once interfaces are declared with SetInterfaces, a route on an unknown
// interface or with a next hop that is not on-link there (ErrInvalid). It
// counts writes and is safe for concurrent use.
type Fake struct {
	mu     sync.Mutex
	routes map[Key]Route
	ifaces map[int]FakeInterface
	writes int
}

var _ Interface = (*Fake)(nil)

// NewFake returns an empty route table that accepts any interface.
func NewFake() *Fake { return &Fake{routes: map[Key]Route{}} }

// SetInterfaces declares the host's interfaces; from then on routes are
// checked against them.
func (f *Fake) SetInterfaces(ifs ...FakeInterface) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.ifaces = map[int]FakeInterface{}
	for _, i := range ifs {
		f.ifaces[i.Index] = i
	}
}

// List implements Interface, in a stable order.
func (f *Fake) List(ctx context.Context) ([]Route, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([]Route, 0, len(f.routes))
	for _, r := range f.routes {
		out = append(out, r)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].String() < out[j].String() })
	return out, nil
}

// Add implements Interface.
func (f *Fake) Add(ctx context.Context, r Route) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.writes++
	if err := f.validate(r); err != nil {
		return err
	}
	r.Destination = r.Destination.Masked()
	if _, ok := f.routes[r.Key()]; ok {
		return fmt.Errorf("add %s: %w", r, ErrExists)
	}
	f.routes[r.Key()] = r
	return nil
}

// validate applies Windows' checks on a new route; f.mu held.
func (f *Fake) validate(r Route) error {
	if !r.Destination.IsValid() || !r.NextHop.IsValid() || r.Destination.Addr().Is4() != r.NextHop.Is4() {
		return fmt.Errorf("add %s: destination and next hop must be valid and of one family: %w", r, ErrInvalid)
	}
	if f.ifaces == nil {
		return nil
	}
	i, ok := f.ifaces[r.InterfaceIndex]
	if !ok {
		return fmt.Errorf("add %s: no interface %d: %w", r, r.InterfaceIndex, ErrInvalid)
	}
	if r.NextHop.IsUnspecified() {
		return nil
	}
	for _, p := range i.Prefixes {
		if p.Contains(r.NextHop) {
			return nil
		}
	}
	return fmt.Errorf("add %s: next hop is not on-link on interface %d (%v): %w", r, i.Index, i.Prefixes, ErrInvalid)
}

// Delete implements Interface.
func (f *Fake) Delete(ctx context.Context, r Route) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.writes++
	k := r.Key()
	if _, ok := f.routes[k]; !ok {
		return fmt.Errorf("delete %s: %w", r, ErrNotFound)
	}
	delete(f.routes, k)
	return nil
}

// Writes returns how many Add and Delete calls were made (failed ones too).
func (f *Fake) Writes() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.writes
}
