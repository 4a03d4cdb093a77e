//go:build !windows

// Address plan: a real kube-apiserver and etcd on 127.0.0.1 at random
// ports; 10.96.0.1:443 is the kubernetes Service's ClusterIP of a pod's
// environment, in the service CIDR 10.96.0.0/12, and answers nothing.
package agent

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/go-logr/logr/funcr"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/nodenet/nodenet/agent/apiaddr"
	"github.com/nodenet/nodenet/test/apiserver"
)

// TestTheInClusterClientUsesTheDiscoveredAddress: with no --kubeconfig
// the agent's client is its service account (token and CA files) at the
// address discovery found, it logs the winning source, and with no source
// it fails with the list.
func TestTheInClusterClientUsesTheDiscoveredAddress(t *testing.T) {
	apiserver.RequireBinaries(t, apiserver.Options{})
	srv := apiserver.StartForTest(t, apiserver.Options{})
	admin := srv.RESTConfig()
	dir := t.TempDir()
	sa := serviceAccount{token: filepath.Join(dir, "token"), ca: filepath.Join(dir, "ca.crt")}
	if err := os.WriteFile(sa.token, []byte(admin.BearerToken), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(sa.ca, admin.CAData, 0o600); err != nil {
		t.Fatal(err)
	}
	inPod := map[string]string{
		"KUBERNETES_SERVICE_HOST": "10.96.0.1", "KUBERNETES_SERVICE_PORT": "443", "KUBERNETES_PORT": "tcp://10.96.0.1:443",
	}
	var logged []string
	log := funcr.New(func(prefix, args string) { logged = append(logged, args) }, funcr.Options{})

	t.Run("NODENET_APISERVER gives the address, the service account the identity", func(t *testing.T) {
		env := map[string]string{apiaddr.EnvAPIServer: srv.URL}
		for k, v := range inPod {
			env[k] = v
		}
		o := Options{Getenv: func(k string) string { return env[k] }}
		rc, err := discoveredConfig(t.Context(), o, []string{"10.96.0.0/12"}, sa, log)
		if err != nil {
			t.Fatal(err)
		}
		c, err := kubernetes.NewForConfig(rc)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.CoreV1().Namespaces().Get(t.Context(), "default", metav1.GetOptions{}); err != nil {
			t.Errorf("the discovered client at %s: %v", rc.Host, err)
		}
		if !strings.Contains(strings.Join(logged, "\n"), `"source"="`+apiaddr.EnvAPIServer+`"`) {
			t.Errorf("log %q does not name the winning source", logged)
		}
	})

	t.Run("nothing found: the error lists every source", func(t *testing.T) {
		for _, f := range apiaddr.DefaultKubeletKubeconfigs() {
			if _, err := os.Stat(f); err == nil {
				t.Skipf("this host has a kubelet kubeconfig at %s", f)
			}
		}
		o := Options{Getenv: func(k string) string { return inPod[k] }}
		ctx, cancel := context.WithTimeout(t.Context(), 3*discoveryTimeout)
		defer cancel()
		_, err := discoveredConfig(ctx, o, []string{"10.96.0.0/12"}, sa, log)
		var nf *apiaddr.NotFoundError
		if !errors.As(err, &nf) {
			t.Fatalf("got %v, want a *apiaddr.NotFoundError", err)
		}
		for _, w := range []string{"KUBERNETES_SERVICE_HOST 10.96.0.1", "kubelet kubeconfig", "ConfigMap kube-system/kube-proxy", "EndpointSlice default/kubernetes"} {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("error %q does not mention %s", err, w)
			}
		}
	})

	t.Run("outside a pod it asks for --kubeconfig", func(t *testing.T) {
		_, err := discoveredConfig(t.Context(), Options{Getenv: func(string) string { return "" }}, nil,
			serviceAccount{token: filepath.Join(dir, "none")}, log)
		if err == nil || !strings.Contains(err.Error(), "pass --kubeconfig outside a pod") {
			t.Errorf("got %v, want it to ask for --kubeconfig", err)
		}
	})
}
