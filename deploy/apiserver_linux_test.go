package deploy_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"

	"github.com/nodenet/nodenet/agent/apiaddr"
	"github.com/nodenet/nodenet/test/apiserver"
)

// The user and groups of the agent's service account token.
var (
	agentUser   = fmt.Sprintf("system:serviceaccount:%s:%s", namespace, serviceAccount)
	agentGroups = []string{"system:serviceaccounts", "system:serviceaccounts:" + namespace, "system:authenticated"}
)

// nodeNameExtra is where a pod-bound token carries its node.
const nodeNameExtra = "authentication.kubernetes.io/node-name"

// The node policy's denials (base/node-policy.yaml).
const (
	deniedOtherNode = "nodenet-agent may only write its own Node"
	deniedMetadata  = "nodenet-agent may only change flannel.alpha.coreos.com/ annotations on its Node"
	deniedStatus    = "nodenet-agent may only change the NetworkUnavailable and NodenetPodCIDRUnavailable conditions in its Node's status"
)

// TestARealAPIServerAcceptsTheManifestsAndEnforcesLeastPrivilege applies
// every object kustomize renders for deploy/ (both DaemonSets, and the
// migration overlay's) to a real kube-apiserver (with RBAC authorization,
// as in a cluster), first as a server-side apply dry run, then for real,
// and checks what the agent's service account may do.
func TestARealAPIServerAcceptsTheManifestsAndEnforcesLeastPrivilege(t *testing.T) {
	apiserver.RequireBinaries(t, apiserver.Options{})
	srv := apiserver.StartForTest(t, apiserver.Options{KubeAPIServer: withRBAC(t)})
	ctx := t.Context()
	client := srv.Client()
	apply := newApplier(t, srv)

	rendered := mustRender(t, ".")
	// deploy/ and the migration overlay's DaemonSets, each object once.
	objects := slices.Clone(rendered)
	for _, o := range mustRender(t, "migration") {
		if o.gvk.Kind == "DaemonSet" {
			objects = append(objects, o)
		}
	}
	for _, kind := range []string{"Namespace", "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding",
		"ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding", "ConfigMap", "DaemonSet"} {
		if !slices.ContainsFunc(objects, func(o object) bool { return o.gvk.Kind == kind }) {
			t.Fatalf("deploy/ renders no %s", kind)
		}
	}
	// A dry run of a namespaced object needs its namespace for real.
	if err := apply(ctx, objectOf(t, rendered, "Namespace", namespace), false); err != nil {
		t.Fatalf("apply namespace %s: %v", namespace, err)
	}

	t.Run("every object passes a server-side apply dry run with strict field validation", func(t *testing.T) {
		for _, o := range objects {
			if err := apply(ctx, o, true); err != nil {
				t.Errorf("%s (from %s): %v", o.id(), o.source, err)
			}
		}
	})
	// The dry run above proves something only if the server is strict.
	t.Run("the dry run refuses a DaemonSet with an unknown field", func(t *testing.T) {
		o := objectOf(t, rendered, "DaemonSet", linuxDaemonSet)
		var u map[string]any
		if err := json.Unmarshal(o.json, &u); err != nil {
			t.Fatal(err)
		}
		if err := unstructured.SetNestedField(u, true, "spec", "template", "spec", "hostNetwrk"); err != nil {
			t.Fatal(err)
		}
		j, err := json.Marshal(u)
		if err != nil {
			t.Fatal(err)
		}
		o.json = j
		if err := apply(ctx, o, true); err == nil || !strings.Contains(err.Error(), "hostNetwrk") {
			t.Errorf("apply with spec.template.spec.hostNetwrk: %v, want it refused", err)
		}
	})
	if t.Failed() {
		return
	}
	for _, o := range rendered {
		if err := apply(ctx, o, false); err != nil {
			t.Fatalf("apply %s: %v", o.id(), err)
		}
	}

	t.Run("the ConfigMaps and DaemonSets read back from the API server as rendered", func(t *testing.T) {
		checkStored(t, client, rendered)
	})

	// docs/migration.md applies deploy/migration over deploy/, and deploy/
	// again once every node is moved: updates, where a changed immutable
	// field (a DaemonSet's selector) would be refused, and the second must
	// drop the migration label from the node selectors.
	t.Run("the migration overlay applies over deploy/ and deploy/ again drops its node selector", func(t *testing.T) {
		for _, step := range []struct {
			objects []object
			label   bool
		}{{mustRender(t, "migration"), true}, {rendered, false}} {
			for _, o := range step.objects {
				if err := apply(ctx, o, false); err != nil {
					t.Fatalf("apply %s (from %s): %v", o.id(), o.source, err)
				}
			}
			for _, name := range []string{linuxDaemonSet, windowsDaemonSet} {
				ds, err := client.AppsV1().DaemonSets(namespace).Get(ctx, name, metav1.GetOptions{})
				if err != nil {
					t.Fatal(err)
				}
				if _, ok := ds.Spec.Template.Spec.NodeSelector[migrationLabel]; ok != step.label {
					t.Errorf("after applying %s/: DaemonSet %s node selector %v, want %s in it: %v",
						step.objects[0].source, name, ds.Spec.Template.Spec.NodeSelector, migrationLabel, step.label)
				}
			}
		}
	})

	t.Run("the agent's service account may do what the agent does and nothing more", func(t *testing.T) {
		for _, c := range []struct {
			attrs authorizationv1.ResourceAttributes
			allow bool
		}{
			{attrs(v1.GroupName, "services", "", "list"), true},
			{attrs(v1.GroupName, "services", "", "watch"), true},
			{attrs("discovery.k8s.io", "endpointslices", "", "list"), true},
			{attrs("discovery.k8s.io", "endpointslices", "", "watch"), true},
			{attrs(v1.GroupName, "nodes", "", "get"), true},
			{attrs(v1.GroupName, "nodes", "", "list"), true},
			{attrs(v1.GroupName, "nodes", "", "watch"), true},
			{attrs(v1.GroupName, "nodes", "", "patch"), true},
			{attrs(v1.GroupName, "nodes", "status", "patch"), true},
			{nsAttrs(v1.GroupName, "events", "default", "create"), true},
			{nsAttrs(v1.GroupName, "events", "default", "patch"), true},
			{nsAttrs(v1.GroupName, "events", "app", "create"), true},

			{attrs(v1.GroupName, "nodes", "", "update"), false},
			{attrs(v1.GroupName, "nodes", "", "delete"), false},
			{attrs(v1.GroupName, "nodes", "", "create"), false},
			{attrs(v1.GroupName, "nodes", "status", "update"), false},
			{attrs(v1.GroupName, "services", "", "get"), false},
			{nsAttrs(v1.GroupName, "services", "app", "update"), false},
			{nsAttrs(v1.GroupName, "services", "app", "patch"), false},
			{attrs(v1.GroupName, "services", "status", "patch"), false},
			{nsAttrs("discovery.k8s.io", "endpointslices", "app", "create"), false},
			{attrs(v1.GroupName, "endpoints", "", "list"), false},
			{attrs(v1.GroupName, "pods", "", "list"), false},
			{nsAttrs(v1.GroupName, "secrets", namespace, "get"), false},
			{attrs(v1.GroupName, "secrets", "", "list"), false},
			{nsAttrs(v1.GroupName, "configmaps", namespace, "get"), false},
			// API server discovery: kube-proxy's ConfigMap, nothing more.
			{named(nsAttrs(v1.GroupName, "configmaps", metav1.NamespaceSystem, "get"), "kube-proxy"), true},
			{named(nsAttrs(v1.GroupName, "configmaps", metav1.NamespaceSystem, "get"), "kubeadm-config"), false},
			{nsAttrs(v1.GroupName, "configmaps", metav1.NamespaceSystem, "list"), false},
			{named(nsAttrs(v1.GroupName, "configmaps", metav1.NamespaceSystem, "update"), "kube-proxy"), false},
			{named(nsAttrs(v1.GroupName, "configmaps", "default", "get"), "kube-proxy"), false},
			{nsAttrs(v1.GroupName, "events", "default", "delete"), false},
			{nsAttrs(v1.GroupName, "events", "default", "list"), false},
			{nsAttrs("events.k8s.io", "events", "app", "create"), false},
			{attrs("rbac.authorization.k8s.io", "clusterroles", "", "escalate"), false},
			// Pod CIDR allocator: its one Lease, in this namespace only.
			{nsAttrs("coordination.k8s.io", "leases", namespace, "create"), true},
			{named(nsAttrs("coordination.k8s.io", "leases", namespace, "get"), podCIDRLease), true},
			{named(nsAttrs("coordination.k8s.io", "leases", namespace, "update"), podCIDRLease), true},
			{named(nsAttrs("coordination.k8s.io", "leases", namespace, "get"), "kube-scheduler"), false},
			{named(nsAttrs("coordination.k8s.io", "leases", namespace, "delete"), podCIDRLease), false},
			{named(nsAttrs("coordination.k8s.io", "leases", namespace, "patch"), podCIDRLease), false},
			{nsAttrs("coordination.k8s.io", "leases", namespace, "list"), false},
			{nsAttrs("coordination.k8s.io", "leases", metav1.NamespaceSystem, "create"), false},
			{named(nsAttrs("coordination.k8s.io", "leases", metav1.NamespaceSystem, "update"), podCIDRLease), false},
		} {
			a := c.attrs
			name := fmt.Sprintf("%s %s/%s/%s %q in %q", a.Verb, a.Group, a.Resource, a.Subresource, a.Name, a.Namespace)
			review, err := client.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{
				Spec: authorizationv1.SubjectAccessReviewSpec{User: agentUser, Groups: agentGroups, ResourceAttributes: &a},
			}, metav1.CreateOptions{})
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			if review.Status.Allowed != c.allow {
				t.Errorf("%s: allowed %v, want %v (%s)", name, review.Status.Allowed, c.allow, review.Status.Reason)
			}
		}
	})

	t.Run("the agent's service account discovers the API server from kube-proxy's ConfigMap and the kubernetes EndpointSlice", func(t *testing.T) {
		checkDiscoveryAsTheAgent(t, client, agentClient(t, srv.RESTConfig(), "node-a"))
	})

	t.Run("the node policy lets an agent write only its own Node's flannel annotations and NetworkUnavailable", func(t *testing.T) {
		for _, name := range []string{"node-a", "node-b"} {
			node := &v1.Node{
				ObjectMeta: metav1.ObjectMeta{
					Name:        name,
					Labels:      map[string]string{v1.LabelOSStable: "linux"},
					Annotations: map[string]string{"node.alpha.kubernetes.io/ttl": "0"},
				},
				Spec: v1.NodeSpec{PodCIDR: "10.244.1.0/24", PodCIDRs: []string{"10.244.1.0/24"}},
			}
			if _, err := client.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			node.Status.Conditions = []v1.NodeCondition{{Type: v1.NodeReady, Status: v1.ConditionTrue, Reason: "KubeletReady"}}
			if _, err := client.CoreV1().Nodes().UpdateStatus(ctx, node, metav1.UpdateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		// Nodes still waiting for pod CIDRs, for the allocator's writes.
		for _, name := range []string{"node-c", "node-d"} {
			node := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: map[string]string{"node.alpha.kubernetes.io/ttl": "0"}}}
			if _, err := client.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		onNodeA := agentClient(t, srv.RESTConfig(), "node-a")
		unbound := agentClient(t, srv.RESTConfig(), "")
		// The apiserver loads a new policy asynchronously: wait until it
		// denies a dry-run write to another Node.
		err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
			_, err := onNodeA.CoreV1().Nodes().Patch(ctx, "node-b", types.MergePatchType,
				[]byte(`{"metadata":{"annotations":{"flannel.alpha.coreos.com/public-ip":"192.168.1.11"}}}`),
				metav1.PatchOptions{DryRun: []string{metav1.DryRunAll}})
			return apierrors.IsForbidden(err), nil
		})
		if err != nil {
			t.Fatalf("the node policy never took effect: %v", err)
		}
		// The patches the overlay controller sends (overlay/status.go).
		flannel := `{"metadata":{"annotations":{"flannel.alpha.coreos.com/public-ip":"192.168.1.10","flannel.alpha.coreos.com/kube-subnet-manager":"true"}}}`
		networkReady := `{"status":{"conditions":[{"type":"NetworkUnavailable","status":"False","reason":"NodenetReady","message":"ok","lastHeartbeatTime":"2026-01-01T00:00:00Z","lastTransitionTime":"2026-01-01T00:00:00Z"}]}}`
		podCIDRUnavailable := `{"status":{"conditions":[{"type":"NodenetPodCIDRUnavailable","status":"True","reason":"CIDRNotAvailable","message":"full","lastHeartbeatTime":"2026-01-01T00:00:00Z","lastTransitionTime":"2026-01-01T00:00:00Z"}]}}`
		for _, c := range []struct {
			name      string
			client    kubernetes.Interface
			node      string
			patchType types.PatchType
			patch     string
			status    bool
			denial    string // the policy message that denies it; "" when allowed
		}{
			{"flannel annotations on its own Node", onNodeA, "node-a", types.MergePatchType, flannel, false, ""},
			{"NetworkUnavailable on its own Node", onNodeA, "node-a", types.StrategicMergePatchType, networkReady, true, ""},
			{"flannel annotations on another Node", onNodeA, "node-b", types.MergePatchType, flannel, false, deniedOtherNode},
			{"NetworkUnavailable on another Node", onNodeA, "node-b", types.StrategicMergePatchType, networkReady, true, deniedOtherNode},
			{"flannel annotations from a token bound to no node", unbound, "node-a", types.MergePatchType, flannel, false, deniedOtherNode},
			{"another annotation on its own Node", onNodeA, "node-a", types.MergePatchType, `{"metadata":{"annotations":{"example.com/x":"y"}}}`, false, deniedMetadata},
			{"removing another annotation", onNodeA, "node-a", types.MergePatchType, `{"metadata":{"annotations":{"node.alpha.kubernetes.io/ttl":null}}}`, false, deniedMetadata},
			{"a label on its own Node", onNodeA, "node-a", types.MergePatchType, `{"metadata":{"labels":{"example.com/x":"y"}}}`, false, deniedMetadata},
			{"cordoning its own Node", onNodeA, "node-a", types.MergePatchType, `{"spec":{"unschedulable":true}}`, false, deniedMetadata},
			{"the Ready condition of its own Node", onNodeA, "node-a", types.StrategicMergePatchType, `{"status":{"conditions":[{"type":"Ready","status":"False","reason":"X"}]}}`, true, deniedStatus},
			{"the addresses of its own Node", onNodeA, "node-a", types.StrategicMergePatchType, `{"status":{"addresses":[{"type":"InternalIP","address":"10.0.0.9"}]}}`, true, deniedStatus},
			// The pod CIDR allocator's leader (ipam/nodecidr) on other Nodes.
			{"pod CIDRs on another Node that has none", onNodeA, "node-c", types.MergePatchType, `{"spec":{"podCIDR":"10.244.2.0/24","podCIDRs":["10.244.2.0/24"]}}`, false, ""},
			{"NodenetPodCIDRUnavailable on another Node", onNodeA, "node-d", types.StrategicMergePatchType, podCIDRUnavailable, true, ""},
			{"pod CIDRs and a cordon on another Node", onNodeA, "node-d", types.MergePatchType, `{"spec":{"podCIDR":"10.244.3.0/24","podCIDRs":["10.244.3.0/24"],"unschedulable":true}}`, false, deniedOtherNode},
			{"pod CIDRs and a label on another Node", onNodeA, "node-d", types.MergePatchType, `{"metadata":{"labels":{"example.com/x":"y"}},"spec":{"podCIDR":"10.244.3.0/24","podCIDRs":["10.244.3.0/24"]}}`, false, deniedOtherNode},
			{"pod CIDRs from a token bound to no node", unbound, "node-d", types.MergePatchType, `{"spec":{"podCIDR":"10.244.3.0/24","podCIDRs":["10.244.3.0/24"]}}`, false, deniedOtherNode},
			{"the Ready condition of another Node", onNodeA, "node-d", types.StrategicMergePatchType, `{"status":{"conditions":[{"type":"Ready","status":"False","reason":"X"}]}}`, true, deniedOtherNode},
		} {
			var sub []string
			if c.status {
				sub = []string{"status"}
			}
			_, err := c.client.CoreV1().Nodes().Patch(ctx, c.node, c.patchType, []byte(c.patch), metav1.PatchOptions{}, sub...)
			switch {
			case c.denial == "" && err != nil:
				t.Errorf("%s: %v", c.name, err)
			case c.denial != "" && err == nil:
				t.Errorf("%s: allowed, want it denied", c.name)
			// An expression that fails to evaluate denies too (fail
			// closed), but for the wrong reason: want the rule's message.
			case c.denial != "" && (!apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "denied request: "+c.denial)):
				t.Errorf("%s: %v, want it denied with %q", c.name, err, c.denial)
			}
		}
		a, err := client.CoreV1().Nodes().Get(ctx, "node-a", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if a.Annotations["flannel.alpha.coreos.com/public-ip"] != "192.168.1.10" || a.Annotations["node.alpha.kubernetes.io/ttl"] != "0" {
			t.Errorf("node-a annotations %v: want the flannel ones added and the rest kept", a.Annotations)
		}
		var conds []string
		for _, c := range a.Status.Conditions {
			conds = append(conds, string(c.Type)+"="+string(c.Status))
		}
		slices.Sort(conds)
		if strings.Join(conds, ",") != "NetworkUnavailable=False,Ready=True" {
			t.Errorf("node-a conditions %v, want NetworkUnavailable=False and Ready=True", conds)
		}
		c, err := client.CoreV1().Nodes().Get(ctx, "node-c", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(c.Spec.PodCIDRs, []string{"10.244.2.0/24"}) {
			t.Errorf("node-c pod CIDRs %v, want the allocator's 10.244.2.0/24", c.Spec.PodCIDRs)
		}
	})
}

