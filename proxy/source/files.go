package source

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/fsnotify/fsnotify"
	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/klog/v2"

	"github.com/nodenet/nodenet/proxy"
)

// FilesOptions configure a source reading a folder of manifests.
type FilesOptions struct {
	// Dir holds the manifests: *.yaml, *.yml and *.json files, each with
	// one or more documents ("---"), each an object or a List. Hidden
	// files and sub-folders are ignored. An empty file is taken to be
	// half-written and changes nothing: to drop a file's objects, remove
	// the file (or leave a comment in it).
	Dir string
	// NodeName is this node: only its Node is delivered.
	NodeName string
	// Coalesce is how long the folder must stay quiet after a change
	// before it is read again (default 100ms), so that an editor's
	// write-then-rename is one change. A folder that never stays quiet is
	// read at least every 20 × Coalesce.
	Coalesce time.Duration
	Logger   klog.Logger
}

// NewFiles returns a source that reads the manifests in opts.Dir, then
// watches the folder and delivers what changed as informers would: adds,
// updates (only when an object's content changed) and deletes, by kind,
// namespace and name. A file that does not parse is logged and skipped,
// and what it delivered before stays. Objects get a UID (when they have
// none) derived from their kind, namespace and name, and a resourceVersion
// derived from their content. Services and EndpointSlices get the API
// server's defaults the proxy relies on (port protocols, target ports,
// cluster IPs and IP families, traffic policies, session affinity).
func NewFiles(opts FilesOptions) Interface {
	if opts.Logger.GetSink() == nil {
		opts.Logger = klog.Background()
	}
	if opts.Coalesce <= 0 {
		opts.Coalesce = 100 * time.Millisecond
	}
	return &filesSource{
		opts:      opts,
		log:       opts.Logger.WithName("source").WithValues("dir", opts.Dir),
		files:     make(map[string]*fileState),
		delivered: make(map[objectKey]object),
	}
}

type filesSource struct {
	opts FilesOptions
	log  klog.Logger

	// files is what each file held when last read, by file name.
	files map[string]*fileState
	// delivered is what the handler has, by key.
	delivered map[objectKey]object
}

type fileState struct {
	// sum is the content last read; a file is parsed again only when it
	// changes.
	sum [sha256.Size]byte
	// objects are from the last content that parsed: older than sum
	// when the file is malformed now.
	objects []object
}

func (s *filesSource) Run(ctx context.Context, h proxy.Handler) error {
	if s.opts.NodeName == "" {
		return errors.New("files source: no node name")
	}
	if info, err := os.Stat(s.opts.Dir); err != nil {
		return fmt.Errorf("files source: %w", err)
	} else if !info.IsDir() {
		return fmt.Errorf("files source: %s is not a folder", s.opts.Dir)
	}
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return fmt.Errorf("files source: %w", err)
	}
	defer w.Close()
	// Watch before the first read so that no change falls in between.
	if err := w.Add(s.opts.Dir); err != nil {
		return fmt.Errorf("files source: watch %s: %w", s.opts.Dir, err)
	}

	s.scan(h)
	s.log.Info("Initial objects delivered", "objects", len(s.delivered))
	h.OnSynced()

	timer := time.NewTimer(time.Hour)
	timer.Stop()
	defer timer.Stop()
	var pendingSince time.Time
	for {
		select {
		case <-ctx.Done():
			return nil
		case ev, ok := <-w.Events:
			if !ok {
				return errors.New("files source: the folder watch stopped")
			}
			if ev.Op == fsnotify.Chmod || !s.relevant(ev.Name) {
				continue
			}
			now := time.Now()
			if pendingSince.IsZero() {
				pendingSince = now
			}
			timer.Reset(max(0, min(s.opts.Coalesce, pendingSince.Add(20*s.opts.Coalesce).Sub(now))))
		case err, ok := <-w.Errors:
			if !ok {
				return errors.New("files source: the folder watch stopped")
			}
			// Events may have been lost (an overflow): read everything.
			s.log.Error(err, "Watching the manifest folder; reading it again")
			if pendingSince.IsZero() {
				pendingSince = time.Now()
				timer.Reset(s.opts.Coalesce)
			}
		case <-timer.C:
			pendingSince = time.Time{}
			s.scan(h)
		}
	}
}

