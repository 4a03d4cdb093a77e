// Package source delivers the objects the proxy reads — Services,
// EndpointSlices and this node's Node — to a proxy.Handler, either from
// the cluster (informers) or from a folder of manifests (KEP-2104's "test
// a backend without a cluster"). Both deliver the same calls for the same
// objects, with kube-proxy's filters: no headless Services, no Services
// another proxy claims, no EndpointSlices of headless Services, and only
// this node's Node.
//
// A folder (Folder) can also stand in for the whole API server: an agent
// without one reads every Node from it for the network part
// (Folder.Nodes), and nodenetctl's render its Pods (Folder.Pods). The
// folder's objects are checked against each other, and a bad one is an
// error naming its file and object (Folder.Problems) and is not used.
package source

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"

	"github.com/nodenet/nodenet/proxy"
)

// Interface is a source of the proxy's objects.
type Interface interface {
	// Run delivers every object to h, calls h.OnSynced once the initial
	// objects are delivered, then delivers changes until ctx is done. It
	// returns nil when ctx is done and an error when it cannot start. It
	// calls h from one goroutine at a time, and not after it returns.
	// Run is called once per source.
	Run(ctx context.Context, h proxy.Handler) error
}

// Kind names a kind of source in the --source flag.
type Kind string

// The kinds of source.
const (
	// Kubernetes reads the cluster through informers (the default).
	Kubernetes Kind = "kubernetes"
	// Files reads a folder of manifests and watches it.
	Files Kind = "files"
)

// Spec is a parsed --source flag value.
type Spec struct {
	Kind Kind
	// Dir is the manifest folder of a Files source.
	Dir string
}

func (s Spec) String() string {
	if s.Kind == Files {
		return string(Files) + ":" + s.Dir
	}
	return string(Kubernetes)
}

// UsesCluster reports whether the source reads the cluster: only then does
// it need a client.
func (s Spec) UsesCluster() bool { return s.Kind != Files }

// Parse reads a --source flag value: "kubernetes" (or empty) for the
// cluster, "files:DIR" for a folder of manifests.
func Parse(spec string) (Spec, error) {
	switch {
	case spec == "" || spec == string(Kubernetes):
		return Spec{Kind: Kubernetes}, nil
	case strings.HasPrefix(spec, string(Files)+":"):
		dir := strings.TrimPrefix(spec, string(Files)+":")
		if dir == "" {
			return Spec{}, fmt.Errorf("source %q: files needs a folder, as in files:/etc/nodenet/manifests", spec)
		}
		return Spec{Kind: Files, Dir: dir}, nil
	default:
		return Spec{}, fmt.Errorf("source %q: want %q or %q", spec, Kubernetes, "files:DIR")
	}
}

// Options are what either kind of source may need.
type Options struct {
	// Client is required by a Kubernetes source.
	Client       kubernetes.Interface
	NodeName     string
	ResyncPeriod time.Duration
	Logger       klog.Logger
}

// New builds the source s describes.
func (s Spec) New(opts Options) (Interface, error) {
	if opts.NodeName == "" {
		return nil, errors.New("source: no node name")
	}
	switch s.Kind {
	case Files:
		return NewFiles(FilesOptions{Dir: s.Dir, NodeName: opts.NodeName, Logger: opts.Logger}), nil
	case Kubernetes, "":
		if opts.Client == nil {
			return nil, errors.New("source: kubernetes needs a client")
		}
		return NewInformers(InformerOptions{
			Client:       opts.Client,
			NodeName:     opts.NodeName,
			ResyncPeriod: opts.ResyncPeriod,
			Logger:       opts.Logger,
		}), nil
	default:
		return nil, fmt.Errorf("source: unknown kind %q", s.Kind)
	}
}

// The labels kube-proxy filters by (cmd/kube-proxy/app/server.go).
const (
	// labelServiceProxyName marks a Service another proxy implements.
	labelServiceProxyName = "service.kubernetes.io/service-proxy-name"
	// labelHeadless marks the EndpointSlices of a headless Service.
	labelHeadless = v1.IsHeadlessService
)

// wantService is kube-proxy's Service filter: the informer asks the API
// server for it, and both sources apply it too (fake clients, files).
func wantService(svc *v1.Service) bool {
	if svc == nil {
		return false
	}
	if _, ok := svc.Labels[labelServiceProxyName]; ok {
		return false
	}
	return svc.Spec.ClusterIP != v1.ClusterIPNone
}

// wantSlice is kube-proxy's EndpointSlice filter.
func wantSlice(slice *discoveryv1.EndpointSlice) bool {
	if slice == nil {
		return false
	}
	_, headless := slice.Labels[labelHeadless]
	return !headless
}

// serialHandler makes calls from several informers one at a time.
type serialHandler struct {
	mu sync.Mutex
	h  proxy.Handler
}

func (s *serialHandler) OnServiceUpdate(old, new *v1.Service) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.h.OnServiceUpdate(old, new)
}

func (s *serialHandler) OnEndpointSliceUpdate(old, new *discoveryv1.EndpointSlice) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.h.OnEndpointSliceUpdate(old, new)
}

func (s *serialHandler) OnNodeUpdate(old, new *v1.Node) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.h.OnNodeUpdate(old, new)
}

func (s *serialHandler) OnSynced() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.h.OnSynced()
}
