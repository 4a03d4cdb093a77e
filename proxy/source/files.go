package source

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
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
	// NodeName is this node: the proxy gets only its Node.
	NodeName string
	// Offline says the folder stands in for the API server: Nodes (this
	// node's and its peers') and Pods come from it too, so an
	// EndpointSlice endpoint or a Pod naming a Node that no manifest
	// declares is an error, and that object is not used. Without it the
	// Nodes come from the cluster and such names are not checked.
	Offline bool
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
// namespace and name. See Folder for how files are read and checked.
// Objects get a UID (when they have none) derived from their kind,
// namespace and name, and a resourceVersion derived from their content.
// Services and EndpointSlices get the API server's defaults the proxy
// relies on (port protocols, target ports, cluster IPs and IP families,
// traffic policies, session affinity).
func NewFiles(opts FilesOptions) Interface {
	f := NewFolder(opts)
	return &filesSource{folder: f, view: f.newProxyView()}
}

// filesSource is a proxy source that watches its own Folder.
type filesSource struct {
	folder *Folder
	view   *proxyView
}

func (s *filesSource) Run(ctx context.Context, h proxy.Handler) error {
	if s.folder.opts.NodeName == "" {
		return errors.New("files source: no node name")
	}
	w, err := s.folder.startWatch()
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(ctx)
	failed, done := make(chan error, 1), make(chan struct{})
	go func() {
		defer close(done)
		if err := s.folder.watch(ctx, w); err != nil {
			failed <- err
		}
	}()
	err = s.view.run(ctx, h, failed)
	cancel()
	<-done
	return err
}

// scan reads the folder once and delivers what changed (tests).
func (s *filesSource) scan(h proxy.Handler) {
	_ = s.folder.Read()
	s.view.sync(h)
}

// Folder is a folder of manifests read as one: every reader of it (the
// proxy's source, and on an agent without an API server the network
// part's Nodes and the simulator's Pods) sees the same objects, checked
// the same way.
//
// Each file is parsed when its content changes. A document or List item
// that does not parse, or is not a valid object, is an error naming the
// file, line and object, and is skipped; the file's other objects are
// read. Objects a file delivered before and no longer yields while it has
// errors stay as they were (a half-saved edit does not delete them). The
// first file (by name) to define an object wins; a second definition is
// an error. Then the objects are checked against each other, in file
// order (see check): Nodes whose pod CIDRs are malformed or overlap an
// earlier Node's, Pods whose addresses do not fit their Node, and, with
// Offline, objects naming a Node no manifest declares. A rejected object
// is not used by any reader; the rest are. Problems lists every error
// of the last read.
type Folder struct {
	opts FilesOptions
	log  klog.Logger

	// readMu serializes reads; files is what each file held when last
	// read, by file name.
	readMu sync.Mutex
	files  map[string]*fileState
	logged map[string]bool

	mu       sync.Mutex
	objects  map[objectKey]object
	problems []error
	// changed is closed (and replaced) when objects change; nodesChanged
	// when a Node among them does. readDone is closed by the first read.
	changed      chan struct{}
	nodesChanged chan struct{}
	readDone     chan struct{}
	readOnce     sync.Once
}

type fileState struct {
	// sum is the content last read; a file is parsed again only when it
	// changes.
	sum [sha256.Size]byte
	// objects are what the file yields: from its last content, plus what
	// it yielded before for objects its current content fails to give.
	objects []object
	// errs are its current content's errors.
	errs []error
}

// NewFolder returns a Folder over opts.Dir. Nothing is read until Read or
// Watch.
func NewFolder(opts FilesOptions) *Folder {
	if opts.Logger.GetSink() == nil {
		opts.Logger = klog.Background()
	}
	if opts.Coalesce <= 0 {
		opts.Coalesce = 100 * time.Millisecond
	}
	return &Folder{
		opts:         opts,
		log:          opts.Logger.WithName("source").WithValues("dir", opts.Dir),
		files:        make(map[string]*fileState),
		logged:       make(map[string]bool),
		objects:      make(map[objectKey]object),
		changed:      make(chan struct{}),
		nodesChanged: make(chan struct{}),
		readDone:     make(chan struct{}),
	}
}

