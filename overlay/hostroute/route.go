package hostroute

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
)

// Route is one host IP route.
type Route struct {
	// Destination is the routed prefix (masked).
	Destination netip.Prefix
	// NextHop is the gateway; the unspecified address means on-link.
	NextHop netip.Addr
	// InterfaceIndex is the Windows interface index (IF_INDEX) the route
	// leaves through.
	InterfaceIndex int
	// Metric is the route's own metric (Windows adds the interface
	// metric on top).
	Metric uint32
}

func (r Route) String() string {
	return fmt.Sprintf("%s via %s if %d metric %d", r.Destination, r.NextHop, r.InterfaceIndex, r.Metric)
}

// Key returns what identifies r in the host's table.
func (r Route) Key() Key {
	return Key{Destination: r.Destination.Masked(), NextHop: r.NextHop, InterfaceIndex: r.InterfaceIndex}
}

// Key is a route's identity: Windows keeps at most one route per key.
type Key struct {
	Destination    netip.Prefix
	NextHop        netip.Addr
	InterfaceIndex int
}

// Interface reads and changes the host's route table.
type Interface interface {
	// List returns every IPv4 and IPv6 route of the host.
	List(ctx context.Context) ([]Route, error)
	// Add creates r; a route with r's key fails with ErrExists.
	Add(ctx context.Context, r Route) error
	// Delete removes the route with r's key (the metric is ignored); an
	// absent route fails with ErrNotFound.
	Delete(ctx context.Context, r Route) error
}

// Errors Interface implementations wrap.
var (
	// ErrExists: a route with the same key exists.
	ErrExists = errors.New("route already exists")
	// ErrNotFound: no route has that key.
	ErrNotFound = errors.New("route not found")
	// ErrInvalid: Windows rejects the route itself (an unknown
	// interface, a next hop not reachable on it, a bad prefix).
	ErrInvalid = errors.New("invalid route")
)

// IsExists reports whether err says the route exists.
func IsExists(err error) bool { return errors.Is(err, ErrExists) }

// IsNotFound reports whether err says the route is absent.
func IsNotFound(err error) bool { return errors.Is(err, ErrNotFound) }
