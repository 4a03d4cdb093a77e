package deploy_test

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	admissionv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/intstr"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/kustomize/api/konfig"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"

	"github.com/nodenet/nodenet/agent/apiaddr"
	"github.com/nodenet/nodenet/config"
)

// Names the manifests and the agent share.
const (
	namespace          = "nodenet-system"
	serviceAccount     = "nodenet"
	configMapName      = "nodenet-config"
	configKey          = "config.yaml"
	apiserverConfigMap = "nodenet-apiserver"
	imageName          = "ghcr.io/nodenet/nodenet"
	image              = imageName + ":latest"
	linuxDaemonSet     = "nodenet-agent-linux"
	windowsDaemonSet   = "nodenet-agent-windows"
	// sandboxMount is what containerd replaces with a HostProcess
	// container's image mount in its command line.
	sandboxMount = `$env:CONTAINER_SANDBOX_MOUNT_POINT`
)

// object is one object kustomize rendered (or one document of a file),
// decoded strictly into its typed form.
type object struct {
	source string // the kustomization (or file) it came from, relative to deploy/
	json   []byte
	gvk    schema.GroupVersionKind
	obj    runtime.Object
}

func (o object) id() string {
	m := o.obj.(metav1.Object)
	return fmt.Sprintf("%s/%s %s/%s", o.gvk.Group, o.gvk.Kind, m.GetNamespace(), m.GetName())
}

// decodeJSON decodes one object into its k8s.io/api type. Strict: an
// unknown or duplicate field is an error, so a typo cannot be silently
// dropped on the way to the API server.
func decodeJSON(j []byte) (object, error) {
	var tm metav1.TypeMeta
	if err := yaml.Unmarshal(j, &tm); err != nil {
		return object{}, err
	}
	gvk := tm.GroupVersionKind()
	obj, err := scheme.Scheme.New(gvk)
	if err != nil {
		return object{}, fmt.Errorf("kind %s: %w", gvk, err)
	}
	if err := yaml.UnmarshalStrict(j, obj); err != nil {
		return object{}, fmt.Errorf("%s: %w", gvk.Kind, err)
	}
	return object{json: j, gvk: gvk, obj: obj}, nil
}

// decodeFile reads every YAML document of file (relative to deploy/) into
// its k8s.io/api type, strictly. kustomize reads what it renders more
// leniently (a key given twice in a file is not an error to it), so the
// files themselves are checked too.
func decodeFile(file string) ([]object, error) {
	data, err := os.ReadFile(filepath.FromSlash(file))
	if err != nil {
		return nil, err
	}
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	var out []object
	for i := 0; ; i++ {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", file, err)
		}
		j, err := yaml.YAMLToJSONStrict(doc)
		if err != nil {
			return nil, fmt.Errorf("%s document %d: %w", file, i, err)
		}
		if bytes.Equal(bytes.TrimSpace(j), []byte("null")) {
			continue // only comments
		}
		o, err := decodeJSON(j)
		if err != nil {
			return nil, fmt.Errorf("%s document %d: %w", file, i, err)
		}
		o.source = file
		out = append(out, o)
	}
}

// kustomizeOptions are kubectl's for apply -k: krusty's defaults (files
// only from inside a kustomization's root, no plugins) with the legacy
// sort order, which puts the Namespace first.
func kustomizeOptions() *krusty.Options {
	o := krusty.MakeDefaultOptions()
	o.Reorder = krusty.ReorderOptionLegacy
	return o
}

// readRecorder is the disk, noting every file kustomize reads from it.
type readRecorder struct {
	filesys.FileSystem
	read map[string]bool // absolute paths
}

func (r readRecorder) ReadFile(p string) ([]byte, error) {
	data, err := r.FileSystem.ReadFile(p)
	if err == nil {
		if abs, err := filepath.Abs(p); err == nil {
			r.read[abs] = true
		}
	}
	return data, err
}

// rendered is a kustomization's output and the files kustomize read.
type rendered struct {
	objects []object
	files   map[string]bool // relative to deploy/, slash-separated
}

// render builds the kustomization in dir (relative to deploy/, or
// absolute) with kustomize's own library, as kubectl apply -k does, and
// decodes every object it renders strictly.
func render(dir string) (rendered, error) {
	out := rendered{files: map[string]bool{}}
	fsys := readRecorder{FileSystem: filesys.MakeFsOnDisk(), read: map[string]bool{}}
	m, err := krusty.MakeKustomizer(kustomizeOptions()).Run(fsys, filepath.FromSlash(dir))
	if err != nil {
		return out, fmt.Errorf("kustomize build %s: %w", dir, err)
	}
	for _, r := range m.Resources() {
		j, err := r.MarshalJSON()
		if err != nil {
			return out, fmt.Errorf("kustomize build %s: %s: %w", dir, r.CurId(), err)
		}
		o, err := decodeJSON(j)
		if err != nil {
			return out, fmt.Errorf("kustomize build %s: %s: %w", dir, r.CurId(), err)
		}
		o.source = dir
		out.objects = append(out.objects, o)
	}
	root, err := filepath.Abs(".")
	if err != nil {
		return out, err
	}
	for f := range fsys.read {
		rel, err := filepath.Rel(root, f)
		if err != nil {
			return out, err
		}
		out.files[filepath.ToSlash(rel)] = true
	}
	return out, nil
}