// Dir is the folder.
func (f *Folder) Dir() string { return f.opts.Dir }

// Read reads the folder once. It fails only when the folder cannot be
// listed; what is wrong with its files is in Problems.
func (f *Folder) Read() error {
	if err := f.checkDir(); err != nil {
		return err
	}
	return f.read()
}

// Watch reads the folder, then watches it and reads it again after each
// change, until ctx ends; it returns nil then. It fails at once when the
// folder cannot be read or watched.
func (f *Folder) Watch(ctx context.Context) error {
	w, err := f.startWatch()
	if err != nil {
		return err
	}
	return f.watch(ctx, w)
}

// Problems returns the errors of the last read, in file order, each
// naming the file (and line) and the object: malformed documents, objects
// defined twice and the objects the checks rejected.
func (f *Folder) Problems() []error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.problems)
}

// Pods returns the Pods that run on node, sorted by namespace and name.
// Every one passed the checks: a pod IP inside the Node's pod CIDRs and
// taken by no other Pod (hostNetwork Pods aside).
func (f *Folder) Pods(node string) []*v1.Pod {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []*v1.Pod
	for _, o := range f.objects {
		if p, ok := o.obj.(*v1.Pod); ok && p.Spec.NodeName == node {
			out = append(out, p)
		}
	}
	slices.SortFunc(out, func(a, b *v1.Pod) int {
		return strings.Compare(a.Namespace+"/"+a.Name, b.Namespace+"/"+b.Name)
	})
	return out
}

// snapshot returns the objects and a channel closed when they change.
func (f *Folder) snapshot() (map[objectKey]object, <-chan struct{}) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.objects, f.changed
}

// waitRead waits for the first read; false when ctx ended first.
func (f *Folder) waitRead(ctx context.Context) bool {
	select {
	case <-ctx.Done():
		return false
	case <-f.readDone:
		return true
	}
}

func (f *Folder) checkDir() error {
	if info, err := os.Stat(f.opts.Dir); err != nil {
		return fmt.Errorf("files source: %w", err)
	} else if !info.IsDir() {
		return fmt.Errorf("files source: %s is not a folder", f.opts.Dir)
	}
	return nil
}

// startWatch checks the folder, watches it and reads it once.
func (f *Folder) startWatch() (*fsnotify.Watcher, error) {
	if err := f.checkDir(); err != nil {
		return nil, err
	}
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return nil, fmt.Errorf("files source: %w", err)
	}
	// Watch before the first read so that no change falls in between.
	if err := w.Add(f.opts.Dir); err != nil {
		w.Close()
		return nil, fmt.Errorf("files source: watch %s: %w", f.opts.Dir, err)
	}
	if err := f.read(); err != nil {
		w.Close()
		return nil, fmt.Errorf("files source: %w", err)
	}
	f.mu.Lock()
	n := len(f.objects)
	f.mu.Unlock()
	f.log.Info("Manifest folder read", "objects", n)
	return w, nil
}

// watch reads the folder again after each change until ctx ends.
func (f *Folder) watch(ctx context.Context, w *fsnotify.Watcher) error {
	defer w.Close()
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
			if ev.Op == fsnotify.Chmod || !f.relevant(ev.Name) {
				continue
			}
			now := time.Now()
			if pendingSince.IsZero() {
				pendingSince = now
			}
			timer.Reset(max(0, min(f.opts.Coalesce, pendingSince.Add(20*f.opts.Coalesce).Sub(now))))
		case err, ok := <-w.Errors:
			if !ok {
				return errors.New("files source: the folder watch stopped")
			}
			// Events may have been lost (an overflow): read everything.
			f.log.Error(err, "Watching the manifest folder; reading it again")
			if pendingSince.IsZero() {
				pendingSince = time.Now()
				timer.Reset(f.opts.Coalesce)
			}
		case <-timer.C:
			pendingSince = time.Time{}
			if err := f.read(); err != nil {
				f.log.Error(err, "Reading the manifest folder; keeping every object read so far")
			}
		}
	}
}