// withRBAC returns a kube-apiserver that authorizes with RBAC: a wrapper
// of the real binary that swaps test/apiserver's AlwaysAllow (a repeated
// --authorization-mode would be appended to it, not replace it).
func withRBAC(t *testing.T) string {
	t.Helper()
	real := os.Getenv(apiserver.EnvKubeAPIServer)
	if real == "" {
		root, err := apiserver.CacheRoot()
		if err != nil {
			t.Fatal(err)
		}
		real = filepath.Join(root, "kube-"+apiserver.KubeVersion, "kube-apiserver")
	}
	script := `#!/bin/sh
n=$#
while [ "$n" -gt 0 ]; do
	a=$1; shift; n=$((n - 1))
	[ "$a" = --authorization-mode=AlwaysAllow ] && a=--authorization-mode=RBAC
	set -- "$@" "$a"
done
exec '` + real + `' "$@"
`
	wrapper := filepath.Join(t.TempDir(), "kube-apiserver")
	if err := os.WriteFile(wrapper, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return wrapper
}

// checkStored compares what the API server stored with what was applied:
// the ConfigMaps' data (nodenet-apiserver empty, so the agent discovers
// the API server) and each agent container's env names, envFrom, mounts
// and the pod's hostPath volumes (defaulting must not drop optional or a
// type).
func checkStored(t *testing.T, client kubernetes.Interface, rendered []object) {
	ctx := t.Context()
	for _, o := range rendered {
		switch want := o.obj.(type) {
		case *v1.ConfigMap:
			got, err := client.CoreV1().ConfigMaps(want.Namespace).Get(ctx, want.Name, metav1.GetOptions{})
			if err != nil {
				t.Errorf("ConfigMap %s: %v", want.Name, err)
				continue
			}
			if len(got.Data)+len(want.Data) > 0 && !equalMaps(got.Data, want.Data) {
				t.Errorf("ConfigMap %s stored %v, applied %v", want.Name, got.Data, want.Data)
			}
			if want.Name == apiserverConfigMap && len(got.Data) != 0 {
				t.Errorf("ConfigMap %s holds %v: want it empty so the agent discovers the API server", want.Name, got.Data)
			}
		case *appsv1.DaemonSet:
			got, err := client.AppsV1().DaemonSets(want.Namespace).Get(ctx, want.Name, metav1.GetOptions{})
			if err != nil {
				t.Errorf("DaemonSet %s: %v", want.Name, err)
				continue
			}
			gs, ws := got.Spec.Template.Spec, want.Spec.Template.Spec
			ga, wa := gs.Containers[0], ws.Containers[0]
			for _, c := range []struct {
				what      string
				got, want any
			}{
				// Names only: the server defaults fieldRef's apiVersion.
				{"agent env", envNames(ga.Env), envNames(wa.Env)},
				{"agent envFrom", ga.EnvFrom, wa.EnvFrom},
				{"agent volumeMounts", ga.VolumeMounts, wa.VolumeMounts},
				{"hostPath volumes", hostPaths(gs.Volumes), hostPaths(ws.Volumes)},
			} {
				if diff := cmp.Diff(c.want, c.got); diff != "" {
					t.Errorf("DaemonSet %s %s (-applied +stored):\n%s", want.Name, c.what, diff)
				}
			}
		}
	}
}

func envNames(env []v1.EnvVar) []string {
	var out []string
	for _, e := range env {
		out = append(out, e.Name)
	}
	return out
}

func equalMaps(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// hostPaths lists a pod's hostPath volumes as name=path:type.
func hostPaths(vs []v1.Volume) []string {
	var out []string
	for _, v := range vs {
		if v.HostPath != nil {
			typ := ""
			if v.HostPath.Type != nil {
				typ = string(*v.HostPath.Type)
			}
			out = append(out, v.Name+"="+v.HostPath.Path+":"+typ)
		}
	}
	return out
}

// checkDiscoveryAsTheAgent runs API server discovery with the agent's
// rights on a node with no kubelet kubeconfig: kubeadm's kube-proxy
// ConfigMap answers, and without it the kubernetes EndpointSlice.
func checkDiscoveryAsTheAgent(t *testing.T, admin, asAgent kubernetes.Interface) {
	ctx := t.Context()
	kubeProxy := &v1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "kube-proxy", Namespace: metav1.NamespaceSystem},
		Data: map[string]string{"kubeconfig.conf": `apiVersion: v1
kind: Config
clusters:
- cluster: {server: "https://cp.example:6443"}
  name: default
contexts:
- context: {cluster: default, user: default}
  name: default
current-context: default
`},
	}
	if _, err := admin.CoreV1().ConfigMaps(metav1.NamespaceSystem).Create(ctx, kubeProxy, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	ready := true
	if _, err := admin.DiscoveryV1().EndpointSlices(metav1.NamespaceDefault).Create(ctx, &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Name: "kubernetes", Labels: map[string]string{discoveryv1.LabelServiceName: "kubernetes"}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{"192.0.2.20"}, Conditions: discoveryv1.EndpointConditions{Ready: &ready}}},
		Ports:       []discoveryv1.EndpointPort{{Name: new("https"), Port: new(int32(6443))}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	discover := func() (apiaddr.Result, error) {
		return apiaddr.Discover(ctx, apiaddr.Options{
			Getenv:             func(string) string { return "" },
			KubeletKubeconfigs: []string{filepath.Join(t.TempDir(), "kubelet.conf")},
			ViaService:         apiaddr.NewReader(asAgent),
		})
	}
	if got, err := discover(); err != nil || got.Host != "https://cp.example:6443" {
		t.Errorf("with kube-proxy's ConfigMap: %+v, %v; want https://cp.example:6443", got, err)
	}
	if err := admin.CoreV1().ConfigMaps(metav1.NamespaceSystem).Delete(ctx, "kube-proxy", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if got, err := discover(); err != nil || got.Host != "https://192.0.2.20:6443" {
		t.Errorf("with the EndpointSlice only: %+v, %v; want https://192.0.2.20:6443", got, err)
	}
}

func named(a authorizationv1.ResourceAttributes, name string) authorizationv1.ResourceAttributes {
	a.Name = name
	return a
}

func attrs(group, resource, subresource, verb string) authorizationv1.ResourceAttributes {
	return authorizationv1.ResourceAttributes{Group: group, Resource: resource, Subresource: subresource, Verb: verb}
}

func nsAttrs(group, resource, ns, verb string) authorizationv1.ResourceAttributes {
	return authorizationv1.ResourceAttributes{Group: group, Resource: resource, Namespace: ns, Verb: verb}
}

// agentClient acts as the agent's service account with a token bound to
// a pod on node ("" for a token bound to no pod).
func agentClient(t *testing.T, admin *rest.Config, node string) kubernetes.Interface {
	t.Helper()
	cfg := rest.CopyConfig(admin)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: agentUser, Groups: agentGroups}
	if node != "" {
		cfg.Impersonate.Extra = map[string][]string{nodeNameExtra: {node}}
	}
	c, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// fieldManager owns what these tests apply.
const fieldManager = "nodenet-deploy-test"

// applyFunc server-side applies one rendered object; with dryRun the API
// server validates and admits it (schema, unknown fields, admission) but
// stores nothing.
type applyFunc func(ctx context.Context, o object, dryRun bool) error

// newApplier applies objects to srv as kubectl apply --server-side does:
// one apply patch per object, at the resource discovery maps its kind to,
// with strict field validation.
func newApplier(t *testing.T, srv *apiserver.Server) applyFunc {
	t.Helper()
	dyn, err := dynamic.NewForConfig(srv.RESTConfig())
	if err != nil {
		t.Fatal(err)
	}
	groups, err := restmapper.GetAPIGroupResources(srv.Client().Discovery())
	if err != nil {
		t.Fatal(err)
	}
	mapper := restmapper.NewDiscoveryRESTMapper(groups)
	return func(ctx context.Context, o object, dryRun bool) error {
		m, err := mapper.RESTMapping(o.gvk.GroupKind(), o.gvk.Version)
		if err != nil {
			return err
		}
		obj := o.obj.(metav1.Object)
		var ri dynamic.ResourceInterface = dyn.Resource(m.Resource)
		if m.Scope.Name() == meta.RESTScopeNameNamespace {
			if obj.GetNamespace() == "" {
				return fmt.Errorf("namespaced %s has no namespace", o.gvk.Kind)
			}
			ri = dyn.Resource(m.Resource).Namespace(obj.GetNamespace())
		}
		opts := metav1.PatchOptions{FieldManager: fieldManager, FieldValidation: metav1.FieldValidationStrict}
		if dryRun {
			opts.DryRun = []string{metav1.DryRunAll}
		}
		_, err = ri.Patch(ctx, obj.GetName(), types.ApplyPatchType, o.json, opts)
		return err
	}
}

// applyAll server-side applies objects for real in their rendered order
// (the Namespace first), as kubectl apply -k does.
func applyAll(t *testing.T, srv *apiserver.Server, objects []object) {
	t.Helper()
	apply := newApplier(t, srv)
	for _, o := range objects {
		if err := apply(t.Context(), o, false); err != nil {
			t.Fatalf("apply %s: %v", o.id(), err)
		}
	}
}

// objectOf returns the one rendered object of kind named name, or fails t.
func objectOf(t *testing.T, objects []object, kind, name string) object {
	t.Helper()
	i := slices.IndexFunc(objects, func(o object) bool { return o.gvk.Kind == kind && o.obj.(metav1.Object).GetName() == name })
	if i < 0 {
		t.Fatalf("no %s %s rendered", kind, name)
	}
	return objects[i]
}
