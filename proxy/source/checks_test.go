// Address plan: nodes 192.168.1.10–12 with pod CIDRs 10.244.1.0/24,
// 10.244.2.0/24 (and overlapping ones inside it), pods in those, cluster
// IPs in 10.96.0.0/16.
package source

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/klog/v2/ktesting"
)

func nodeYAML(name, cidr string) string {
	return fmt.Sprintf("apiVersion: v1\nkind: Node\nmetadata: {name: %s}\nspec: {podCIDRs: [%s]}\n", name, cidr)
}

func pod(name, nodeName, ip string) string {
	return fmt.Sprintf("apiVersion: v1\nkind: Pod\nmetadata: {name: %s}\nspec: {nodeName: %s, containers: [{name: c, image: i}]}\nstatus: {podIP: %s}\n", name, nodeName, ip)
}

func sliceOn(name, ip, nodeName string) string {
	return fmt.Sprintf("apiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\nmetadata: {name: %s, labels: {kubernetes.io/service-name: web}}\naddressType: IPv4\nendpoints:\n- addresses: [%s]\n  nodeName: %s\n", name, ip, nodeName)
}

func newFolder(t *testing.T, dir string, offline bool) *Folder {
	return NewFolder(FilesOptions{Dir: dir, NodeName: "node-a", Offline: offline, Coalesce: 10 * time.Millisecond, Logger: ktesting.NewLogger(t, ktesting.NewConfig())})
}

// objectNames lists the folder's objects as "Kind ns/name", sorted.
func objectNames(f *Folder) []string {
	all, _ := f.snapshot()
	var out []string
	for k := range all {
		out = append(out, k.String())
	}
	slices.Sort(out)
	return out
}

