// Address plan: cluster IPs in 10.96.0.0/16 and fd00:96::/64, endpoints
// in 10.244.1.0/24.
package source

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/klog/v2/ktesting"
	"k8s.io/utils/ptr"
)

const webService = `apiVersion: v1
kind: Service
metadata:
  name: web
spec:
  clusterIP: 10.96.0.10
  ports:
  - port: 80
`

const webSlice = `apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata:
  name: web-1
  namespace: default
  labels:
    kubernetes.io/service-name: web
addressType: IPv4
endpoints:
- addresses: [10.244.1.5]
ports:
- port: 8080
`

const nodeA = `apiVersion: v1
kind: Node
metadata:
  name: node-a
  labels:
    topology.kubernetes.io/zone: zone-a
`

func parse(t *testing.T, text string) ([]object, error) {
	t.Helper()
	return manifest{file: "test.yaml", log: ktesting.NewLogger(t, ktesting.NewConfig())}.parse([]byte(text))
}

func keys(objects []object) []string {
	var out []string
	for _, o := range objects {
		out = append(out, o.key.String())
	}
	return out
}

func TestParseManifests(t *testing.T) {
	tests := []struct {
		name    string
		text    string
		want    []string
		wantErr []string // substrings of the error
	}{
		{
			name: "documents separated by --- are all read",
			text: "---\n" + webService + "---\n" + webSlice + "--- # the node\n" + nodeA,
			want: []string{"Service default/web", "EndpointSlice default/web-1", "Node node-a"},
		},
		{
			name: "a List's items are read",
			text: "apiVersion: v1\nkind: List\nitems:\n- apiVersion: v1\n  kind: Service\n  metadata: {name: a}\n  spec: {clusterIP: 10.96.0.1}\n- apiVersion: v1\n  kind: Service\n  metadata: {name: b, namespace: prod}\n  spec: {clusterIP: 10.96.0.2}\n",
			want: []string{"Service default/a", "Service prod/b"},
		},
		{
			name: "JSON is read",
			text: `{"apiVersion": "v1", "kind": "Service", "metadata": {"name": "web"}, "spec": {"clusterIP": "10.96.0.10"}}`,
			want: []string{"Service default/web"},
		},
		{
			name: "empty documents and comments are skipped",
			text: "# nothing\n---\n---\n" + webService + "---\n",
			want: []string{"Service default/web"},
		},
		{
			name: "kinds the proxy does not read are skipped",
			text: "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\ndata: {a: b}\n---\n" + webService,
			want: []string{"Service default/web"},
		},
		{
			name: "every node's Node is read (the proxy gets only its own)",
			text: strings.Replace(nodeA, "node-a", "node-b", 1),
			want: []string{"Node node-b"},
		},
		{
			name: "a running Pod is read; one without a node or an address is skipped",
			text: "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec: {nodeName: node-a, containers: [{name: c, image: i}]}\nstatus: {podIP: 10.244.1.9}\n---\n" +
				"apiVersion: v1\nkind: Pod\nmetadata: {name: pending}\nspec: {containers: [{name: c, image: i}]}\n---\n" +
				"apiVersion: v1\nkind: Pod\nmetadata: {name: starting}\nspec: {nodeName: node-a, containers: [{name: c, image: i}]}\n",
			want: []string{"Pod default/p"},
		},
		{
			name: "headless Services, other proxies' Services and headless Services' slices are skipped",
			text: "apiVersion: v1\nkind: Service\nmetadata: {name: h}\nspec: {clusterIP: None}\n---\n" +
				"apiVersion: v1\nkind: Service\nmetadata: {name: m, labels: {service.kubernetes.io/service-proxy-name: mesh}}\nspec: {clusterIP: 10.96.0.3}\n---\n" +
				"apiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\nmetadata: {name: h-1, labels: {service.kubernetes.io/headless: \"\"}}\naddressType: IPv4\n",
		},
		{
			name:    "a YAML syntax error names the file's line, not the document's",
			text:    webService + "---\napiVersion: v1\nkind: Service\nmetadata:\n  name: [oops\n",
			wantErr: []string{"test.yaml: yaml: line 13:"},
		},
		{
			name:    "a value of the wrong type names the field",
			text:    strings.Replace(webService, "port: 80", "port: eighty", 1),
			wantErr: []string{"test.yaml:1: Service web:", "spec.ports.port"},
		},
		{
			name:    "an unknown field is an error",
			text:    strings.Replace(webService, "spec:", "spce: {}\nspec:", 1),
			wantErr: []string{"test.yaml:1: Service web:", `unknown field "spce"`},
		},
		{
			name:    "a duplicate field is an error",
			text:    strings.Replace(webService, "  ports:", "  clusterIP: 10.96.0.11\n  ports:", 1),
			wantErr: []string{`"clusterIP" already set`},
		},
		{
			name:    "a known kind in another version is an error",
			text:    strings.Replace(webSlice, "discovery.k8s.io/v1", "discovery.k8s.io/v1beta1", 1),
			wantErr: []string{`EndpointSlice web-1: apiVersion "discovery.k8s.io/v1beta1", want "discovery.k8s.io/v1"`},
		},
		{
			name:    "an object without a name is an error",
			text:    "apiVersion: v1\nkind: Service\nspec: {clusterIP: 10.96.0.1}\n",
			wantErr: []string{"test.yaml:1: Service: no metadata.name"},
		},
		{
			name:    "an EndpointSlice without addressType is an error",
			text:    strings.Replace(webSlice, "addressType: IPv4\n", "", 1),
			wantErr: []string{"no addressType"},
		},
		{
			name:    "a document that is not an object is an error",
			text:    "- a\n- b\n",
			wantErr: []string{"test.yaml:1: not a Kubernetes object"},
		},
		{
			name:    "every bad document of a file is reported",
			text:    "kind: Service\nmetadata: {name: a}\n---\n" + webService + "---\napiVersion: v1\nmetadata: {name: b}\n",
			wantErr: []string{`test.yaml:1: Service a: apiVersion ""`, "test.yaml:13: no kind"},
		},
		{
			name:    "a List item's error names the item",
			text:    "apiVersion: v1\nkind: List\nitems:\n- apiVersion: v1\n  kind: Service\n  metadata: {name: a}\n- apiVersion: v1\n  kind: Service\n  metadata: {name: b}\n  spec: {ports: [{port: x}]}\n",
			wantErr: []string{"test.yaml:1 (List item 1): Service b:"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parse(t, tt.text)
			if len(tt.wantErr) > 0 {
				if err == nil {
					t.Fatalf("no error; objects %v", keys(got))
				}
				for _, want := range tt.wantErr {
					if !strings.Contains(err.Error(), want) {
						t.Errorf("error %q does not contain %q", err, want)
					}
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, keys(got)); diff != "" {
				t.Errorf("objects (-want +got):\n%s", diff)
			}
		})
	}
}

func TestManifestObjectsGetTheAPIServersDefaults(t *testing.T) {
	objects, err := parse(t, webService+"---\n"+webSlice+"---\n"+
		"apiVersion: v1\nkind: Service\nmetadata: {name: dual}\nspec:\n  type: LoadBalancer\n  sessionAffinity: ClientIP\n  clusterIPs: [10.96.0.20, 'fd00:96::20']\n  ports: [{port: 53, protocol: UDP, targetPort: dns}]\n")
	if err != nil {
		t.Fatal(err)
	}
	web := objects[0].obj.(*v1.Service)
	wantWeb := v1.ServiceSpec{
		Type:                  v1.ServiceTypeClusterIP,
		ClusterIP:             "10.96.0.10",
		ClusterIPs:            []string{"10.96.0.10"},
		IPFamilies:            []v1.IPFamily{v1.IPv4Protocol},
		IPFamilyPolicy:        ptr.To(v1.IPFamilyPolicySingleStack),
		SessionAffinity:       v1.ServiceAffinityNone,
		InternalTrafficPolicy: ptr.To(v1.ServiceInternalTrafficPolicyCluster),
		Ports:                 []v1.ServicePort{{Port: 80, Protocol: v1.ProtocolTCP, TargetPort: intstr.FromInt32(80)}},
	}
	if diff := cmp.Diff(wantWeb, web.Spec); diff != "" {
		t.Errorf("web spec (-want +got):\n%s", diff)
	}
	if web.Namespace != "default" {
		t.Errorf("namespace %q, want default", web.Namespace)
	}

	slice := objects[1].obj.(*discoveryv1.EndpointSlice)
	wantPorts := []discoveryv1.EndpointPort{{Name: ptr.To(""), Protocol: ptr.To(v1.ProtocolTCP), Port: ptr.To[int32](8080)}}
	if diff := cmp.Diff(wantPorts, slice.Ports); diff != "" {
		t.Errorf("slice ports (-want +got):\n%s", diff)
	}

	dual := objects[2].obj.(*v1.Service)
	wantDual := v1.ServiceSpec{
		Type:                  v1.ServiceTypeLoadBalancer,
		ClusterIP:             "10.96.0.20",
		ClusterIPs:            []string{"10.96.0.20", "fd00:96::20"},
		IPFamilies:            []v1.IPFamily{v1.IPv4Protocol, v1.IPv6Protocol},
		IPFamilyPolicy:        ptr.To(v1.IPFamilyPolicyRequireDualStack),
		SessionAffinity:       v1.ServiceAffinityClientIP,
		SessionAffinityConfig: &v1.SessionAffinityConfig{ClientIP: &v1.ClientIPConfig{TimeoutSeconds: ptr.To[int32](10800)}},
		InternalTrafficPolicy: ptr.To(v1.ServiceInternalTrafficPolicyCluster),
		ExternalTrafficPolicy: v1.ServiceExternalTrafficPolicyCluster,
		Ports:                 []v1.ServicePort{{Port: 53, Protocol: v1.ProtocolUDP, TargetPort: intstr.FromString("dns")}},
	}
	if diff := cmp.Diff(wantDual, dual.Spec); diff != "" {
		t.Errorf("dual spec (-want +got):\n%s", diff)
	}
}

func TestManifestUIDsAndResourceVersions(t *testing.T) {
	first := func(text string) *v1.Service {
		t.Helper()
		objects, err := parse(t, text)
		if err != nil {
			t.Fatal(err)
		}
		return objects[0].obj.(*v1.Service)
	}
	a, again := first(webService), first(webService)
	if a.UID == "" || a.ResourceVersion == "" {
		t.Fatalf("UID %q, resourceVersion %q: want both set", a.UID, a.ResourceVersion)
	}
	if a.UID != again.UID || a.ResourceVersion != again.ResourceVersion {
		t.Errorf("the same manifest read twice: UID %q/%q, resourceVersion %q/%q", a.UID, again.UID, a.ResourceVersion, again.ResourceVersion)
	}

	edited := first(strings.Replace(webService, "port: 80", "port: 81", 1))
	if edited.UID != a.UID {
		t.Errorf("an edit changed the UID: %q to %q", a.UID, edited.UID)
	}
	if edited.ResourceVersion == a.ResourceVersion {
		t.Errorf("an edit kept the resourceVersion %q", a.ResourceVersion)
	}

	// A comment or a reordering is no change.
	same := first("# a comment\n" + strings.Replace(webService, "spec:\n  clusterIP: 10.96.0.10\n  ports:\n  - port: 80\n", "spec:\n  ports:\n  - port: 80\n  clusterIP: 10.96.0.10\n", 1))
	if same.ResourceVersion != a.ResourceVersion {
		t.Errorf("a reordered manifest got a new resourceVersion")
	}

	other := first(strings.Replace(webService, "name: web", "name: api", 1))
	if other.UID == a.UID {
		t.Errorf("two Services share the UID %q", a.UID)
	}

	given := first(strings.Replace(webService, "name: web", "name: web\n  uid: \"1234\"\n  resourceVersion: \"7\"", 1))
	if given.UID != "1234" {
		t.Errorf("UID %q, want the manifest's 1234", given.UID)
	}
	if given.ResourceVersion == "7" {
		t.Errorf("the manifest's resourceVersion was kept: edits would not be seen")
	}
}

func TestSplitDocumentsKeepsLineNumbers(t *testing.T) {
	docs := splitDocuments([]byte("a: 1\n---\nb: 2\nc: 3\n--- # x\r\nd: 4"))
	var got []int
	for _, d := range docs {
		got = append(got, d.line)
	}
	if diff := cmp.Diff([]int{1, 3, 6}, got); diff != "" {
		t.Errorf("start lines (-want +got):\n%s", diff)
	}
	if string(docs[2].text) != "d: 4" {
		t.Errorf("last document %q", docs[2].text)
	}
}
