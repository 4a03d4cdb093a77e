package hnsnet

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"time"

	"k8s.io/klog/v2"

	"github.com/nodenet/nodenet/hns"
	"github.com/nodenet/nodenet/internal/netaddr"
	"github.com/nodenet/nodenet/overlay"
	"github.com/nodenet/nodenet/overlay/hostroute"
)

// Adapter is a host network adapter as the OS reports it.
type Adapter struct {
	// Name is the OS name: the friendly name on Windows ("Ethernet", and
	// "vEthernet (Ethernet)" once an HNS network holds the adapter).
	Name string
	// Index is the OS interface index (routes leave through it).
	Index int
	// IPs are the adapter's addresses with their prefix lengths.
	IPs []netip.Prefix
	MTU int
	MAC net.HardwareAddr
}

// Options configures a Network.
type Options struct {
	// HNS is the host's HNS. Required.
	HNS hns.Interface
	// HostRoutes is the host route table; required in l2bridge mode.
	HostRoutes hostroute.Interface
	// Adapters lists the host's adapters. Default: net.Interfaces.
	Adapters func(ctx context.Context) ([]Adapter, error)
	// Forwarding turns IPv4 forwarding on for the l2bridge host vNIC.
	// Default: the simulated host's when HNS is an hns.Simulator, else
	// SystemForwarding on Windows; required in l2bridge mode elsewhere.
	Forwarding Forwarding
	// ReadyTimeout bounds the wait for a network to become usable after
	// CreateNetwork (provider address, host interface); ReadyPollInterval
	// is the wait between looks. Defaults DefaultReadyTimeout and
	// DefaultReadyPollInterval.
	ReadyTimeout      time.Duration
	ReadyPollInterval time.Duration
	// Logger defaults to klog.Background().
	Logger klog.Logger
}

// Network is the Windows node network on HNS. It implements
// overlay.Interface; calls must be serialized by the caller.
type Network struct {
	hns      *counted
	routes   hostroute.Interface
	adapters func(ctx context.Context) ([]Adapter, error)
	log      klog.Logger

	forwarding   Forwarding
	readyTimeout time.Duration
	readyPoll    time.Duration

	// cur is what the last successful EnsureLocal made or adopted.
	cur *local
}

var _ overlay.Interface = (*Network)(nil)

// New returns a Network over opts.HNS.
func New(opts Options) (*Network, error) {
	if opts.HNS == nil {
		return nil, errors.New("hnsnet: Options.HNS is required")
	}
	if opts.Adapters == nil {
		opts.Adapters = SystemAdapters
	}
	if opts.Logger.GetSink() == nil {
		opts.Logger = klog.Background()
	}
	if opts.Forwarding == nil {
		opts.Forwarding = defaultForwarding(opts.HNS)
	}
	if opts.ReadyTimeout <= 0 {
		opts.ReadyTimeout = DefaultReadyTimeout
	}
	if opts.ReadyPollInterval <= 0 {
		opts.ReadyPollInterval = DefaultReadyPollInterval
	}
	return &Network{
		hns:          &counted{Interface: opts.HNS},
		routes:       opts.HostRoutes,
		adapters:     opts.Adapters,
		log:          opts.Logger.WithName("hnsnet"),
		forwarding:   opts.Forwarding,
		readyTimeout: opts.ReadyTimeout,
		readyPoll:    opts.ReadyPollInterval,
	}, nil
}

// SystemAdapters lists the host's adapters through net.Interfaces.
func SystemAdapters(context.Context) ([]Adapter, error) {
	ifs, err := net.Interfaces()
	if err != nil {
		return nil, err
	}
	out := make([]Adapter, 0, len(ifs))
	for _, i := range ifs {
		a := Adapter{Name: i.Name, Index: i.Index, MTU: i.MTU, MAC: i.HardwareAddr}
		addrs, err := i.Addrs()
		if err != nil {
			return nil, err
		}
		for _, x := range addrs {
			ipn, _ := x.(*net.IPNet)
			if p, ok := netaddr.FromIPNet(ipn); ok {
				a.IPs = append(a.IPs, p)
			}
		}
		out = append(out, a)
	}
	return out, nil
}
