// Package apiaddr finds the API server address nodenet-agent uses before
// Services work. The agent replaces kube-proxy, so the kubernetes Service's
// ClusterIP (what KUBERNETES_SERVICE_HOST holds in a pod) answers only once
// the agent itself has programmed it: on a fresh node nothing answers there.
//
// Discover tries, in order, and the first that gives an address wins:
//
//  1. explicit: --apiserver, else NODENET_APISERVER, else a
//     KUBERNETES_SERVICE_HOST/PORT an operator set: not the ClusterIP
//     kubelet also puts in KUBERNETES_PORT, not in the config's
//     serviceCIDRs;
//  2. the kubelet's kubeconfig on this node (kubeadm writes
//     /etc/kubernetes/kubelet.conf on Linux; Windows nodes joined with
//     sig-windows-tools use C:\etc\kubernetes\kubelet.conf, older guides
//     C:\k\config): its current cluster's server, which this node already
//     reaches without Services;
//  3. the kube-proxy ConfigMap in kube-system (kubeadm's, kubeconfig.conf),
//     read through the kubernetes Service: only works while Services work
//     (the agent restarting onto its own rules, kube-proxy still on the
//     node), and then pins the real address so the agent never depends on
//     the rules it programs;
//  4. the kubernetes EndpointSlice in default, read the same way: an API
//     server's own address.
//
// The TLS CA and the token stay the pod's service account's: only the
// address comes from these sources (kubeadm's serving certificate covers
// controlPlaneEndpoint and every advertise address).
package apiaddr

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"os"
	"strings"
	"time"

	"k8s.io/client-go/tools/clientcmd"
)

// EnvAPIServer is the environment variable an operator sets to skip
// discovery (the nodenet-apiserver ConfigMap feeds it).
const EnvAPIServer = "NODENET_APISERVER"

// Options are Discover's inputs; the agent fills them from its flags, its
// config and the pod.
type Options struct {
	// Flag is --apiserver: a URL (https://host:port) or host:port.
	Flag string
	// Getenv reads NODENET_APISERVER and KUBERNETES_SERVICE_HOST/PORT;
	// nil means os.Getenv.
	Getenv func(string) string
	// ServiceCIDRs help tell the kubernetes Service's ClusterIP (which
	// kubelet puts in KUBERNETES_SERVICE_HOST) from an address an operator
	// set.
	ServiceCIDRs []string
	// KubeletKubeconfigs are the files tried in step 2, in order; nil
	// means DefaultKubeletKubeconfigs().
	KubeletKubeconfigs []string
	// ViaService reads through the kubernetes Service (steps 3 and 4);
	// nil skips them (no service account to read with).
	ViaService Reader
	// Timeout bounds each read through the Service; 0 means 5s.
	Timeout time.Duration
}

// Reader reads the two API objects steps 3 and 4 use. NewReader makes one
// from a client; tests may point it at any API server.
type Reader interface {
	// KubeProxyKubeconfig returns kube-system/kube-proxy's kubeconfig.conf.
	KubeProxyKubeconfig(ctx context.Context) ([]byte, error)
	// KubernetesEndpoint returns a ready API server address
	// (https://ip:port) from the kubernetes EndpointSlice in default.
	KubernetesEndpoint(ctx context.Context) (string, error)
}

// Result is where the API server is and which source said so.
type Result struct {
	// Host is a URL, https://host:port.
	Host string
	// Source names the winning step, e.g. "kubelet kubeconfig /etc/kubernetes/kubelet.conf".
	Source string
	// Skipped says why each source before it gave nothing.
	Skipped []string
}

// NotFoundError is Discover's error when no source gave an address: every
// step tried and why it gave nothing.
type NotFoundError struct {
	Tried []string
}

func (e *NotFoundError) Error() string {
	return "no API server address: tried " + strings.Join(e.Tried, "; ") +
		" (set " + EnvAPIServer + " in ConfigMap nodenet-system/nodenet-apiserver, or pass --apiserver or --kubeconfig)"
}