// relevant tells whether a change to path may change the manifests.
// Kubernetes' ConfigMap and Secret volumes swap a hidden "..data" symlink,
// so those names count too.
func (f *Folder) relevant(path string) bool {
	name := filepath.Base(path)
	return strings.HasPrefix(name, "..") || isManifest(name) || filepath.Clean(path) == filepath.Clean(f.opts.Dir)
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

// read reads the folder and publishes what it holds now.
func (f *Folder) read() error {
	f.readMu.Lock()
	defer f.readMu.Unlock()
	entries, err := os.ReadDir(f.opts.Dir)
	if err != nil {
		return err
	}
	seen := make(map[string]bool)
	for _, e := range entries {
		name := e.Name()
		if e.IsDir() || !isManifest(name) {
			continue
		}
		data, err := os.ReadFile(filepath.Join(f.opts.Dir, name))
		if errors.Is(err, fs.ErrNotExist) {
			continue // removed since ReadDir
		}
		seen[name] = true
		if err != nil {
			f.log.Error(err, "Reading a manifest file; keeping what it delivered before", "file", name)
			continue
		}
		if len(data) == 0 && f.files[name] != nil {
			// Truncated by a writer that has not written yet: wait for
			// the content rather than delete the file's objects.
			f.log.V(2).Info("Manifest file is empty; keeping what it delivered until it has content or is removed", "file", name)
			continue
		}
		sum := sha256.Sum256(data)
		st := f.files[name]
		if st != nil && st.sum == sum {
			continue
		}
		if st == nil {
			st = &fileState{}
			f.files[name] = st
		}
		st.sum = sum
		objects, err := manifest{file: name, log: f.log}.parse(data)
		st.errs = unjoin(err)
		if err != nil {
			objects = keepPrevious(objects, st.objects)
		}
		st.objects = objects
	}
	for name := range f.files {
		if !seen[name] {
			delete(f.files, name)
		}
	}

	names := make([]string, 0, len(f.files))
	for name := range f.files {
		names = append(names, name)
	}
	slices.Sort(names)
	var problems []error
	want := make(map[objectKey]object)
	for _, name := range names {
		problems = append(problems, f.files[name].errs...)
		for _, o := range f.files[name].objects {
			if first, dup := want[o.key]; dup {
				problems = append(problems, fmt.Errorf("%s: %s is defined again; using the first, at %s", o.where, o.key, first.where))
				continue
			}
			want[o.key] = o
		}
	}
	problems = append(problems, check(want, f.opts.Offline)...)
	sortProblems(problems)
	f.logProblems(problems)
	f.publish(want, problems)
	return nil
}

// problemAt reads where a problem is: every one starts with its file,
// then the line its document starts on ("web.yaml:12: ...") or, for a
// YAML syntax error, the line in the file ("web.yaml: yaml: line 14: ...").
var problemAt = regexp.MustCompile(`^([^:]*):(?:(\d+)|(?: yaml: line (\d+)))?`)

// sortProblems orders problems by file, then line; problems at the same
// place keep their order.
func sortProblems(problems []error) {
	type place struct {
		file string
		line int
	}
	at := func(err error) place {
		m := problemAt.FindStringSubmatch(err.Error())
		if m == nil {
			return place{}
		}
		line, _ := strconv.Atoi(m[2] + m[3])
		return place{m[1], line}
	}
	slices.SortStableFunc(problems, func(a, b error) int {
		pa, pb := at(a), at(b)
		if c := strings.Compare(pa.file, pb.file); c != 0 {
			return c
		}
		return pa.line - pb.line
	})
}

// keepPrevious adds to objects, read from a file with errors, the
// objects it yielded before that it yields no longer.
func keepPrevious(objects, previous []object) []object {
	have := make(map[objectKey]bool, len(objects))
	for _, o := range objects {
		have[o.key] = true
	}
	for _, o := range previous {
		if !have[o.key] {
			objects = append(objects, o)
		}
	}
	return objects
}

// unjoin splits an errors.Join error into its errors.
func unjoin(err error) []error {
	if err == nil {
		return nil
	}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return j.Unwrap()
	}
	return []error{err}
}

// logProblems logs each problem once while it lasts.
func (f *Folder) logProblems(problems []error) {
	now := make(map[string]bool, len(problems))
	for _, p := range problems {
		msg := p.Error()
		now[msg] = true
		if !f.logged[msg] {
			f.log.Error(nil, "Bad manifest: the object is not used (the rest are)", "problem", msg)
		}
	}
	f.logged = now
}

