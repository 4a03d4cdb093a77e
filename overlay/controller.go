package overlay

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"

	"github.com/nodenet/nodenet/config"
)

// ControllerOptions configure a Controller.
type ControllerOptions struct {
	// Config is the agent's one config, defaulted and validated.
	Config *config.AgentConfiguration
	// NodeName is this node's Node name (default Config.NodeName).
	NodeName string
	// Client talks to the API server.
	Client kubernetes.Interface
	// Nodes, if set, is where the Node objects come from instead of the
	// API server (an agent without one: a manifest folder). Client may
	// then be nil, and nothing is written to any Node: flannel's
	// annotations and the NetworkUnavailable condition are only logged,
	// and Events go to Recorder (default: the log).
	Nodes NodeSource
	// Dataplane builds the network: hnsnet on Windows, linuxnet on Linux.
	Dataplane Interface
	// OnReady is called with the network each time it becomes ready or
	// its facts change (the CNI server's SetNetwork, the proxy's source
	// VIP). OnNotReady is called when a ready network stops being ready.
	// Both run on the controller's goroutine and must not block long.
	OnReady    func(*LocalNetwork)
	OnNotReady func(error)
	// OnRemotes, if set, is called with the remote node table each time
	// it changes (a node joins, leaves, or changes its address or pod
	// CIDR), after the routes to it are programmed, so the proxy can
	// re-program the remote endpoints it affects. It runs on the
	// controller's goroutine and must not block long.
	OnRemotes func([]RemoteNode)
	// Recorder records Events on this Node; default: one that writes
	// through Client.
	Recorder record.EventRecorder
	// ResyncPeriod is how often the network is re-verified with nothing
	// changed (re-creating what disappeared out of band). Default
	// Config.SyncPeriod.
	ResyncPeriod time.Duration
	// RetryBackoff bounds retries after a failed reconcile.
	// Default 1s doubling to 1m.
	RetryBackoff wait.Backoff
	Logger       klog.Logger
}

// NodeSource is where a Controller reads Nodes when not from the API
// server. source.FolderNodes implements it.
type NodeSource interface {
	// Get returns the Node called name, or an error apierrors.IsNotFound
	// recognizes.
	Get(name string) (*v1.Node, error)
	// List returns the Nodes selector selects.
	List(selector labels.Selector) ([]*v1.Node, error)
	// Run calls changed once the Nodes are read, and again after each
	// change to them, from one goroutine, until ctx ends; it returns nil
	// then.
	Run(ctx context.Context, changed func()) error
}

// nodeReader is what reconcile reads Nodes through: an informer's lister
// or a NodeSource.
type nodeReader interface {
	Get(name string) (*v1.Node, error)
	List(selector labels.Selector) ([]*v1.Node, error)
}

// Controller keeps this node's network and its routes to every other node
// in line with the Node objects: it waits for this node's pod CIDR, ensures
// the local network, publishes flannel's annotations, reports the
// NetworkUnavailable condition and reconciles the remote nodes.
//
// It only ever removes a remote node's routes when the API server says the
// node is gone: while the API server is unreachable the informer keeps its
// last state and so does the dataplane.
type Controller struct {
	opts  ControllerOptions
	log   klog.Logger
	rules PeerRules
	nodes nodeReader
	dirty chan struct{}

	stopRecorder func()

	status *nodeStatus
	// lastGood keeps the last routable view of each peer, so a Node whose
	// annotations turn malformed keeps its routes instead of losing them.
	lastGood map[string]RemoteNode

	mu     sync.Mutex
	local  *LocalNetwork
	remote []RemoteNode
	ready  error
}

// NewController checks opts and returns a Controller; Run starts it.
func NewController(opts ControllerOptions) (*Controller, error) {
	if opts.Config == nil || (opts.Client == nil && opts.Nodes == nil) || opts.Dataplane == nil {
		return nil, errors.New("overlay controller needs Config, Client (or Nodes) and Dataplane")
	}
	if opts.NodeName == "" {
		opts.NodeName = opts.Config.NodeName
	}
	if opts.NodeName == "" {
		return nil, errors.New("overlay controller needs the node name")
	}
	if opts.ResyncPeriod <= 0 {
		opts.ResyncPeriod = opts.Config.SyncPeriod.Duration
	}
	if opts.ResyncPeriod <= 0 {
		opts.ResyncPeriod = 30 * time.Second
	}
	if opts.RetryBackoff.Duration <= 0 {
		opts.RetryBackoff = wait.Backoff{Duration: time.Second, Factor: 2, Steps: 7, Cap: time.Minute}
	}
	if opts.OnReady == nil {
		opts.OnReady = func(*LocalNetwork) {}
	}
	if opts.OnNotReady == nil {
		opts.OnNotReady = func(error) {}
	}
	stopRecorder := func() {}
	if opts.Recorder == nil {
		opts.Recorder, stopRecorder = newRecorder(opts.Client, opts.Logger)
	}
	c := &Controller{
		stopRecorder: stopRecorder,
		opts:         opts,
		log:          opts.Logger.WithValues("node", opts.NodeName),
		dirty:        make(chan struct{}, 1),
		lastGood:     map[string]RemoteNode{},
		ready:        errors.New("not reconciled yet"),
	}
	c.rules = PeerRules{Mode: opts.Config.Network.Mode, Families: opts.Config.EffectiveIPFamilies()}
	if v := opts.Config.Network.VXLAN; v != nil {
		c.rules.VNI = uint32(v.VNI)
	}
	c.status = newNodeStatus(opts.Client, opts.Recorder, opts.NodeName, c.log)
	if opts.Nodes != nil {
		c.nodes = opts.Nodes
		c.status.client = nil // the Nodes are not the API server's
	}
	return c, nil
}

