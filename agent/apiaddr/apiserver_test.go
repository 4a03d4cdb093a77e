//go:build !windows

// Address plan: a real kube-apiserver and etcd on 127.0.0.1 at random
// ports stand in for the kubernetes Service (what the agent reads steps 3
// and 4 through); kube-proxy's kubeconfig names cp.example:6443, the
// kubernetes EndpointSlice 192.0.2.20:6443, the kubelet kubeconfig the
// test apiserver itself; 127.0.0.1:1 is a Service IP nothing answers on.
package apiaddr_test

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	"github.com/nodenet/nodenet/agent/apiaddr"
	"github.com/nodenet/nodenet/test/apiserver"
)

const kubeProxyKubeconfig = `apiVersion: v1
kind: Config
clusters:
- cluster:
    certificate-authority: /var/run/secrets/kubernetes.io/serviceaccount/ca.crt
    server: https://cp.example:6443
  name: default
contexts:
- context:
    cluster: default
    namespace: default
    user: default
  name: default
current-context: default
users:
- name: default
  user:
    tokenFile: /var/run/secrets/kubernetes.io/serviceaccount/token
`

func TestDiscoverAgainstARealAPIServer(t *testing.T) {
	apiserver.RequireBinaries(t, apiserver.Options{})
	srv := apiserver.StartForTest(t, apiserver.Options{})
	ctx := t.Context()
	client := srv.Client()
	dir := t.TempDir()
	kubelet := filepath.Join(dir, "kubelet.conf")
	if err := srv.WriteKubeconfig(kubelet); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(dir, "missing.conf")
	inPod := func(k string) string {
		return map[string]string{"KUBERNETES_SERVICE_HOST": "10.96.0.1", "KUBERNETES_SERVICE_PORT": "443"}[k]
	}
	discover := func(flag string, kubeconfigs []string, via apiaddr.Reader) (apiaddr.Result, error) {
		return apiaddr.Discover(ctx, apiaddr.Options{
			Flag: flag, Getenv: inPod, ServiceCIDRs: []string{"10.96.0.0/12"},
			KubeletKubeconfigs: kubeconfigs, ViaService: via,
		})
	}
	viaService := apiaddr.NewReader(client)

	// Nothing in the cluster yet: kube-proxy's ConfigMap and the
	// EndpointSlice are not found, and the error says so, source by source.
	_, err := discover("", []string{missing}, viaService)
	var nf *apiaddr.NotFoundError
	if !errors.As(err, &nf) {
		t.Fatalf("empty cluster: %v, want a *NotFoundError", err)
	}
	for _, w := range []string{
		"kubelet kubeconfig " + missing + ": not found",
		`ConfigMap kube-system/kube-proxy: configmaps "kube-proxy" not found`,
		"EndpointSlice default/kubernetes: no ready endpoint",
	} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error %q does not say %q", err, w)
		}
	}

	createKubernetesSlice(t, client)
	if _, err := client.CoreV1().ConfigMaps("kube-system").Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "kube-proxy", Namespace: "kube-system"},
		Data:       map[string]string{"kubeconfig.conf": kubeProxyKubeconfig, "config.conf": "{}"},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	unreachable := unreachableReader(t, srv.RESTConfig())

	for _, tc := range []struct {
		name        string
		flag        string
		kubeconfigs []string
		via         apiaddr.Reader
		wantHost    string
		wantSource  string
	}{
		{"the kube-proxy ConfigMap in kube-system is found", "", []string{missing}, viaService, "https://cp.example:6443", "ConfigMap kube-system/kube-proxy"},
		{"the kubelet kubeconfig wins over the ConfigMap", "", []string{missing, kubelet}, viaService, srv.URL, "kubelet kubeconfig " + kubelet},
		{"an explicit address wins over all", "https://cp.example:443", []string{kubelet}, viaService, "https://cp.example:443", "--apiserver"},
		{"the kubelet kubeconfig needs no Service", "", []string{kubelet}, unreachable, srv.URL, "kubelet kubeconfig " + kubelet},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := discover(tc.flag, tc.kubeconfigs, tc.via)
			if err != nil {
				t.Fatal(err)
			}
			if got.Host != tc.wantHost || got.Source != tc.wantSource {
				t.Errorf("got %+v, want %s from %s", got, tc.wantHost, tc.wantSource)
			}
		})
	}

	t.Run("without the ConfigMap the kubernetes EndpointSlice gives an API server", func(t *testing.T) {
		if err := client.CoreV1().ConfigMaps("kube-system").Delete(ctx, "kube-proxy", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		got, err := discover("", []string{missing}, viaService)
		if err != nil || got.Host != "https://192.0.2.20:6443" || got.Source != "EndpointSlice default/kubernetes" {
			t.Errorf("got %+v, %v; want https://192.0.2.20:6443 from the EndpointSlice", got, err)
		}
	})

	t.Run("the discovered kubelet address serves the API", func(t *testing.T) {
		got, err := discover("", []string{kubelet}, unreachable)
		if err != nil {
			t.Fatal(err)
		}
		rc := rest.CopyConfig(srv.RESTConfig())
		rc.Host = got.Host
		c, err := kubernetes.NewForConfig(rc)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.CoreV1().Namespaces().Get(ctx, "kube-system", metav1.GetOptions{}); err != nil {
			t.Errorf("the API server at %s: %v", got.Host, err)
		}
	})
}

// createKubernetesSlice makes the EndpointSlice kube-apiserver keeps for
// itself (this test apiserver runs with --endpoint-reconciler-type=none):
// one not-ready address that must be skipped, one ready.
func createKubernetesSlice(t *testing.T, client kubernetes.Interface) {
	t.Helper()
	_, err := client.DiscoveryV1().EndpointSlices("default").Create(t.Context(), &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Name: "kubernetes", Labels: map[string]string{discoveryv1.LabelServiceName: "kubernetes"}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints: []discoveryv1.Endpoint{
			{Addresses: []string{"192.0.2.19"}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(false)}},
			{Addresses: []string{"192.0.2.20"}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}},
		},
		Ports: []discoveryv1.EndpointPort{{Name: ptr.To("https"), Port: ptr.To[int32](6443), Protocol: ptr.To(corev1.ProtocolTCP)}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
}

// unreachableReader reads through an address nothing answers on, as the
// kubernetes Service's ClusterIP on a fresh node.
func unreachableReader(t *testing.T, rc *rest.Config) apiaddr.Reader {
	rc = rest.CopyConfig(rc)
	rc.Host = "https://127.0.0.1:1"
	c, err := kubernetes.NewForConfig(rc)
	if err != nil {
		t.Fatal(err)
	}
	return apiaddr.NewReader(c)
}
