package hns

import (
	"context"
	"fmt"
	"math/rand"
	"sort"
	"sync"
	"time"
)

// HostAdapter is a network adapter of the simulated host.
type HostAdapter struct {
	// Name is what a NetAdapterName policy refers to ("Ethernet").
	Name string
	// IPs are the adapter's addresses: the node IPs node-port load
	// balancers answer on, and what outbound NAT rewrites to.
	IPs []string
	// MAC is the adapter's MAC address.
	MAC string
}

// SimulatorOptions configures a Simulator. The zero value is a patched
// Windows Server 2025 host (VersionDefault) with one adapter named
// "Ethernet" and no addresses.
type SimulatorOptions struct {
	// Version is the HNS version the host reports; features follow from
	// it (FeaturesFor). Default VersionDefault (Windows Server 2025, patched).
	Version Version
	// OSBuild is the Windows build the host reports (OSBuild). Default
	// BuildFor(Version): the build of the modelled release of that HNS
	// version.
	OSBuild OSBuild
	// MaxBackendsPerLoadBalancer rejects load balancers with more
	// endpoints. Default MaxBackendsPerLoadBalancer(OSBuild): what a host
	// of that build allows (64 before 17763.2746, else 1024).
	MaxBackendsPerLoadBalancer int
	// HostAdapters are the host's network adapters.
	HostAdapters []HostAdapter
	// Now is the clock for restart windows. Default time.Now.
	Now func() time.Time
	// Seed seeds the random source of rate-based faults.
	Seed int64
	// NetworkReadyDelay is how long after CreateNetwork an Overlay network
	// gets its provider address (its ProviderAddress policy: the
	// management IP, the first IPv4 address of its adapter). Zero: at
	// once. See sim_ready.go.
	NetworkReadyDelay time.Duration
}

// Simulator is an in-memory HNS. It implements Interface, enforces the rules
// real HNS enforces (see the sim_*.go files, one rule per check), counts
// calls per Op, injects faults and latency, simulates an HNS service
// restart, renders its state (Dump) and traces packets (Trace). It is safe
// for concurrent use and has no package-level state: every test gets its
// own host.
type Simulator struct {
	opts     SimulatorOptions
	features Features

	mu         sync.Mutex
	seq        uint64
	macSeq     uint32
	networks   map[string]*Network
	endpoints  map[string]*Endpoint
	namespaces map[string]*Namespace
	lbs        map[string]*LoadBalancer
	calls      map[Op]int
	faults     []*faultRule
	latency    map[Op]time.Duration
	restart    *restartState
	rng        *rand.Rand
	// pendingPA are the provider addresses networks get later, by ID.
	pendingPA map[string]pendingPA
	// forwarding are the adapters (lower case) whose host vNIC forwards.
	forwarding map[string]bool

	// restoredLBs are the load balancers HNS restored from its backup
	// after a restart (sim_faults.go), until deleted or updated.
	restoredLBs map[string]bool
}

var _ Interface = (*Simulator)(nil)