// publish makes want the folder's objects, telling the readers when they
// changed.
func (f *Folder) publish(want map[objectKey]object, problems []error) {
	f.mu.Lock()
	changed, nodes := diffKinds(f.objects, want)
	f.objects, f.problems = want, problems
	if changed {
		close(f.changed)
		f.changed = make(chan struct{})
	}
	if nodes {
		close(f.nodesChanged)
		f.nodesChanged = make(chan struct{})
	}
	f.mu.Unlock()
	f.readOnce.Do(func() { close(f.readDone) })
}

// diffKinds reports whether a and b differ, and whether their Nodes do.
func diffKinds(a, b map[objectKey]object) (changed, nodes bool) {
	for k, o := range b {
		if p, ok := a[k]; !ok || p.rv != o.rv {
			changed = true
			nodes = nodes || k.kind == kindNode
		}
	}
	for k := range a {
		if _, ok := b[k]; !ok {
			changed = true
			nodes = nodes || k.kind == kindNode
		}
	}
	return changed, nodes
}

// proxyView is one proxy handler's view of a Folder: what it was given.
type proxyView struct {
	f         *Folder
	delivered map[objectKey]object
}

func (f *Folder) newProxyView() *proxyView {
	return &proxyView{f: f, delivered: make(map[objectKey]object)}
}

// Proxy returns the proxy's source over the folder: its Services,
// EndpointSlices and this node's Node. Its Run waits for the folder's
// first read (Read or Watch, which the caller runs), delivers it, calls
// OnSynced, then delivers each change until ctx ends.
func (f *Folder) Proxy() Interface { return &folderSource{view: f.newProxyView()} }

type folderSource struct{ view *proxyView }

func (s *folderSource) Run(ctx context.Context, h proxy.Handler) error {
	if s.view.f.opts.NodeName == "" {
		return errors.New("files source: no node name")
	}
	return s.view.run(ctx, h, nil)
}

// run delivers the folder to h until ctx ends (nil) or failed yields
// the folder watch's error.
func (v *proxyView) run(ctx context.Context, h proxy.Handler, failed <-chan error) error {
	if !v.f.waitRead(ctx) {
		return nil
	}
	ch := v.sync(h)
	v.f.log.Info("Initial objects delivered", "objects", len(v.delivered))
	h.OnSynced()
	for {
		select {
		case <-ctx.Done():
			return nil
		case err := <-failed:
			return err
		case <-ch:
			ch = v.sync(h)
		}
	}
}

// sync delivers what changed since the last call, and returns the channel
// that says the folder changed again.
func (v *proxyView) sync(h proxy.Handler) <-chan struct{} {
	all, ch := v.f.snapshot()
	want := make(map[objectKey]object, len(all))
	for k, o := range all {
		switch k.kind {
		case kindService, kindSlice:
			want[k] = o
		case kindNode:
			if k.name == v.f.opts.NodeName {
				want[k] = o
			}
		}
	}
	v.deliver(h, want)
	return ch
}

// deliver makes the handler's objects want, in a stable order.
func (v *proxyView) deliver(h proxy.Handler, want map[objectKey]object) {
	log := v.f.log
	keys := make([]objectKey, 0, len(want)+len(v.delivered))
	for k := range want {
		keys = append(keys, k)
	}
	for k := range v.delivered {
		if _, ok := want[k]; !ok {
			keys = append(keys, k)
		}
	}
	slices.SortFunc(keys, objectKey.compare)
	for _, k := range keys {
		old, hadOld := v.delivered[k]
		o, hasNew := want[k]
		switch {
		case hadOld && hasNew && old.rv == o.rv:
			want[k] = old // unchanged: keep what the handler has
			continue
		case !hadOld:
			log.V(2).Info("Adding", "object", k.String(), "at", o.where)
		case !hasNew:
			log.V(2).Info("Deleting", "object", k.String())
		default:
			log.V(2).Info("Updating", "object", k.String(), "at", o.where)
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
	v.delivered = want
}

// typed returns obj as a *T, or a nil *T when obj is nil.
func typed[T any](obj any) *T {
	t, _ := obj.(*T)
	return t
}