// mustRender renders the kustomization in dir or fails t.
func mustRender(t *testing.T, dir string) []object {
	t.Helper()
	r, err := render(dir)
	if err != nil {
		t.Fatal(err)
	}
	return r.objects
}

// find returns the one object of type T named name, or fails t.
func find[T runtime.Object](t *testing.T, objects []object, name string) T {
	t.Helper()
	var found []T
	for _, o := range objects {
		if typed, ok := o.obj.(T); ok && o.obj.(metav1.Object).GetName() == name {
			found = append(found, typed)
		}
	}
	if len(found) != 1 {
		var zero T
		t.Fatalf("want one %T named %q, found %d", zero, name, len(found))
	}
	return found[0]
}

// isKustomization reports whether file is a kustomization file by name.
func isKustomization(file string) bool {
	return slices.Contains(konfig.RecognizedKustomizationFileNames(), path.Base(file))
}

// yamlFiles lists every YAML file under deploy/ but the kustomizations
// themselves, relative to deploy/.
func yamlFiles(t *testing.T) []string {
	t.Helper()
	var files []string
	err := filepath.WalkDir(".", func(p string, d fs.DirEntry, err error) error {
		p = filepath.ToSlash(p)
		if err == nil && !d.IsDir() && (strings.HasSuffix(p, ".yaml") || strings.HasSuffix(p, ".yml")) && !isKustomization(p) {
			files = append(files, p)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

// kustomizations lists every directory that holds a kustomization under
// deploy/ and under the repository's examples/ (overlays an operator
// copies), relative to deploy/.
func kustomizations(t *testing.T) []string {
	t.Helper()
	var dirs []string
	for _, root := range []string{".", "../examples"} {
		err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if errors.Is(err, fs.ErrNotExist) && p == root {
				return fs.SkipDir
			}
			if err == nil && !d.IsDir() && isKustomization(p) {
				dirs = append(dirs, filepath.ToSlash(filepath.Dir(p)))
			}
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if !slices.Contains(dirs, ".") {
		t.Fatalf("no kustomization in deploy/ among %v", dirs)
	}
	return dirs
}

// sharedConfig is the AgentConfiguration the ConfigMap ships.
func sharedConfig(t *testing.T, objects []object) []byte {
	t.Helper()
	cm := find[*v1.ConfigMap](t, objects, configMapName)
	data, ok := cm.Data[configKey]
	if !ok {
		t.Fatalf("ConfigMap %s has no %s", configMapName, configKey)
	}
	return []byte(data)
}

// nodeConfig loads the shared config the way the agent on a node of os
// does: node-local defaults filled in, NODE_NAME set.
func nodeConfig(t *testing.T, objects []object, target config.OS) *config.AgentConfiguration {
	t.Helper()
	cfg, _, err := config.Load(sharedConfig(t, objects), config.LoadOptions{
		OS:     target,
		Getenv: func(k string) string { return map[string]string{config.NodeNameEnv: "node-1"}[k] },
	})
	if err != nil {
		t.Fatalf("load the shared config as a %s node would: %v", target, err)
	}
	return cfg
}

// TestEveryManifestFileDecodesStrictlyIntoItsKubernetesType checks the
// files themselves, patches included: kustomize would take the last of a
// key given twice without a word.
func TestEveryManifestFileDecodesStrictlyIntoItsKubernetesType(t *testing.T) {
	for _, file := range yamlFiles(t) {
		t.Run(file, func(t *testing.T) {
			objects, err := decodeFile(file)
			if err != nil {
				t.Fatal(err)
			}
			if len(objects) == 0 {
				t.Fatal("no objects")
			}
			for _, o := range objects {
				if o.obj.(metav1.Object).GetName() == "" {
					t.Errorf("%s has no name", o.gvk.Kind)
				}
			}
		})
	}
}

// TestEveryKustomizationBuildsWithKustomize renders deploy/, each of its
// parts and every overlay under deploy/ or examples/ with kustomize's
// library, and decodes what it renders strictly.
func TestEveryKustomizationBuildsWithKustomize(t *testing.T) {
	for _, dir := range kustomizations(t) {
		t.Run(dir, func(t *testing.T) {
			objects := mustRender(t, dir)
			if len(objects) == 0 {
				t.Fatal("renders no objects")
			}
			ours := !strings.HasPrefix(dir, "../") // an example may choose its own namespace
			for _, o := range objects {
				m := o.obj.(metav1.Object)
				if m.GetName() == "" {
					t.Errorf("%s has no name", o.gvk.Kind)
				}
				// Every namespaced object lives in nodenet-system, but for
				// the discovery Role on kube-proxy's ConfigMap.
				switch {
				case isClusterScoped(o.gvk):
					if m.GetNamespace() != "" {
						t.Errorf("%s: cluster-scoped object with namespace %q", o.id(), m.GetNamespace())
					}
				case m.GetNamespace() == "":
					t.Errorf("%s: no namespace (kubectl would put it in the current context's)", o.id())
				case !ours:
				case isDiscoveryRBAC(o):
					if m.GetNamespace() != metav1.NamespaceSystem {
						t.Errorf("%s: namespace %q, want kube-system (where kube-proxy's ConfigMap is)", o.id(), m.GetNamespace())
					}
				case m.GetNamespace() != namespace:
					t.Errorf("%s: namespace %q, want %q", o.id(), m.GetNamespace(), namespace)
				}
			}
		})
	}
}

// discoveryRole is the Role (and RoleBinding) that lets the agent read
// kube-proxy's ConfigMap while discovering the API server.
const discoveryRole = "nodenet-agent-apiserver-discovery"

func isDiscoveryRBAC(o object) bool {
	return (o.gvk.Kind == "Role" || o.gvk.Kind == "RoleBinding") && o.obj.(metav1.Object).GetName() == discoveryRole
}

func isClusterScoped(gvk schema.GroupVersionKind) bool {
	switch gvk.Kind {
	case "Namespace", "ClusterRole", "ClusterRoleBinding", "ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding":
		return true
	}
	return false
}

func TestTheKustomizationsReachEveryManifestAndNothingIsMissing(t *testing.T) {
	all, err := render(".")
	if err != nil {
		t.Fatal(err)
	}
	used := map[string]bool{}
	for _, dir := range kustomizations(t) {
		r, err := render(dir)
		if err != nil {
			t.Error(err)
			continue
		}
		for f := range r.files {
			used[f] = true
		}
	}
	for _, file := range yamlFiles(t) {
		switch {
		case !used[file]:
			t.Errorf("%s is in no kustomization", file)
		case !all.files[file] && !strings.HasPrefix(file, "migration/"):
			t.Errorf("%s is not reached from deploy/kustomization.yaml", file)
		}
	}
	var kinds []string
	for _, o := range all.objects {
		kinds = append(kinds, o.gvk.Kind+"/"+o.obj.(metav1.Object).GetName())
	}
	// kubectl applies in this order: the Namespace must come first.
	if len(kinds) == 0 || kinds[0] != "Namespace/"+namespace {
		t.Errorf("deploy/ renders %v: want Namespace/%s first", kinds, namespace)
	}
	want := []string{
		"Namespace/nodenet-system",
		"ServiceAccount/nodenet",
		"ClusterRole/nodenet-agent",
		"ClusterRoleBinding/nodenet-agent",
		"Role/" + discoveryRole,
		"RoleBinding/" + discoveryRole,
		"Role/nodenet-agent-leader-election",
		"RoleBinding/nodenet-agent-leader-election",
		"ValidatingAdmissionPolicy/nodenet-agent-node-writes",
		"ValidatingAdmissionPolicyBinding/nodenet-agent-node-writes",
		"ConfigMap/nodenet-config",
		"ConfigMap/nodenet-apiserver",
		"DaemonSet/" + linuxDaemonSet,
		"DaemonSet/" + windowsDaemonSet,
	}
	if diff := cmp.Diff(slices.Sorted(slices.Values(want)), slices.Sorted(slices.Values(kinds))); diff != "" {
		t.Errorf("deploy/ renders (-want +got):\n%s", diff)
	}
}

// TestAnOverlaySetsTheImageOfEveryContainer does what README.md tells an
// operator to do: an overlay of deploy/ whose images entry (kustomize
// edit set image) renames the placeholder image. Every container and
// init container of both DaemonSets must get it, and nothing else may
// change.
func TestAnOverlaySetsTheImageOfEveryContainer(t *testing.T) {
	const (
		newName = "registry.example.com/team/nodenet"
		newTag  = "v1.2.3"
	)
	deployDir, err := filepath.Abs(".")
	if err != nil {
		t.Fatal(err)
	}
	overlay := t.TempDir()
	// kustomize takes a base by relative path only, as from a repository.
	base, err := filepath.Rel(overlay, deployDir)
	if err != nil {
		t.Fatal(err)
	}
	kustomization := fmt.Sprintf(`apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources:
  - %s
images:
  - name: %s
    newName: %s
    newTag: %s
`, filepath.ToSlash(base), imageName, newName, newTag)
	if err := os.WriteFile(filepath.Join(overlay, "kustomization.yaml"), []byte(kustomization), 0o644); err != nil {
		t.Fatal(err)
	}
	objects := mustRender(t, overlay)
	want := newName + ":" + newTag
	for _, name := range []string{linuxDaemonSet, windowsDaemonSet} {
		spec := find[*appsv1.DaemonSet](t, objects, name).Spec.Template.Spec
		cs := slices.Concat(spec.InitContainers, spec.Containers)
		if len(spec.InitContainers) == 0 || len(spec.Containers) == 0 {
			t.Errorf("%s: %d init containers, %d containers; want both kinds", name, len(spec.InitContainers), len(spec.Containers))
		}
		for _, c := range cs {
			if c.Image != want {
				t.Errorf("%s container %s: image %q, want %q", name, c.Name, c.Image, want)
			}
		}
	}

	plain := mustRender(t, ".")
	if len(objects) != len(plain) {
		t.Fatalf("the overlay renders %d objects, deploy/ %d", len(objects), len(plain))
	}
	for i, o := range objects {
		wantObj := plain[i].obj.DeepCopyObject()
		if ds, ok := wantObj.(*appsv1.DaemonSet); ok {
			for _, cs := range [][]v1.Container{ds.Spec.Template.Spec.InitContainers, ds.Spec.Template.Spec.Containers} {
				for j := range cs {
					cs[j].Image = want
				}
			}
		}
		if diff := cmp.Diff(wantObj, o.obj); diff != "" {
			t.Errorf("%s differs from deploy/ beyond the images (-want +got):\n%s", o.id(), diff)
		}
	}
}

// migrationLabel marks the nodes deploy/migration runs the agent on.
const migrationLabel = "nodenet.io/dataplane"

func TestTheMigrationOverlayOnlyGatesTheDaemonSetsOnTheMigrationLabel(t *testing.T) {
	all := mustRender(t, ".")
	migration := mustRender(t, "migration")
	if len(migration) != len(all) {
		t.Fatalf("migration renders %d objects, deploy/ %d", len(migration), len(all))
	}
	for i, o := range migration {
		want := all[i].obj.DeepCopyObject()
		if ds, ok := want.(*appsv1.DaemonSet); ok {
			ds.Spec.Template.Spec.NodeSelector[migrationLabel] = "nodenet"
		}
		if diff := cmp.Diff(want, o.obj); diff != "" {
			t.Errorf("%s differs from deploy/ beyond the node selector (-want +got):\n%s", o.id(), diff)
		}
	}
}

func TestTheSharedConfigValidatesForLinuxAndWindowsNodes(t *testing.T) {
	objects := mustRender(t, ".")
	data := sharedConfig(t, objects)
	for _, target := range []config.OS{config.OSLinux, config.OSWindows} {
		t.Run(string(target), func(t *testing.T) {
			// What nodenetctl config validate --os checks: the file as a
			// config many nodes share.
			_, warnings, err := config.Load(data, config.LoadOptions{OS: target, Shared: true})
			if err != nil {
				t.Fatalf("shared config: %v", err)
			}
			if len(warnings) > 0 {
				t.Errorf("shared config warns: %v", warnings)
			}
			// And as each node's agent loads it.
			cfg := nodeConfig(t, objects, target)
			if cfg.NodeName != "node-1" {
				t.Errorf("nodeName %q, want it from %s", cfg.NodeName, config.NodeNameEnv)
			}
		})
	}
}

// daemonSetWant is what differs between the two DaemonSets.
type daemonSetWant struct {
	name      string
	os        config.OS
	dataplane string
}

func TestTheDaemonSetsAgreeWithTheConfigAndEachOther(t *testing.T) {
	objects := mustRender(t, ".")
	sa := find[*v1.ServiceAccount](t, objects, serviceAccount)
	apiserverCM := find[*v1.ConfigMap](t, objects, apiserverConfigMap)
	for _, want := range []daemonSetWant{
		{name: linuxDaemonSet, os: config.OSLinux, dataplane: "linux"},
		{name: windowsDaemonSet, os: config.OSWindows, dataplane: "hns"},
	} {
		t.Run(want.name, func(t *testing.T) {
			ds := find[*appsv1.DaemonSet](t, objects, want.name)
			cfg := nodeConfig(t, objects, want.os)
			spec := ds.Spec.Template.Spec

			if spec.ServiceAccountName != sa.Name || ds.Namespace != sa.Namespace {
				t.Errorf("runs as %s/%s, want the ServiceAccount %s/%s", ds.Namespace, spec.ServiceAccountName, sa.Namespace, sa.Name)
			}
			sel, err := metav1.LabelSelectorAsSelector(ds.Spec.Selector)
			if err != nil || !sel.Matches(labels.Set(ds.Spec.Template.Labels)) {
				t.Errorf("selector %v does not match the pod labels %v (%v)", ds.Spec.Selector, ds.Spec.Template.Labels, err)
			}
			if got := spec.NodeSelector[v1.LabelOSStable]; got != string(want.os) {
				t.Errorf("nodeSelector %s=%q, want %q", v1.LabelOSStable, got, want.os)
			}
			if !spec.HostNetwork {
				t.Error("not hostNetwork")
			}
			if spec.PriorityClassName != "system-node-critical" {
				t.Errorf("priorityClassName %q, want system-node-critical", spec.PriorityClassName)
			}
			if !slices.ContainsFunc(spec.Tolerations, func(tol v1.Toleration) bool {
				return tol.Key == "" && tol.Operator == v1.TolerationOpExists && tol.Effect == ""
			}) {
				t.Errorf("tolerations %v do not tolerate every taint", spec.Tolerations)
			}
			u := ds.Spec.UpdateStrategy
			if u.Type != appsv1.RollingUpdateDaemonSetStrategyType || u.RollingUpdate == nil ||
				u.RollingUpdate.MaxUnavailable == nil || *u.RollingUpdate.MaxUnavailable != intstr.FromInt32(1) {
				t.Errorf("update strategy %+v, want RollingUpdate with maxUnavailable 1", u)
			}

			agent := container(t, spec.Containers, "agent")
			install := container(t, spec.InitContainers, "install-cni")
			if len(spec.Containers) != 1 || len(spec.InitContainers) != 1 {
				t.Errorf("containers %d, init containers %d: want the agent and install-cni", len(spec.Containers), len(spec.InitContainers))
			}
			for _, c := range slices.Concat(spec.InitContainers, spec.Containers) {
				if sh := shell(c); sh != "" {
					t.Errorf("container %s runs %s: the image has no shell", c.Name, sh)
				}
			}
			for _, c := range []v1.Container{agent, install} {
				if c.Image != image {
					t.Errorf("container %s: image %q, want %q", c.Name, c.Image, image)
				}
				if c.Resources.Requests.Cpu().IsZero() || c.Resources.Requests.Memory().IsZero() {
					t.Errorf("container %s: requests %v, want cpu and memory", c.Name, c.Resources.Requests)
				}
			}
			if flag(agent, "dataplane") != want.dataplane {
				t.Errorf("--dataplane=%q, want %q", flag(agent, "dataplane"), want.dataplane)
			}
			if !slices.ContainsFunc(agent.Env, func(e v1.EnvVar) bool {
				return e.Name == config.NodeNameEnv && e.ValueFrom != nil && e.ValueFrom.FieldRef != nil &&
					e.ValueFrom.FieldRef.FieldPath == "spec.nodeName"
			}) {
				t.Errorf("env %v: want %s from spec.nodeName", agent.Env, config.NodeNameEnv)
			}
			// No hand edit: the API server address is discovered, and the
			// ConfigMap only overrides it when an operator fills it in.
			if !slices.ContainsFunc(agent.EnvFrom, func(e v1.EnvFromSource) bool {
				return e.ConfigMapRef != nil && e.ConfigMapRef.Name == apiserverCM.Name &&
					e.ConfigMapRef.Optional != nil && *e.ConfigMapRef.Optional
			}) {
				t.Errorf("envFrom %v: want ConfigMap %s, optional", agent.EnvFrom, apiserverCM.Name)
			}
			if len(apiserverCM.Data) != 0 || len(apiserverCM.BinaryData) != 0 {
				t.Errorf("ConfigMap %s ships %v: want it empty, so the agent discovers the API server", apiserverCM.Name, apiserverCM.Data)
			}
			if slices.ContainsFunc(agent.Env, func(e v1.EnvVar) bool {
				return e.Name == apiaddr.EnvAPIServer || strings.HasPrefix(e.Name, "KUBERNETES_SERVICE_")
			}) {
				t.Errorf("env %v sets the API server address: want it discovered", agent.Env)
			}

			checkProbes(t, agent, cfg)
			mountPath := checkConfigVolume(t, spec, agent)
			switch want.os {
			case config.OSLinux:
				checkLinux(t, spec, agent, install, cfg, mountPath)
			case config.OSWindows:
				checkWindows(t, spec, agent, install, cfg, mountPath)
			}
		})
	}
}

func container(t *testing.T, cs []v1.Container, name string) v1.Container {
	t.Helper()
	i := slices.IndexFunc(cs, func(c v1.Container) bool { return c.Name == name })
	if i < 0 {
		t.Fatalf("no container %q", name)
	}
	return cs[i]
}

// flag returns the value of --name=value in c's args, or "".
func flag(c v1.Container, name string) string {
	for _, a := range slices.Concat(c.Command, c.Args) {
		if v, ok := strings.CutPrefix(a, "--"+name+"="); ok {
			return v
		}
	}
	return ""
}

// checkProbes: liveness on /livez and readiness on /readyz, at the port
// of proxy.healthzBindAddress, which the pod also declares.
func checkProbes(t *testing.T, agent v1.Container, cfg *config.AgentConfiguration) {
	t.Helper()
	_, portStr, err := net.SplitHostPort(cfg.Proxy.HealthzBindAddress)
	if err != nil {
		t.Fatalf("healthzBindAddress %q: %v", cfg.Proxy.HealthzBindAddress, err)
	}
	port, _ := strconv.Atoi(portStr)
	if port == 0 {
		t.Fatal("the config turns the health server off; the probes need it")
	}
	if !slices.ContainsFunc(agent.Ports, func(p v1.ContainerPort) bool {
		return p.ContainerPort == int32(port) && p.Protocol == v1.ProtocolTCP
	}) {
		t.Errorf("ports %v: want %d/TCP, the health port", agent.Ports, port)
	}
	for _, p := range []struct {
		kind  string
		probe *v1.Probe
		path  string
	}{{"liveness", agent.LivenessProbe, "/livez"}, {"readiness", agent.ReadinessProbe, "/readyz"}} {
		if p.probe == nil || p.probe.HTTPGet == nil {
			t.Errorf("no %s httpGet probe", p.kind)
			continue
		}
		g := p.probe.HTTPGet
		if g.Path != p.path || g.Port.IntValue() != port || g.Host != "" {
			t.Errorf("%s probe %s on port %s host %q, want %s on %d", p.kind, g.Path, g.Port.String(), g.Host, p.path, port)
		}
	}
}

// checkConfigVolume: the agent's --config is the ConfigMap's config.yaml
// where the pod mounts it; returns the mount path.
func checkConfigVolume(t *testing.T, spec v1.PodSpec, agent v1.Container) string {
	t.Helper()
	i := slices.IndexFunc(spec.Volumes, func(v v1.Volume) bool {
		return v.ConfigMap != nil && v.ConfigMap.Name == configMapName
	})
	if i < 0 {
		t.Fatalf("no volume from ConfigMap %s", configMapName)
	}
	vol := spec.Volumes[i]
	j := slices.IndexFunc(agent.VolumeMounts, func(m v1.VolumeMount) bool { return m.Name == vol.Name })
	if j < 0 {
		t.Fatalf("the agent does not mount volume %s", vol.Name)
	}
	if len(vol.ConfigMap.Items) > 0 {
		t.Errorf("volume %s selects items %v; the agent reads %s by its key", vol.Name, vol.ConfigMap.Items, configKey)
	}
	return agent.VolumeMounts[j].MountPath
}

func checkLinux(t *testing.T, spec v1.PodSpec, agent, install v1.Container, cfg *config.AgentConfiguration, configMount string) {
	t.Helper()
	if got, want := flag(agent, "config"), path.Join(configMount, configKey); got != want {
		t.Errorf("--config=%q, want %q", got, want)
	}
	if len(agent.Command) == 0 || agent.Command[0] != linuxAgent {
		t.Errorf("command %v, want %s", agent.Command, linuxAgent)
	}
	for _, c := range []v1.Container{agent, install} {
		if c.SecurityContext == nil || c.SecurityContext.Privileged == nil || !*c.SecurityContext.Privileged {
			t.Errorf("container %s is not privileged", c.Name)
		}
	}
	// The host directories the config names are mounted at the same paths,
	// so the agent, nodenet-cni and the runtime agree on them.
	for _, d := range []struct {
		what string
		c    v1.Container
		dir  string
	}{
		{"cni.socketPath's directory", agent, path.Dir(cfg.CNI.SocketPath)},
		{"cni.confDir", agent, cfg.CNI.ConfDir},
		{"cni.dataDir", agent, cfg.CNI.DataDir},
		{"cni.binDir", install, cfg.CNI.BinDir},
		{"pod network namespaces", agent, "/var/run/netns"},
	} {
		m, ok := hostMount(spec, d.c, d.dir)
		switch {
		case !ok:
			t.Errorf("%s %s: no hostPath %s mounted at %s in %s", d.what, d.dir, d.dir, d.dir, d.c.Name)
		case m.ReadOnly:
			t.Errorf("%s %s is mounted read-only in %s", d.what, d.dir, d.c.Name)
		}
	}
	if m, ok := hostMount(spec, agent, "/var/run/netns"); ok &&
		(m.MountPropagation == nil || *m.MountPropagation != v1.MountPropagationHostToContainer) {
		t.Error("/var/run/netns does not propagate new pod namespaces (HostToContainer)")
	}
	if m, ok := hostMount(spec, agent, "/lib/modules"); !ok || !m.ReadOnly {
		t.Error("want /lib/modules mounted read-only")
	}
	checkKubeletKubeconfigMount(t, spec, agent)
	// The image has no shell: install-cni is the agent's own subcommand,
	// copying nodenet-cni into cni.binDir (mounted above).
	if argv := slices.Concat(install.Command, install.Args); len(argv) < 2 || argv[0] != linuxAgent || argv[1] != "install-cni" {
		t.Errorf("install-cni runs %q, want %s install-cni", argv, linuxAgent)
	}
	if got := flag(install, "dir"); got != cfg.CNI.BinDir {
		t.Errorf("install-cni --dir=%q, want cni.binDir %q", got, cfg.CNI.BinDir)
	}
}

// linuxAgent is nodenet-agent in the Linux image.
const linuxAgent = "/usr/local/bin/nodenet-agent"

// shell returns the shell c runs ("" for none): the image has none, so
// a container that needs one would never start. (A HostProcess container
// on Windows runs the host's PowerShell, which is not one of these.)
func shell(c v1.Container) string {
	argv := slices.Concat(c.Command, c.Args)
	for i, a := range argv {
		base := strings.TrimSuffix(path.Base(strings.ReplaceAll(a, `\`, "/")), ".exe")
		if !slices.Contains([]string{"sh", "bash", "dash", "ash", "zsh", "busybox"}, base) {
			continue
		}
		if i == 0 || (i+1 < len(argv) && argv[i+1] == "-c") {
			return a
		}
	}
	return ""
}

// checkKubeletKubeconfigMount: every kubelet kubeconfig discovery tries
// on Linux is under a read-only mount of its host directory.
func checkKubeletKubeconfigMount(t *testing.T, spec v1.PodSpec, agent v1.Container) {
	t.Helper()
	for _, f := range apiaddr.LinuxKubeletKubeconfigs() {
		hostFile, ok := strings.CutPrefix(f, apiaddr.HostRoot)
		if !ok {
			t.Errorf("kubelet kubeconfig %s is not under %s", f, apiaddr.HostRoot)
			continue
		}
		found := false
		for _, m := range agent.VolumeMounts {
			for _, v := range spec.Volumes {
				if v.Name != m.Name || v.HostPath == nil || m.MountPath != apiaddr.HostRoot+v.HostPath.Path ||
					!strings.HasPrefix(hostFile, v.HostPath.Path+"/") {
					continue
				}
				found = true
				if !m.ReadOnly {
					t.Errorf("%s is mounted writable", v.HostPath.Path)
				}
				if v.HostPath.Type == nil || *v.HostPath.Type != v1.HostPathDirectoryOrCreate {
					t.Errorf("hostPath %s: type %v, want DirectoryOrCreate (a missing file would be created)", v.HostPath.Path, v.HostPath.Type)
				}
			}
		}
		if !found {
			t.Errorf("kubelet kubeconfig %s: no hostPath of its directory mounted at %s", hostFile, path.Dir(f))
		}
	}
}

func hostMount(spec v1.PodSpec, c v1.Container, dir string) (v1.VolumeMount, bool) {
	for _, m := range c.VolumeMounts {
		if m.MountPath != dir {
			continue
		}
		for _, v := range spec.Volumes {
			if v.Name == m.Name && v.HostPath != nil && v.HostPath.Path == dir {
				return m, true
			}
		}
	}
	return v1.VolumeMount{}, false
}

func checkWindows(t *testing.T, spec v1.PodSpec, agent, install v1.Container, cfg *config.AgentConfiguration, configMount string) {
	t.Helper()
	w := spec.SecurityContext.WindowsOptions
	if w == nil || w.HostProcess == nil || !*w.HostProcess {
		t.Error("not a HostProcess pod")
	}
	if w == nil || w.RunAsUserName == nil || *w.RunAsUserName != `NT AUTHORITY\SYSTEM` {
		t.Errorf("runAsUserName %v, want NT AUTHORITY\\SYSTEM", w)
	}
	// containerd puts volumes under the image mount, at their mount path.
	want := sandboxMount + strings.ReplaceAll(path.Join(configMount, configKey), "/", `\`)
	if got := flag(agent, "config"); got != want {
		t.Errorf("--config=%q, want %q", got, want)
	}
	if len(agent.Command) == 0 || agent.Command[0] != sandboxMount+`\nodenet-agent.exe` {
		t.Errorf("command %v, want the image's nodenet-agent.exe", agent.Command)
	}
	for _, v := range spec.Volumes {
		if v.HostPath != nil {
			t.Errorf("volume %s: a HostProcess container sees the host's files; no hostPath", v.Name)
		}
	}
	script := strings.Join(install.Command, " ")
	for _, s := range []string{"'" + cfg.CNI.BinDir + "'", "'nodenet-cni.exe'", sandboxMount} {
		if !strings.Contains(script, s) {
			t.Errorf("install-cni %q does not mention %s", script, s)
		}
	}
}

// agentRules is what nodenet-agent does with the API: group/resource verb.
// rbac.yaml says which part of the agent needs each.
var agentRules = []string{
	"/events create", "/events patch",
	"/nodes get", "/nodes list", "/nodes patch", "/nodes watch",
	"/nodes/status patch",
	"/services list", "/services watch",
	"discovery.k8s.io/endpointslices list", "discovery.k8s.io/endpointslices watch",
}

func TestTheClusterRoleGrantsExactlyWhatTheAgentUses(t *testing.T) {
	objects := mustRender(t, ".")
	role := find[*rbacv1.ClusterRole](t, objects, "nodenet-agent")
	var got []string
	for _, r := range role.Rules {
		if len(r.ResourceNames) > 0 || len(r.NonResourceURLs) > 0 {
			t.Errorf("rule %v: resourceNames and nonResourceURLs are not needed", r)
		}
		for _, g := range r.APIGroups {
			for _, res := range r.Resources {
				for _, v := range r.Verbs {
					got = append(got, g+"/"+res+" "+v)
				}
			}
		}
	}
	slices.Sort(got)
	if diff := cmp.Diff(agentRules, got); diff != "" {
		t.Errorf("ClusterRole grants (-what the agent uses +granted):\n%s", diff)
	}
	if role.AggregationRule != nil {
		t.Error("an aggregated role can grow beyond these rules")
	}

	b := find[*rbacv1.ClusterRoleBinding](t, objects, "nodenet-agent")
	wantRef := rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name}
	wantSubjects := []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: serviceAccount, Namespace: namespace}}
	if diff := cmp.Diff(wantRef, b.RoleRef); diff != "" {
		t.Errorf("binding roleRef (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(wantSubjects, b.Subjects); diff != "" {
		t.Errorf("binding subjects (-want +got):\n%s", diff)
	}
}

func TestTheNodePolicyAppliesToTheAgentsServiceAccountOnly(t *testing.T) {
	objects := mustRender(t, ".")
	p := find[*admissionv1.ValidatingAdmissionPolicy](t, objects, "nodenet-agent-node-writes")
	b := find[*admissionv1.ValidatingAdmissionPolicyBinding](t, objects, "nodenet-agent-node-writes")
	if b.Spec.PolicyName != p.Name || !slices.Equal(b.Spec.ValidationActions, []admissionv1.ValidationAction{admissionv1.Deny}) {
		t.Errorf("binding %+v: want policy %s with Deny", b.Spec, p.Name)
	}
	user := fmt.Sprintf("'system:serviceaccount:%s:%s'", namespace, serviceAccount)
	if len(p.Spec.MatchConditions) != 1 || !strings.Contains(p.Spec.MatchConditions[0].Expression, user) {
		t.Errorf("match conditions %v: want the agent's user %s", p.Spec.MatchConditions, user)
	}
	if p.Spec.FailurePolicy == nil || *p.Spec.FailurePolicy != admissionv1.Fail {
		t.Error("the policy must fail closed")
	}
}

// TestTheDiscoveryRoleReadsOnlyKubeProxysConfigMap: API server discovery
// (agent/apiaddr) gets kube-system/kube-proxy and nothing else there.
func TestTheDiscoveryRoleReadsOnlyKubeProxysConfigMap(t *testing.T) {
	objects := mustRender(t, ".")
	role := find[*rbacv1.Role](t, objects, discoveryRole)
	want := []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"configmaps"}, ResourceNames: []string{"kube-proxy"}, Verbs: []string{"get"}}}
	if diff := cmp.Diff(want, role.Rules); diff != "" {
		t.Errorf("Role %s rules (-want +got):\n%s", discoveryRole, diff)
	}
	if role.Namespace != metav1.NamespaceSystem {
		t.Errorf("Role %s in %q, want kube-system", discoveryRole, role.Namespace)
	}
	b := find[*rbacv1.RoleBinding](t, objects, discoveryRole)
	wantRef := rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: role.Name}
	wantSubjects := []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: serviceAccount, Namespace: namespace}}
	if diff := cmp.Diff(wantRef, b.RoleRef); diff != "" {
		t.Errorf("binding roleRef (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(wantSubjects, b.Subjects); diff != "" {
		t.Errorf("binding subjects (-want +got):\n%s", diff)
	}
	if b.Namespace != role.Namespace {
		t.Errorf("RoleBinding in %q, Role in %q", b.Namespace, role.Namespace)
	}
}