// NewSimulator returns an empty simulated HNS host.
func NewSimulator(opts SimulatorOptions) *Simulator {
	if opts.Version == (Version{}) {
		opts.Version = VersionDefault
	}
	if opts.OSBuild == (OSBuild{}) {
		opts.OSBuild = BuildFor(opts.Version)
	}
	if opts.MaxBackendsPerLoadBalancer == 0 {
		opts.MaxBackendsPerLoadBalancer = MaxBackendsPerLoadBalancer(opts.OSBuild)
	}
	if len(opts.HostAdapters) == 0 {
		opts.HostAdapters = []HostAdapter{{Name: "Ethernet"}}
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	def := newDefaultNamespace()
	return &Simulator{
		opts:       opts,
		features:   FeaturesFor(opts.Version),
		networks:   map[string]*Network{},
		endpoints:  map[string]*Endpoint{},
		namespaces: map[string]*Namespace{def.ID: def},
		lbs:        map[string]*LoadBalancer{},
		calls:      map[Op]int{},
		latency:    map[Op]time.Duration{},
		rng:        rand.New(rand.NewSource(opts.Seed)),
		pendingPA:  map[string]pendingPA{},

		restoredLBs: map[string]bool{},
	}
}

// ID kinds: the first GUID group says what an ID names, which makes dumps
// and test failures readable; the last group is a per-simulator sequence.
const (
	idNetwork      = 0x0e7
	idEndpoint     = 0x0ed
	idNamespace    = 0x05e
	idLoadBalancer = 0x01b
)

// newID returns a deterministic, GUID-shaped, upper-case ID, as HNS prints
// them (hnslib opens objects by GUID, hcn/hcnnetwork.go; the IDs HNS
// returns in moby/moby issue 40345 are upper case). Called with s.mu held.
func (s *Simulator) newID(kind uint32) string {
	s.seq++
	return fmt.Sprintf("%08X-0000-4000-8000-%012X", kind, s.seq)
}

// newMAC returns a MAC in the Hyper-V range (00-15-5D, HNS's dash form),
// as HNS assigns: the GatewayMac in moby/moby issue 40345 is
// "00-15-5D-BF-F1-97". s.mu held.
func (s *Simulator) newMAC() string {
	s.macSeq++
	n := s.macSeq
	return fmt.Sprintf("00-15-5D-%02X-%02X-%02X", byte(n>>16), byte(n>>8), byte(n))
}

// call runs one Interface operation: it counts the call, applies latency,
// the restart window and injected faults, then runs apply under the lock.
func (s *Simulator) call(ctx context.Context, op Op, object string, apply func() error) error {
	s.mu.Lock()
	s.calls[op]++
	delay := s.latencyFor(op)
	s.mu.Unlock()

	if err := sleepCtx(ctx, delay); err != nil {
		return &Error{Op: op, Kind: KindTransient, Object: object, Msg: "caller gave up", Err: err}
	}
	if err := ctx.Err(); err != nil {
		return &Error{Op: op, Kind: KindTransient, Object: object, Msg: "caller gave up", Err: err}
	}

	s.mu.Lock()
	defer s.mu.Unlock()
	s.settleNetworks()
	if err := s.checkRestart(op, object); err != nil {
		return err
	}
	f := s.matchFault(op)
	if f != nil && !f.AfterApply {
		return f.errorFor(op, object)
	}
	if err := apply(); err != nil {
		return err
	}
	if f != nil {
		// HNS did the work but the caller sees a failure (an RPC timeout
		// after commit): callers must cope with the object existing.
		return f.errorFor(op, object)
	}
	return nil
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// Calls returns how often op was called (successful or not).
func (s *Simulator) Calls(op Op) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls[op]
}

// CallCounts returns a copy of every op's call count.
func (s *Simulator) CallCounts() map[Op]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[Op]int, len(s.calls))
	for op, n := range s.calls {
		if n > 0 {
			out[op] = n
		}
	}
	return out
}

// Writes returns how many state-changing calls were made.
func (s *Simulator) Writes() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for op, c := range s.calls {
		if op.IsWrite() {
			n += c
		}
	}
	return n
}

// ResetCalls zeroes the call counters (after a test's setup, say).
func (s *Simulator) ResetCalls() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls = map[Op]int{}
}

// Version returns the configured HNS version.
func (s *Simulator) Version(ctx context.Context) (Version, error) {
	err := s.call(ctx, OpVersion, "", func() error { return nil })
	if err != nil {
		return Version{}, err
	}
	return s.opts.Version, nil
}

// Features returns what the configured version supports.
func (s *Simulator) Features(ctx context.Context) (Features, error) {
	if _, err := s.Version(ctx); err != nil {
		return Features{}, err
	}
	return s.features, nil
}

// OSBuild returns the configured Windows build. Like the real client's, it
// is not an HNS call: it is not counted and neither faults nor a restart
// make it fail.
func (s *Simulator) OSBuild(context.Context) (OSBuild, error) { return s.opts.OSBuild, nil }

// sortedIDs returns a map's keys in creation order (IDs embed a
// zero-padded sequence, so lexical order is creation order).
func sortedIDs[T any](m map[string]T) []string {
	ids := make([]string, 0, len(m))
	for id := range m {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i][24:] < ids[j][24:] })
	return ids
}