// Discover returns the first address the sources in the package
// documentation give, or a *NotFoundError listing what each said. An
// explicit address that is malformed is an error naming it: the operator
// meant it, so no other source stands in.
func Discover(ctx context.Context, o Options) (Result, error) {
	if o.Getenv == nil {
		o.Getenv = os.Getenv
	}
	for _, s := range []struct{ name, value string }{{"--apiserver", o.Flag}, {EnvAPIServer, o.Getenv(EnvAPIServer)}} {
		if _, err := normalize(s.value); s.value != "" && err != nil {
			return Result{}, fmt.Errorf("%s: %w", s.name, err)
		}
	}
	if o.KubeletKubeconfigs == nil {
		o.KubeletKubeconfigs = DefaultKubeletKubeconfigs()
	}
	if o.Timeout == 0 {
		o.Timeout = 5 * time.Second
	}
	var tried []string
	for _, step := range []func(context.Context, Options) (Result, []string){explicit, kubeletKubeconfig, kubeProxyConfigMap, kubernetesEndpoints} {
		r, notes := step(ctx, o)
		tried = append(tried, notes...)
		if r.Host != "" {
			r.Skipped = tried
			return r, nil
		}
	}
	return Result{}, &NotFoundError{Tried: tried}
}

// explicit is step 1.
func explicit(_ context.Context, o Options) (Result, []string) {
	var notes []string
	for _, s := range []struct{ name, value string }{
		{"--apiserver", o.Flag},
		{EnvAPIServer, o.Getenv(EnvAPIServer)},
	} {
		if s.value == "" {
			notes = append(notes, s.name+": not set")
			continue
		}
		host, _ := normalize(s.value) // checked by Discover
		return Result{Host: host, Source: s.name}, notes
	}
	h, p := o.Getenv("KUBERNETES_SERVICE_HOST"), o.Getenv("KUBERNETES_SERVICE_PORT")
	if h == "" || p == "" {
		return Result{}, append(notes, "KUBERNETES_SERVICE_HOST/PORT: not set")
	}
	if isServiceLink(h, o.Getenv("KUBERNETES_PORT"), o.ServiceCIDRs) {
		return Result{}, append(notes, fmt.Sprintf("KUBERNETES_SERVICE_HOST %s: the kubernetes Service's ClusterIP, which this agent programs", h))
	}
	return Result{Host: "https://" + net.JoinHostPort(h, p), Source: "KUBERNETES_SERVICE_HOST/PORT (not a Service IP)"}, notes
}

// kubeletKubeconfig is step 2: the first readable kubeconfig wins; a file
// that is there but unusable is noted and skipped.
func kubeletKubeconfig(_ context.Context, o Options) (Result, []string) {
	var notes []string
	for _, f := range o.KubeletKubeconfigs {
		data, err := os.ReadFile(f)
		if errors.Is(err, os.ErrNotExist) {
			notes = append(notes, "kubelet kubeconfig "+f+": not found")
			continue
		}
		if err == nil {
			var host string
			if host, err = kubeconfigServer(data); err == nil {
				return Result{Host: host, Source: "kubelet kubeconfig " + f}, notes
			}
		}
		notes = append(notes, fmt.Sprintf("kubelet kubeconfig %s: %v", f, err))
	}
	return Result{}, notes
}

// kubeProxyConfigMap is step 3.
func kubeProxyConfigMap(ctx context.Context, o Options) (Result, []string) {
	const name = "ConfigMap kube-system/kube-proxy"
	if o.ViaService == nil {
		return Result{}, []string{name + ": no in-cluster client"}
	}
	ctx, cancel := context.WithTimeout(ctx, o.Timeout)
	defer cancel()
	data, err := o.ViaService.KubeProxyKubeconfig(ctx)
	if err == nil {
		var host string
		if host, err = kubeconfigServer(data); err == nil {
			return Result{Host: host, Source: name}, nil
		}
	}
	return Result{}, []string{fmt.Sprintf("%s: %v", name, err)}
}