func TestFolderChecksAcrossObjects(t *testing.T) {
	tests := []struct {
		name    string
		offline bool
		files   map[string]string
		want    []string // the objects used
		wantErr []string // each a substring of one problem, in order
	}{
		{
			name:  "nodes, pods and slices that fit are all used",
			files: map[string]string{"a.yaml": nodeYAML("node-a", "10.244.1.0/24") + "---\n" + nodeYAML("node-b", "10.244.2.0/24") + "---\n" + pod("p", "node-a", "10.244.1.5") + "---\n" + sliceOn("web-1", "10.244.2.5", "node-b")},
			want:  []string{"Node node-a", "Node node-b", "EndpointSlice default/web-1", "Pod default/p"},
		},
		{
			name:    "a Node whose pod CIDR overlaps an earlier Node's is not used, and the error names both",
			files:   map[string]string{"a.yaml": nodeYAML("node-a", "10.244.1.0/24"), "b.yaml": nodeYAML("node-b", "10.244.0.0/16")},
			want:    []string{"Node node-a"},
			wantErr: []string{"b.yaml:1: Node node-b: pod CIDR 10.244.0.0/16 overlaps Node node-a's 10.244.1.0/24 (a.yaml:1); it is not used"},
		},
		{
			name:    "the first file wins an overlap, whatever the names of the nodes",
			files:   map[string]string{"a.yaml": nodeYAML("node-z", "10.244.1.0/24"), "b.yaml": nodeYAML("node-a", "10.244.1.128/25")},
			want:    []string{"Node node-z"},
			wantErr: []string{"b.yaml:1: Node node-a: pod CIDR 10.244.1.128/25 overlaps Node node-z's"},
		},
		{
			name:    "a pod CIDR that does not parse or has host bits is an error",
			files:   map[string]string{"a.yaml": nodeYAML("node-a", "10.244.1.0/33") + "---\n" + nodeYAML("node-b", "10.244.2.1/24")},
			wantErr: []string{`a.yaml:1: Node node-a: pod CIDR "10.244.1.0/33" does not parse`, `a.yaml:6: Node node-b: pod CIDR "10.244.2.1/24" has host bits set (want 10.244.2.0/24)`},
		},
		{
			name:    "offline, a slice with an endpoint on an undeclared Node is not used",
			offline: true,
			files:   map[string]string{"a.yaml": nodeYAML("node-a", "10.244.1.0/24") + "---\n" + sliceOn("web-1", "10.244.9.5", "node-z") + "---\n" + sliceOn("web-2", "10.244.1.5", "node-a")},
			want:    []string{"Node node-a", "EndpointSlice default/web-2"},
			wantErr: []string{`a.yaml:6: EndpointSlice default/web-1: endpoint 10.244.9.5 is on Node "node-z", which no manifest declares; it is not used`},
		},
		{
			name:  "with Nodes from the cluster, a slice's node names are not checked",
			files: map[string]string{"a.yaml": sliceOn("web-1", "10.244.9.5", "node-z")},
			want:  []string{"EndpointSlice default/web-1"},
		},
		{
			name:    "offline, a Pod on an undeclared Node is not used",
			offline: true,
			files:   map[string]string{"a.yaml": pod("p", "node-z", "10.244.9.5")},
			wantErr: []string{`a.yaml:1: Pod default/p: runs on Node "node-z", which no manifest declares`},
		},
		{
			name:    "a Pod outside its Node's pod CIDR, or with another Pod's address, is not used",
			files:   map[string]string{"a.yaml": nodeYAML("node-a", "10.244.1.0/24") + "---\n" + pod("p", "node-a", "10.244.1.5") + "---\n" + pod("q", "node-a", "10.244.2.5") + "---\n" + pod("r", "node-a", "10.244.1.5")},
			want:    []string{"Node node-a", "Pod default/p"},
			wantErr: []string{"Pod default/q: pod IP 10.244.2.5 is outside Node node-a's pod CIDRs [10.244.1.0/24]", "Pod default/r: pod IP 10.244.1.5 is Pod default/p's too (a.yaml:6)"},
		},
		{
			name:    "a Pod on a Node without a pod CIDR is not used",
			files:   map[string]string{"a.yaml": nodeA + "---\n" + pod("p", "node-a", "10.244.1.5")},
			want:    []string{"Node node-a"},
			wantErr: []string{"Pod default/p: its Node node-a has no pod CIDR; it is not used"},
		},
		{
			name:  "hostNetwork Pods share the node's address",
			files: map[string]string{"a.yaml": nodeYAML("node-a", "10.244.1.0/24") + "---\n" + strings.Replace(pod("h1", "node-a", "192.168.1.10"), "spec: {", "spec: {hostNetwork: true, ", 1) + "---\n" + strings.Replace(pod("h2", "node-a", "192.168.1.10"), "spec: {", "spec: {hostNetwork: true, ", 1)},
			want:  []string{"Node node-a", "Pod default/h1", "Pod default/h2"},
		},
		{
			name:    "a rejected Node still counts as declared: its objects are not errors of their own",
			offline: true,
			files:   map[string]string{"a.yaml": nodeYAML("node-a", "10.244.1.0/24") + "---\n" + nodeYAML("node-b", "10.244.1.0/25") + "---\n" + sliceOn("web-1", "10.244.1.5", "node-b")},
			want:    []string{"Node node-a", "EndpointSlice default/web-1"},
			wantErr: []string{"Node node-b: pod CIDR 10.244.1.0/25 overlaps"},
		},
		{
			name:    "a malformed object is an error naming its file and object; the file's other objects are used",
			files:   map[string]string{"a.yaml": strings.Replace(webService, "port: 80", "port: eighty", 1) + "---\n" + nodeYAML("node-a", "10.244.1.0/24")},
			want:    []string{"Node node-a"},
			wantErr: []string{"a.yaml:1: Service web:"},
		},
		{
			name:    "an object defined twice is an error; the first is used",
			files:   map[string]string{"a.yaml": nodeYAML("node-a", "10.244.1.0/24"), "b.yaml": nodeYAML("node-a", "10.244.2.0/24")},
			want:    []string{"Node node-a"},
			wantErr: []string{"b.yaml:1: Node node-a is defined again; using the first, at a.yaml:1"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			write(t, dir, tt.files)
			f := newFolder(t, dir, tt.offline)
			if err := f.Read(); err != nil {
				t.Fatal(err)
			}
			want := append([]string(nil), tt.want...)
			slices.Sort(want)
			if diff := cmp.Diff(want, objectNames(f)); diff != "" {
				t.Errorf("objects used (-want +got):\n%s", diff)
			}
			problems := f.Problems()
			if len(problems) != len(tt.wantErr) {
				t.Fatalf("problems %v, want %d", problems, len(tt.wantErr))
			}
			for i, want := range tt.wantErr {
				if !strings.Contains(problems[i].Error(), want) {
					t.Errorf("problem %d: %q does not contain %q", i, problems[i], want)
				}
			}
		})
	}
}

