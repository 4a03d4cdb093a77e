package agent

import (
	"context"
	"fmt"

	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/nodenet/nodenet/proxy/source"
)

// Offline reports whether the agent runs without an API server: a files
// source with neither --kubeconfig nor --apiserver. The folder then
// supplies the Nodes (this node's and its peers') besides Services and
// EndpointSlices, nothing is written to any Node, and Events go to the
// log. With either flag a files source supplies only Services and
// EndpointSlices, and Nodes come from the cluster.
func (o Options) Offline() bool {
	spec, err := source.Parse(o.Source)
	return err == nil && !spec.UsesCluster() && o.Kubeconfig == "" && o.APIServer == ""
}

// nodeGetter reads one Node: the folder's Nodes offline.
type nodeGetter interface {
	Get(name string) (*v1.Node, error)
}

// connect is how the running agent reaches its cluster: an API client,
// or offline the manifest folder, read once (a folder that cannot be
// read fails here) and then watched until ctx ends; watched yields the
// watch's error then.
func (a *Agent) connect(ctx context.Context) (client kubernetes.Interface, folder *source.Folder, watched <-chan error, err error) {
	if !a.opts.Offline() {
		client, err = newAgentClient(ctx, a.opts, a.cfg.ServiceCIDRs, a.log)
		return client, nil, nil, err
	}
	folder = source.NewFolder(source.FilesOptions{Dir: a.source.Dir, NodeName: a.cfg.NodeName, Offline: true, Logger: a.log})
	if err := folder.Read(); err != nil {
		return nil, nil, nil, fmt.Errorf("--source: %w", err)
	}
	a.log.Info("No API server (a files source without --kubeconfig or --apiserver): Nodes, Services and EndpointSlices come from the folder; nothing is written to the cluster",
		"dir", a.source.Dir, "problems", len(folder.Problems()))
	errc := make(chan error, 1)
	go func() { errc <- folder.Watch(ctx) }()
	return nil, folder, errc, nil
}

// folderNodes is folder's Nodes, or nil without a folder.
func folderNodes(folder *source.Folder) nodeGetter {
	if folder == nil {
		return nil
	}
	return folder.Nodes()
}