// Run watches Nodes and reconciles until ctx ends. The dataplane is left
// as it is when Run returns: pods keep working while the agent restarts.
func (c *Controller) Run(ctx context.Context) error {
	defer c.stopRecorder()
	if c.opts.Nodes != nil {
		ctx, cancel := context.WithCancel(ctx)
		defer cancel()
		read := make(chan struct{})
		var once sync.Once
		done := make(chan error, 1)
		go func() {
			done <- c.opts.Nodes.Run(ctx, func() {
				once.Do(func() { close(read) })
				c.markDirty()
			})
		}()
		defer func() { cancel(); <-done }()
		select {
		case <-ctx.Done():
			return nil
		case err := <-done:
			done <- err
			return fmt.Errorf("reading Nodes: %w", err)
		case <-read:
		}
	} else {
		factory := informers.NewSharedInformerFactory(c.opts.Client, 0)
		inf := factory.Core().V1().Nodes()
		c.nodes = inf.Lister()
		if _, err := inf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc:    func(any) { c.markDirty() },
			UpdateFunc: func(old, cur any) { c.onUpdate(old, cur) },
			DeleteFunc: func(any) { c.markDirty() },
		}); err != nil {
			return err
		}
		factory.Start(ctx.Done())
		defer factory.Shutdown()
		if !cache.WaitForCacheSync(ctx.Done(), inf.Informer().HasSynced) {
			return fmt.Errorf("waiting for the Node informer: %w", context.Cause(ctx))
		}
	}
	c.log.Info("Node network controller started", "mode", c.rules.Mode, "resync", c.opts.ResyncPeriod, "nodesFromAPIServer", c.opts.Nodes == nil)

	resync := time.NewTicker(c.opts.ResyncPeriod)
	defer resync.Stop()
	backoff := c.opts.RetryBackoff
	var retry <-chan time.Time
	c.markDirty()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-c.dirty:
		case <-resync.C:
		case <-retry:
		}
		if err := c.reconcile(ctx); err != nil {
			if ctx.Err() != nil {
				return nil
			}
			d := backoff.Step()
			c.log.Error(err, "Node network reconcile failed; retrying", "after", d)
			retry = time.After(d)
			continue
		}
		backoff = c.opts.RetryBackoff
		retry = nil
	}
}

// Reconcile reconciles once, now, without watching: for a one-shot view
// of what this node's network would be (nodenetctl proxy render). It
// needs Options.Nodes, read already. Like a reconcile in Run, it returns
// an error only for a failure worth retrying; Ready says whether the
// network is ready.
func (c *Controller) Reconcile(ctx context.Context) error {
	if c.opts.Nodes == nil {
		return errors.New("overlay controller: Reconcile needs Options.Nodes")
	}
	return c.reconcile(ctx)
}

// markDirty asks for a reconcile; bursts of events coalesce into one.
func (c *Controller) markDirty() {
	select {
	case c.dirty <- struct{}{}:
	default:
	}
}

// onUpdate skips Node updates that change nothing the mesh reads
// (heartbeats, labels, other annotations), which at thousands of nodes
// are most of them.
func (c *Controller) onUpdate(old, cur any) {
	o, ok1 := old.(*v1.Node)
	n, ok2 := cur.(*v1.Node)
	if !ok1 || !ok2 || o.Name == c.opts.NodeName || n.Name == c.opts.NodeName || meshRelevantChange(o, n) {
		c.markDirty()
	}
}

// Local returns the ready network, or nil before it is ready.
func (c *Controller) Local() *LocalNetwork {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ready != nil {
		return nil
	}
	return c.local
}

// Ready returns nil when the local network is ready, else why not.
func (c *Controller) Ready() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.ready
}

// Remotes returns the remote nodes last programmed: the proxy's table of
// which node owns which pod CIDR (and its provider address).
func (c *Controller) Remotes() []RemoteNode {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]RemoteNode(nil), c.remote...)
}
