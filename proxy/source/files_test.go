// Address plan: cluster IPs in 10.96.0.0/16, endpoints in 10.244.1.0/24.
package source

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/klog/v2/ktesting"
)

// write puts files into dir: name → content, "" to remove the file, or
// "\x00" to empty it.
func write(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for name, content := range files {
		path := filepath.Join(dir, name)
		if content == "" {
			if err := os.Remove(path); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if content == "\x00" {
			content = "" // an empty file
		}
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func newFilesSource(t *testing.T, dir string) *filesSource {
	return NewFiles(FilesOptions{Dir: dir, NodeName: "node-a", Coalesce: 10 * time.Millisecond, Logger: ktesting.NewLogger(t, ktesting.NewConfig())}).(*filesSource)
}

// TestFilesScanDeliversChanges drives reads directly (no watching): each
// step changes the folder, reads it once and expects these calls in this
// order.
func TestFilesScanDeliversChanges(t *testing.T) {
	apiService := strings.ReplaceAll(webService, "web", "api")
	steps := []struct {
		name  string
		files map[string]string
		want  []string
	}{
		{
			name:  "the first read adds everything, the Node first and slices after Services",
			files: map[string]string{"a.yaml": webSlice, "b.yml": webService + "---\n" + nodeA, "notes.txt": "not a manifest", ".hidden.yaml": apiService},
			want:  []string{"add Node node-a", "add Service default/web", "add EndpointSlice default/web-1"},
		},
		{
			name:  "rewriting a file with the same objects changes nothing",
			files: map[string]string{"b.yml": "# reformatted\n" + nodeA + "---\n" + webService},
		},
		{
			name:  "a changed object is an update",
			files: map[string]string{"a.yaml": strings.Replace(webSlice, "10.244.1.5", "10.244.1.6", 1)},
			want:  []string{"update EndpointSlice default/web-1"},
		},
		{
			name:  "a new file adds its objects",
			files: map[string]string{"c.json": `{"apiVersion": "v1", "kind": "Service", "metadata": {"name": "api"}, "spec": {"clusterIP": "10.96.0.12", "ports": [{"port": 80}]}}`},
			want:  []string{"add Service default/api"},
		},
		{
			name:  "an object moving to another file is no change",
			files: map[string]string{"c.json": "", "d.yaml": strings.Replace(apiService, "10.96.0.10", "10.96.0.12", 1) + "---\n"},
		},
		{
			name:  "a malformed file is skipped and keeps what it delivered",
			files: map[string]string{"d.yaml": "apiVersion: v1\nkind: Service\nmetadata: {name: api\n"},
		},
		{
			name:  "a malformed object is skipped and keeps what it delivered; the file's other objects are read",
			files: map[string]string{"b.yml": nodeA + "---\n" + strings.Replace(webService, "port: 80", "port: x", 1) + "---\n" + strings.ReplaceAll(webService, "web", "cache")},
			want:  []string{"add Service default/cache"},
		},
		{
			name:  "a fixed file delivers its changes against what it delivered before",
			files: map[string]string{"b.yml": strings.Replace(nodeA, "zone-a", "zone-b", 1) + "---\n" + webService},
			want:  []string{"update Node node-a", "delete Service default/cache"},
		},
		{
			name:  "another file's Service is added",
			files: map[string]string{"e.yaml": strings.ReplaceAll(webService, "web", "e")},
			want:  []string{"add Service default/e"},
		},
		{
			name:  "an emptied file is taken to be half-written and keeps its objects",
			files: map[string]string{"e.yaml": "\x00"},
		},
		{
			name:  "a file with only a comment has no objects",
			files: map[string]string{"e.yaml": "# nothing here\n"},
			want:  []string{"delete Service default/e"},
		},
		{
			name:  "removing a malformed file deletes what it delivered before",
			files: map[string]string{"d.yaml": ""},
			want:  []string{"delete Service default/api"},
		},
		{
			name:  "an object defined twice is taken from the first file",
			files: map[string]string{"0.yaml": strings.Replace(webService, "port: 80", "port: 81", 1)},
			want:  []string{"update Service default/web"},
		},
		{
			name:  "removing files deletes their objects",
			files: map[string]string{"0.yaml": "", "b.yml": ""},
			want:  []string{"delete Node node-a", "delete Service default/web"},
		},
		{
			name:  "a Service and its slice in one file go together",
			files: map[string]string{"a.yaml": "", "web.yaml": webService + "---\n" + webSlice},
			want:  []string{"add Service default/web", "update EndpointSlice default/web-1"},
		},
	}
	dir := t.TempDir()
	s := newFilesSource(t, dir)
	rec := newRecorder(t)
	for _, step := range steps {
		write(t, dir, step.files)
		s.scan(rec)
		if diff := cmp.Diff(step.want, rec.drain()); diff != "" {
			t.Errorf("%s: calls (-want +got):\n%s", step.name, diff)
		}
	}
}

func TestFilesDeliverTheSameObjectsTheInformersWould(t *testing.T) {
	dir := t.TempDir()
	write(t, dir, map[string]string{"all.yaml": webService + "---\n" + webSlice + "---\n" + nodeA})
	s := newFilesSource(t, dir)
	rec := newRecorder(t)
	s.scan(rec)
	svc, ok := rec.object("Service default/web").(*v1.Service)
	if !ok {
		t.Fatalf("no Service delivered: %s", rec)
	}
	if svc.UID == "" || svc.ResourceVersion == "" || svc.Namespace != "default" {
		t.Errorf("Service metadata: UID %q, resourceVersion %q, namespace %q", svc.UID, svc.ResourceVersion, svc.Namespace)
	}
	if !wantService(svc) {
		t.Errorf("the Service fails the informers' filter")
	}

	// An update hands over the object delivered before as old.
	write(t, dir, map[string]string{"all.yaml": strings.Replace(webService, "port: 80", "port: 81", 1)})
	var old, new *v1.Service
	s.scan(handlerFuncs{service: func(o, n *v1.Service) { old, new = o, n }})
	if old != svc {
		t.Errorf("update's old object is not the one delivered before")
	}
	if new == nil || new.UID != svc.UID || new.ResourceVersion == svc.ResourceVersion {
		t.Errorf("update's new object: %+v", new)
	}
}

// handlerFuncs is a proxy.Handler from funcs; nil funcs ignore calls.
type handlerFuncs struct {
	service func(old, new *v1.Service)
}

func (h handlerFuncs) OnServiceUpdate(old, new *v1.Service) {
	if h.service != nil {
		h.service(old, new)
	}
}
func (handlerFuncs) OnEndpointSliceUpdate(old, new *discoveryv1.EndpointSlice) {}
func (handlerFuncs) OnNodeUpdate(old, new *v1.Node)                            {}
func (handlerFuncs) OnSynced()                                                 {}

// TestFilesWatchTheFolder runs the source for real: fsnotify and all.
// Each step ends with a sentinel change whose call, delivered after any
// other of the same read, shows that the step's calls have all arrived.
func TestFilesWatchTheFolder(t *testing.T) {
	dir := t.TempDir()
	write(t, dir, map[string]string{"web.yaml": webService + "---\n" + webSlice})
	rec := newRecorder(t)
	src := newFilesSource(t, dir)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- src.Run(ctx, rec) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	}()
	if diff := cmp.Diff([]string{"add Service default/web", "add EndpointSlice default/web-1", "synced"}, rec.take(3)); diff != "" {
		t.Fatalf("initial calls (-want +got):\n%s", diff)
	}

	sentinel := 0
	step := func(name string, change func(), want ...string) {
		t.Helper()
		change()
		// An EndpointSlice named to be delivered last in its read.
		sentinel++
		id := fmt.Sprintf("zz-sentinel-%d", sentinel)
		write(t, dir, map[string]string{id + ".yaml": strings.ReplaceAll(webSlice, "web-1", id)})
		want = append(want, "add EndpointSlice default/"+id)
		if diff := cmp.Diff(want, rec.takeUntil("add EndpointSlice default/"+id)); diff != "" {
			t.Errorf("%s: calls (-want +got):\n%s", name, diff)
		}
	}

	step("a changed file is an update", func() {
		write(t, dir, map[string]string{"web.yaml": strings.Replace(webService, "port: 80", "port: 81", 1) + "---\n" + webSlice})
	}, "update Service default/web")

	step("an editor's save (write a temporary file, rename it over) is one update", func() {
		tmp := filepath.Join(dir, ".web.yaml.swp")
		write(t, dir, map[string]string{".web.yaml.swp": strings.Replace(webService, "port: 80", "port: 82", 1) + "---\n" + webSlice})
		if err := os.Rename(tmp, filepath.Join(dir, "web.yaml")); err != nil {
			t.Fatal(err)
		}
	}, "update Service default/web")

	step("a malformed file keeps its objects", func() {
		write(t, dir, map[string]string{"web.yaml": "apiVersion: v1\nkind: Service\nmetadata: {name: web"})
	})

	step("a removed file deletes its objects", func() {
		write(t, dir, map[string]string{"web.yaml": ""})
	}, "delete Service default/web", "delete EndpointSlice default/web-1")

	step("a file renamed into the folder adds its objects", func() {
		outside := filepath.Join(t.TempDir(), "node.yaml")
		if err := os.WriteFile(outside, []byte(nodeA), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(outside, filepath.Join(dir, "node.yaml")); err != nil {
			t.Fatal(err)
		}
	}, "add Node node-a")
}

func TestFilesRunNeedsAFolderAndANodeName(t *testing.T) {
	ctx := context.Background()
	file := filepath.Join(t.TempDir(), "x.yaml")
	write(t, filepath.Dir(file), map[string]string{"x.yaml": webService})
	tests := []struct {
		name string
		opts FilesOptions
		want func(error) bool
	}{
		{"a missing folder", FilesOptions{Dir: filepath.Join(t.TempDir(), "missing"), NodeName: "node-a"}, func(err error) bool { return errors.Is(err, fs.ErrNotExist) }},
		{"a file instead of a folder", FilesOptions{Dir: file, NodeName: "node-a"}, contains("is not a folder")},
		{"no node name", FilesOptions{Dir: t.TempDir()}, contains("no node name")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := NewFiles(tt.opts).Run(ctx, newRecorder(t)); !tt.want(err) {
				t.Errorf("Run: unexpected error %v", err)
			}
		})
	}
}

func contains(text string) func(error) bool {
	return func(err error) bool { return err != nil && strings.Contains(err.Error(), text) }
}
