package nodecidr

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"
)

// Names an operator sees.
const (
	// LeaseName is the coordination.k8s.io Lease the allocators elect
	// their leader with, in Options.Namespace.
	LeaseName = "nodenet-pod-cidr-allocator"
	// ConditionType is the Node condition that says a Node is waiting for
	// a pod CIDR the cluster CIDRs cannot give: True with reason
	// ReasonCIDRNotAvailable, False with ReasonCIDRAssigned once it has one.
	ConditionType v1.NodeConditionType = "NodenetPodCIDRUnavailable"
	// ReasonCIDRNotAvailable is the condition's and the Warning Event's
	// reason when a cluster CIDR is full; kube-controller-manager records
	// the same reason.
	ReasonCIDRNotAvailable = "CIDRNotAvailable"
	// ReasonCIDRAssigned is the condition's reason once a subnet is set.
	ReasonCIDRAssigned = "CIDRAssigned"
	// EventComponent is the source of the allocator's Events.
	EventComponent = "nodenet-agent"
)

// Leader election timing. Every node's agent is a candidate, and each
// candidate reads the Lease every RetryPeriod: kube-controller-manager's
// 2s would be 500 reads a second from 1000 nodes, so the period is 15s
// (about 67). A new leader takes over within LeaseDuration; Nodes only
// wait for their pod CIDRs that long when the leader goes away.
const (
	DefaultLeaseDuration = 60 * time.Second
	DefaultRenewDeadline = 40 * time.Second
	DefaultRetryPeriod   = 15 * time.Second
)

// Options configure an Allocator.
type Options struct {
	// Client reads and writes Nodes, the Lease and Events. Required.
	Client kubernetes.Interface
	// ClusterCIDRs are the CIDRs to cut, at most one per family; each
	// Node gets one subnet of each. Required.
	ClusterCIDRs []netip.Prefix
	// MaskSizeIPv4 and MaskSizeIPv6 are the node subnets' prefix lengths
	// for the IPv4 and IPv6 cluster CIDR.
	MaskSizeIPv4, MaskSizeIPv6 int
	// Namespace holds the Lease. Required.
	Namespace string
	// Identity names this candidate in the Lease; unique per process
	// (the agent uses node name + "_" + a UUID), since a candidate that
	// finds its own identity in the Lease leads at once. Required.
	Identity string
	// LeaseName defaults to LeaseName.
	LeaseName string
	// LeaseDuration, RenewDeadline and RetryPeriod are the election's
	// timing (client-go's meanings); zero means the Default* values.
	LeaseDuration, RenewDeadline, RetryPeriod time.Duration
	// Recorder records Events on Nodes; nil means one of the Allocator's
	// own, writing through Client.
	Recorder record.EventRecorder
	// Logger defaults to klog.Background().
	Logger klog.Logger
}

// Allocator is one candidate; while it leads it assigns pod CIDRs.
type Allocator struct {
	opts  Options
	pools []Pool
	// leading serializes lead: a new term waits until the last one's
	// writes have stopped.
	leading sync.Mutex
}

// New checks opts; every problem is an error naming the option.
func New(opts Options) (*Allocator, error) {
	var errs []error
	if opts.Client == nil {
		errs = append(errs, errors.New("Client is required"))
	}
	if opts.Namespace == "" {
		errs = append(errs, errors.New("Namespace (of the Lease) is required"))
	}
	if opts.Identity == "" {
		errs = append(errs, errors.New("Identity is required"))
	}
	pools, err := newPools(opts)
	if err != nil {
		errs = append(errs, err)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("pod CIDR allocator: %w", err)
	}
	if opts.LeaseName == "" {
		opts.LeaseName = LeaseName
	}
	opts.LeaseDuration = orDefault(opts.LeaseDuration, DefaultLeaseDuration)
	opts.RenewDeadline = orDefault(opts.RenewDeadline, DefaultRenewDeadline)
	opts.RetryPeriod = orDefault(opts.RetryPeriod, DefaultRetryPeriod)
	if opts.Logger.GetSink() == nil {
		opts.Logger = klog.Background()
	}
	return &Allocator{opts: opts, pools: pools}, nil
}

func orDefault(d, def time.Duration) time.Duration {
	if d <= 0 {
		return def
	}
	return d
}

// newPools makes one Pool per cluster CIDR, at most one per family.
func newPools(opts Options) ([]Pool, error) {
	if len(opts.ClusterCIDRs) == 0 {
		return nil, errors.New("ClusterCIDRs: at least one is required")
	}
	var pools []Pool
	seen := map[bool]bool{}
	for i, c := range opts.ClusterCIDRs {
		bits, name := opts.MaskSizeIPv4, "MaskSizeIPv4"
		if c.Addr().Is6() {
			bits, name = opts.MaskSizeIPv6, "MaskSizeIPv6"
		}
		if seen[c.Addr().Is6()] {
			return nil, fmt.Errorf("ClusterCIDRs[%d] %s: at most one cluster CIDR per IP family", i, c)
		}
		seen[c.Addr().Is6()] = true
		p, err := NewPool(c, bits)
		if err != nil {
			return nil, fmt.Errorf("ClusterCIDRs[%d] with %s: %w", i, name, err)
		}
		pools = append(pools, p)
	}
	return pools, nil
}

// Run takes part in the election until ctx ends, assigning pod CIDRs
// whenever this candidate leads; it returns nil then. A lost lease starts
// a new candidacy.
func (a *Allocator) Run(ctx context.Context) error {
	rec := a.opts.Recorder
	if rec == nil {
		b := record.NewBroadcaster()
		b.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: a.opts.Client.CoreV1().Events("")})
		defer b.Shutdown()
		rec = b.NewRecorder(scheme.Scheme, v1.EventSource{Component: EventComponent, Host: a.opts.Identity})
	}
	log := a.opts.Logger.WithValues("lease", a.opts.Namespace+"/"+a.opts.LeaseName)
	for ctx.Err() == nil {
		le, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
			Lock: &resourcelock.LeaseLock{
				LeaseMeta:  metav1.ObjectMeta{Namespace: a.opts.Namespace, Name: a.opts.LeaseName},
				Client:     a.opts.Client.CoordinationV1(),
				LockConfig: resourcelock.ResourceLockConfig{Identity: a.opts.Identity},
			},
			LeaseDuration: a.opts.LeaseDuration,
			RenewDeadline: a.opts.RenewDeadline,
			RetryPeriod:   a.opts.RetryPeriod,
			// Not released on shutdown: a successor must wait out the
			// lease, by which time this leader's last writes have landed.
			ReleaseOnCancel: false,
			Name:            a.opts.LeaseName,
			Callbacks: leaderelection.LeaderCallbacks{
				OnStartedLeading: func(lctx context.Context) { a.lead(lctx, rec, log) },
				OnStoppedLeading: func() { log.Info("No longer assigning pod CIDRs") },
			},
		})
		if err != nil {
			return fmt.Errorf("pod CIDR allocator election: %w", err)
		}
		le.Run(ctx)
	}
	return nil
}

// lead assigns pod CIDRs until lctx ends (the term is over).
func (a *Allocator) lead(lctx context.Context, rec record.EventRecorder, log klog.Logger) {
	a.leading.Lock()
	defer a.leading.Unlock()
	if lctx.Err() != nil {
		return // a later term already ended this one
	}
	log.Info("Leading: assigning pod CIDRs", "clusterCIDRs", a.opts.ClusterCIDRs)
	l := newLeader(a.opts.Client, a.pools, rec, log)
	l.run(lctx)
}