// relevant tells whether a change to path may change the manifests.
// Kubernetes' ConfigMap and Secret volumes swap a hidden "..data" symlink,
// so those names count too.
func (s *filesSource) relevant(path string) bool {
	name := filepath.Base(path)
	return strings.HasPrefix(name, "..") || isManifest(name) || filepath.Clean(path) == filepath.Clean(s.opts.Dir)
}

func isManifest(name string) bool {
	if strings.HasPrefix(name, ".") {
		return false
	}
	switch strings.ToLower(filepath.Ext(name)) {
	case ".yaml", ".yml", ".json":
		return true
	}
	return false
}

// scan reads the folder and delivers what changed since the last scan.
func (s *filesSource) scan(h proxy.Handler) {
	entries, err := os.ReadDir(s.opts.Dir)
	if err != nil {
		s.log.Error(err, "Reading the manifest folder; keeping every object delivered so far")
		return
	}
	seen := make(map[string]bool)
	for _, e := range entries {
		name := e.Name()
		if e.IsDir() || !isManifest(name) {
			continue
		}
		data, err := os.ReadFile(filepath.Join(s.opts.Dir, name))
		if errors.Is(err, fs.ErrNotExist) {
			continue // removed since ReadDir
		}
		seen[name] = true
		if err != nil {
			s.log.Error(err, "Reading a manifest file; keeping what it delivered before", "file", name)
			continue
		}
		if len(data) == 0 && s.files[name] != nil {
			// Truncated by a writer that has not written yet: wait for
			// the content rather than delete the file's objects.
			s.log.V(2).Info("Manifest file is empty; keeping what it delivered until it has content or is removed", "file", name)
			continue
		}
		sum := sha256.Sum256(data)
		st := s.files[name]
		if st != nil && st.sum == sum {
			continue
		}
		if st == nil {
			st = &fileState{}
			s.files[name] = st
		}
		st.sum = sum
		objects, err := manifest{file: name, nodeName: s.opts.NodeName, log: s.log}.parse(data)
		if err != nil {
			s.log.Error(err, "Skipping a malformed manifest file; keeping what it delivered before", "file", name)
			continue
		}
		st.objects = objects
	}
	for name := range s.files {
		if !seen[name] {
			delete(s.files, name)
		}
	}

	// The first file (by name) to define an object wins.
	names := make([]string, 0, len(s.files))
	for name := range s.files {
		names = append(names, name)
	}
	slices.Sort(names)
	want := make(map[objectKey]object)
	for _, name := range names {
		for _, o := range s.files[name].objects {
			if first, dup := want[o.key]; dup {
				s.log.Error(nil, "Object defined twice; using the first", "object", o.key.String(), "first", first.where, "ignored", o.where)
				continue
			}
			want[o.key] = o
		}
	}
	s.deliver(h, want)
}

// deliver makes the handler's objects want, in a stable order.
func (s *filesSource) deliver(h proxy.Handler, want map[objectKey]object) {
	keys := make([]objectKey, 0, len(want)+len(s.delivered))
	for k := range want {
		keys = append(keys, k)
	}
	for k := range s.delivered {
		if _, ok := want[k]; !ok {
			keys = append(keys, k)
		}
	}
	slices.SortFunc(keys, objectKey.compare)
	for _, k := range keys {
		old, hadOld := s.delivered[k]
		o, hasNew := want[k]
		switch {
		case hadOld && hasNew && old.rv == o.rv:
			want[k] = old // unchanged: keep what the handler has
			continue
		case !hadOld:
			s.log.V(2).Info("Adding", "object", k.String(), "at", o.where)
		case !hasNew:
			s.log.V(2).Info("Deleting", "object", k.String())
		default:
			s.log.V(2).Info("Updating", "object", k.String(), "at", o.where)
		}
		var oldObj, newObj any
		if hadOld {
			oldObj = old.obj
		}
		if hasNew {
			newObj = o.obj
		}
		switch k.kind {
		case kindService:
			h.OnServiceUpdate(typed[v1.Service](oldObj), typed[v1.Service](newObj))
		case kindSlice:
			h.OnEndpointSliceUpdate(typed[discoveryv1.EndpointSlice](oldObj), typed[discoveryv1.EndpointSlice](newObj))
		case kindNode:
			h.OnNodeUpdate(typed[v1.Node](oldObj), typed[v1.Node](newObj))
		}
	}
	s.delivered = want
}

// typed returns obj as a *T, or a nil *T when obj is nil.
func typed[T any](obj any) *T {
	t, _ := obj.(*T)
	return t
}