// kubernetesEndpoints is step 4.
func kubernetesEndpoints(ctx context.Context, o Options) (Result, []string) {
	const name = "EndpointSlice default/kubernetes"
	if o.ViaService == nil {
		return Result{}, []string{name + ": no in-cluster client"}
	}
	ctx, cancel := context.WithTimeout(ctx, o.Timeout)
	defer cancel()
	host, err := o.ViaService.KubernetesEndpoint(ctx)
	if err != nil {
		return Result{}, []string{fmt.Sprintf("%s: %v", name, err)}
	}
	return Result{Host: host, Source: name}, nil
}

// kubeconfigServer is the server of a kubeconfig's current context's
// cluster (kube-proxy and kubelet use exactly that one).
func kubeconfigServer(data []byte) (string, error) {
	kc, err := clientcmd.Load(data)
	if err != nil {
		return "", fmt.Errorf("not a kubeconfig: %w", err)
	}
	ctxName := kc.CurrentContext
	c, ok := kc.Contexts[ctxName]
	if !ok {
		return "", fmt.Errorf("current-context %q is not among its contexts", ctxName)
	}
	cl, ok := kc.Clusters[c.Cluster]
	if !ok || cl.Server == "" {
		return "", fmt.Errorf("context %q: cluster %q has no server", ctxName, c.Cluster)
	}
	return normalize(cl.Server)
}

// ParseAddress checks an explicit address (--apiserver) and returns it as
// https://host[:port]; a bare host[:port] gets https.
func ParseAddress(s string) (string, error) { return normalize(s) }

// normalize checks an address and returns it as https://host:port; a bare
// host:port gets https.
func normalize(s string) (string, error) {
	if !strings.Contains(s, "://") {
		s = "https://" + s
	}
	u, err := url.Parse(s)
	if err != nil {
		return "", fmt.Errorf("%q is not a URL: %w", s, err)
	}
	if u.Scheme != "https" || u.Host == "" || u.Hostname() == "" || (u.Path != "" && u.Path != "/") {
		return "", fmt.Errorf("%q: want https://host[:port]", s)
	}
	return "https://" + u.Host, nil
}

// isServiceLink reports whether host is what kubelet put in a pod's
// environment for the kubernetes Service: the ClusterIP also in its
// KUBERNETES_PORT (tcp://ip:port), which an operator overriding only
// KUBERNETES_SERVICE_HOST leaves alone, or any IP in the serviceCIDRs.
func isServiceLink(host, kubernetesPort string, serviceCIDRs []string) bool {
	if u, err := url.Parse(kubernetesPort); err == nil && u.Hostname() != "" && u.Hostname() == host {
		return true
	}
	return inServiceCIDRs(host, serviceCIDRs)
}

// inServiceCIDRs reports whether host is an IP in one of cidrs; a bad CIDR
// is the config's error, reported there.
func inServiceCIDRs(host string, cidrs []string) bool {
	ip, err := netip.ParseAddr(host)
	if err != nil {
		return false
	}
	for _, c := range cidrs {
		if p, err := netip.ParsePrefix(c); err == nil && p.Contains(ip.Unmap()) {
			return true
		}
	}
	return false
}

// HostRoot is where the Linux DaemonSet mounts the host's /etc/kubernetes
// (read-only): the container's own /etc is the image's.
const HostRoot = "/host"

// LinuxKubeletKubeconfigs are the kubelet kubeconfigs step 2 tries on
// Linux: kubeadm's, under HostRoot. Defined on every OS so the deploy
// tests can check the Linux DaemonSet's mounts from any build.
func LinuxKubeletKubeconfigs() []string {
	return []string{HostRoot + "/etc/kubernetes/kubelet.conf"}
}