func TestFolderReaders(t *testing.T) {
	dir := t.TempDir()
	write(t, dir, map[string]string{
		"nodes.yaml": nodeA + "spec: {podCIDRs: [10.244.1.0/24]}\n---\n" + nodeYAML("node-b", "10.244.2.0/24"),
		"pods.yaml":  pod("p2", "node-a", "10.244.1.6") + "---\n" + pod("p1", "node-a", "10.244.1.5") + "---\n" + pod("q", "node-b", "10.244.2.5"),
		"web.yaml":   webService + "---\n" + webSlice,
	})
	f := newFolder(t, dir, true)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	watched := make(chan error, 1)
	go func() { watched <- f.Watch(ctx) }()

	t.Run("the proxy gets Services, EndpointSlices and only this node's Node", func(t *testing.T) {
		rec := newRecorder(t)
		done := make(chan error, 1)
		ctx, cancel := context.WithCancel(ctx)
		go func() { done <- f.Proxy().Run(ctx, rec) }()
		want := []string{"add Node node-a", "add Service default/web", "add EndpointSlice default/web-1", "synced"}
		if diff := cmp.Diff(want, rec.take(len(want))); diff != "" {
			t.Errorf("calls (-want +got):\n%s", diff)
		}
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	})

	t.Run("the network part reads every Node, and NotFound for others", func(t *testing.T) {
		nodes := f.Nodes()
		all, err := nodes.List(labels.Everything())
		if err != nil || len(all) != 2 || all[0].Name != "node-a" || all[1].Name != "node-b" {
			t.Errorf("List = %v, %v; want node-a, node-b", all, err)
		}
		zoned, _ := nodes.List(labels.SelectorFromSet(labels.Set{"topology.kubernetes.io/zone": "zone-a"}))
		if len(zoned) != 1 {
			t.Errorf("List by zone = %d Nodes, want node-a", len(zoned))
		}
		if _, err := nodes.Get("node-z"); !apierrors.IsNotFound(err) {
			t.Errorf("Get(node-z) = %v, want NotFound", err)
		}
	})

	t.Run("a node's Pods come sorted by name", func(t *testing.T) {
		var names []string
		for _, p := range f.Pods("node-a") {
			names = append(names, p.Name)
		}
		if diff := cmp.Diff([]string{"p1", "p2"}, names); diff != "" {
			t.Errorf("Pods(node-a) (-want +got):\n%s", diff)
		}
	})

	t.Run("a Node change is told to the network part; other changes are not", func(t *testing.T) {
		changed := make(chan struct{}, 10)
		ctx, cancel := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() { done <- f.Nodes().Run(ctx, func() { changed <- struct{}{} }) }()
		wait := func(what string) {
			t.Helper()
			select {
			case <-changed:
			case <-time.After(hang):
				t.Fatalf("no call after %s", what)
			}
		}
		wait("the first read")
		write(t, dir, map[string]string{"web.yaml": strings.Replace(webService, "port: 80", "port: 81", 1)})
		write(t, dir, map[string]string{"nodes.yaml": nodeA + "spec: {podCIDRs: [10.244.1.0/24]}\n---\n" + nodeYAML("node-b", "10.244.3.0/24")})
		wait("a Node change")
		deadline := time.Now().Add(hang)
		for {
			if n, _ := f.Nodes().Get("node-b"); n != nil && n.Spec.PodCIDRs[0] == "10.244.3.0/24" {
				break
			}
			if time.Now().After(deadline) {
				t.Fatal("node-b never changed")
			}
			time.Sleep(10 * time.Millisecond)
		}
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	})
	cancel()
	if err := <-watched; err != nil {
		t.Error(err)
	}
}
