package source

import (
	"context"
	"slices"
	"strings"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"
)

// FolderNodes are a Folder's Nodes as the network part reads them when no
// API server does (overlay.NodeSource): every Node that passed the
// folder's checks, this node's and its peers'.
type FolderNodes struct{ f *Folder }

// Nodes returns the folder's Nodes.
func (f *Folder) Nodes() FolderNodes { return FolderNodes{f: f} }

// Get returns the Node called name, or a NotFound error as a lister
// would.
func (n FolderNodes) Get(name string) (*v1.Node, error) {
	n.f.mu.Lock()
	defer n.f.mu.Unlock()
	if o, ok := n.f.objects[objectKey{kind: kindNode, name: name}]; ok {
		return o.obj.(*v1.Node), nil
	}
	return nil, apierrors.NewNotFound(v1.Resource("nodes"), name)
}

// List returns the Nodes selector selects, sorted by name.
func (n FolderNodes) List(selector labels.Selector) ([]*v1.Node, error) {
	n.f.mu.Lock()
	defer n.f.mu.Unlock()
	var out []*v1.Node
	for k, o := range n.f.objects {
		if k.kind != kindNode {
			continue
		}
		node := o.obj.(*v1.Node)
		if selector == nil || selector.Matches(labels.Set(node.Labels)) {
			out = append(out, node)
		}
	}
	slices.SortFunc(out, func(a, b *v1.Node) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

// Run calls changed once the folder has been read (by Read or Watch,
// which the caller runs) and again each time its Nodes change, until ctx
// ends; it returns nil then. changed is called from one goroutine.
func (n FolderNodes) Run(ctx context.Context, changed func()) error {
	if !n.f.waitRead(ctx) {
		return nil
	}
	for {
		n.f.mu.Lock()
		ch := n.f.nodesChanged
		n.f.mu.Unlock()
		changed()
		select {
		case <-ctx.Done():
			return nil
		case <-ch:
		}
	}
}
