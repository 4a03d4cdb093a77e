// Address plan: service CIDR 10.96.0.0/12 (the kubernetes Service at
// 10.96.0.1); API servers named cp.example (flag), env.example (env),
// 192.0.2.10 (an operator's KUBERNETES_SERVICE_HOST), kubelet.example
// (kubelet kubeconfig), proxy.example (kube-proxy ConfigMap), 192.0.2.20
// (the kubernetes EndpointSlice). Nothing is dialled.
package apiaddr

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// fakeReader answers steps 3 and 4 from fixed values.
type fakeReader struct {
	kubeconfig    string
	kubeconfigErr error
	endpoint      string
	endpointErr   error
}

func (f fakeReader) KubeProxyKubeconfig(context.Context) ([]byte, error) {
	return []byte(f.kubeconfig), f.kubeconfigErr
}

func (f fakeReader) KubernetesEndpoint(context.Context) (string, error) {
	return f.endpoint, f.endpointErr
}

func kubeconfig(server string) string {
	return `apiVersion: v1
kind: Config
clusters:
- name: default
  cluster:
    server: ` + server + `
contexts:
- name: default
  context: {cluster: default, user: default}
current-context: default
users:
- name: default
  user: {tokenFile: /dev/null}
`
}

func TestDiscoverTakesTheFirstSourceThatAnswers(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	kubelet := write("kubelet.conf", kubeconfig("https://kubelet.example:6443"))
	garbage := write("garbage.conf", "clusters: [this is not: a kubeconfig")
	noContext := write("nocontext.conf", strings.Replace(kubeconfig("https://x:1"), "current-context: default", "current-context: other", 1))
	missing := filepath.Join(dir, "missing.conf")
	proxy := fakeReader{kubeconfig: kubeconfig("https://proxy.example:6443"), endpoint: "https://192.0.2.20:6443"}
	down := fakeReader{kubeconfigErr: errors.New("dial tcp 10.96.0.1:443: i/o timeout"), endpointErr: errors.New("dial tcp 10.96.0.1:443: i/o timeout")}
	inPod := map[string]string{"KUBERNETES_SERVICE_HOST": "10.96.0.1", "KUBERNETES_SERVICE_PORT": "443", "KUBERNETES_PORT": "tcp://10.96.0.1:443"}
	// A cluster whose service CIDR the config does not list (k3s's).
	otherCIDR := map[string]string{"KUBERNETES_SERVICE_HOST": "10.43.0.1", "KUBERNETES_SERVICE_PORT": "443", "KUBERNETES_PORT": "tcp://10.43.0.1:443"}
	with := func(m map[string]string, k, v string) map[string]string {
		out := map[string]string{k: v}
		for mk, mv := range m {
			if mk != k {
				out[mk] = mv
			}
		}
		return out
	}

	for _, tc := range []struct {
		name       string
		flag       string
		env        map[string]string
		kubeconfs  []string
		via        Reader
		wantHost   string
		wantSource string
		// wantTried are substrings of the error when nothing is found.
		wantTried []string
		// wantSkipped are what the sources before the winner said.
		wantSkipped []string
		// wantErr is the whole error for a malformed explicit address.
		wantErr string
	}{
		{name: "--apiserver wins over everything", flag: "cp.example:6443", env: with(inPod, EnvAPIServer, "https://env.example"),
			kubeconfs: []string{kubelet}, via: proxy, wantHost: "https://cp.example:6443", wantSource: "--apiserver"},
		{name: "NODENET_APISERVER wins over the node's files", env: with(inPod, EnvAPIServer, "https://env.example:443/"),
			kubeconfs: []string{kubelet}, via: proxy, wantHost: "https://env.example:443", wantSource: EnvAPIServer},
		{name: "an operator's KUBERNETES_SERVICE_HOST outside the service CIDRs is explicit", env: with(inPod, "KUBERNETES_SERVICE_HOST", "192.0.2.10"),
			kubeconfs: []string{kubelet}, via: proxy, wantHost: "https://192.0.2.10:443", wantSource: "KUBERNETES_SERVICE_HOST/PORT (not a Service IP)"},
		{name: "kubelet's ClusterIP env outside the configured serviceCIDRs is still skipped", env: otherCIDR,
			kubeconfs: []string{kubelet}, wantHost: "https://kubelet.example:6443", wantSource: "kubelet kubeconfig " + kubelet},
		{name: "kubelet's ClusterIP env is skipped for the kubelet kubeconfig", env: inPod,
			kubeconfs: []string{missing, kubelet}, via: proxy, wantHost: "https://kubelet.example:6443", wantSource: "kubelet kubeconfig " + kubelet,
			wantSkipped: []string{"--apiserver: not set", EnvAPIServer + ": not set",
				"KUBERNETES_SERVICE_HOST 10.96.0.1: the kubernetes Service's ClusterIP, which this agent programs",
				"kubelet kubeconfig " + missing + ": not found"}},
		{name: "a broken kubelet kubeconfig is skipped for the next", env: inPod,
			kubeconfs: []string{garbage, kubelet}, wantHost: "https://kubelet.example:6443", wantSource: "kubelet kubeconfig " + kubelet},
		{name: "no kubelet kubeconfig: the kube-proxy ConfigMap", env: inPod,
			kubeconfs: []string{missing}, via: proxy, wantHost: "https://proxy.example:6443", wantSource: "ConfigMap kube-system/kube-proxy"},
		{name: "no kube-proxy ConfigMap: the kubernetes EndpointSlice", env: inPod, kubeconfs: []string{missing},
			via:      fakeReader{kubeconfigErr: errors.New(`configmaps "kube-proxy" not found`), endpoint: "https://192.0.2.20:6443"},
			wantHost: "https://192.0.2.20:6443", wantSource: "EndpointSlice default/kubernetes"},
		{name: "a kube-proxy kubeconfig with a plain-http server is refused", env: inPod, kubeconfs: []string{missing},
			via:      fakeReader{kubeconfig: kubeconfig("http://proxy.example:8080"), endpoint: "https://192.0.2.20:6443"},
			wantHost: "https://192.0.2.20:6443", wantSource: "EndpointSlice default/kubernetes"},
		{name: "nothing answers: the error lists every source", env: inPod,
			kubeconfs: []string{missing, garbage, noContext}, via: down,
			wantTried: []string{
				"--apiserver: not set", EnvAPIServer + ": not set",
				"KUBERNETES_SERVICE_HOST 10.96.0.1: the kubernetes Service's ClusterIP",
				"kubelet kubeconfig " + missing + ": not found",
				"kubelet kubeconfig " + garbage + ": not a kubeconfig",
				"kubelet kubeconfig " + noContext + `: current-context "other" is not among its contexts`,
				"ConfigMap kube-system/kube-proxy: dial tcp 10.96.0.1:443: i/o timeout",
				"EndpointSlice default/kubernetes: dial tcp 10.96.0.1:443: i/o timeout",
				"set NODENET_APISERVER",
			}},
		{name: "outside a pod with no files: every source says why", kubeconfs: []string{},
			wantTried: []string{"KUBERNETES_SERVICE_HOST/PORT: not set",
				"ConfigMap kube-system/kube-proxy: no in-cluster client", "EndpointSlice default/kubernetes: no in-cluster client"}},
		{name: "a malformed NODENET_APISERVER is an error, not a fallback", env: with(inPod, EnvAPIServer, "ftp://x"),
			kubeconfs: []string{kubelet}, via: proxy, wantErr: `NODENET_APISERVER: "ftp://x": want https://host[:port]`},
		{name: "a malformed --apiserver is an error, not a fallback", flag: "https://cp.example:6443/api", env: inPod,
			kubeconfs: []string{kubelet}, via: proxy, wantErr: `--apiserver: "https://cp.example:6443/api": want https://host[:port]`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Discover(t.Context(), Options{
				Flag:               tc.flag,
				Getenv:             func(k string) string { return tc.env[k] },
				ServiceCIDRs:       []string{"10.96.0.0/12", "fd00:10:96::/112"},
				KubeletKubeconfigs: tc.kubeconfs,
				ViaService:         tc.via,
			})
			if tc.wantErr != "" {
				if err == nil || err.Error() != tc.wantErr {
					t.Fatalf("Discover = %+v, %v; want error %q", got, err, tc.wantErr)
				}
				return
			}
			if tc.wantTried != nil {
				var nf *NotFoundError
				if !errors.As(err, &nf) {
					t.Fatalf("Discover = %+v, %v; want a *NotFoundError", got, err)
				}
				for _, w := range tc.wantTried {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("error %q does not say %q", err, w)
					}
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got.Host != tc.wantHost || got.Source != tc.wantSource {
				t.Errorf("Discover = %+v, want host %s from %s", got, tc.wantHost, tc.wantSource)
			}
			for _, s := range got.Skipped {
				if strings.HasPrefix(s, got.Source) {
					t.Errorf("the winner %s is among the skipped: %q", got.Source, got.Skipped)
				}
			}
			if tc.flag == "" && !slices.Contains(got.Skipped, "--apiserver: not set") {
				t.Errorf("skipped %q does not say --apiserver was not set", got.Skipped)
			}
			if tc.wantSkipped != nil && !slices.Equal(got.Skipped, tc.wantSkipped) {
				t.Errorf("skipped %q, want %q", got.Skipped, tc.wantSkipped)
			}
		})
	}
}

func TestAServiceIPIsToldFromAnOperatorsAddress(t *testing.T) {
	cidrs := []string{"10.96.0.0/12", "fd00:10:96::/112", "not-a-cidr"}
	for _, tc := range []struct {
		host string
		want bool
	}{
		{"10.96.0.1", true},
		{"fd00:10:96::1", true},
		{"10.112.0.1", false},
		{"cp.example", false},
		{"::ffff:10.96.0.1", true},
	} {
		if got := isServiceLink(tc.host, "tcp://10.43.0.1:443", cidrs); got != tc.want {
			t.Errorf("isServiceLink(%s) = %v, want %v", tc.host, got, tc.want)
		}
	}
	if !isServiceLink("10.43.0.1", "tcp://10.43.0.1:443", cidrs) {
		t.Error("the host in KUBERNETES_PORT is not taken for kubelet's Service link")
	}
}
