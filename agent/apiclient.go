package agent

import (
	"context"
	"fmt"
	"net"
	"os"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"

	"github.com/nodenet/nodenet/agent/apiaddr"
)

// serviceAccount are the files of the pod's service account.
type serviceAccount struct{ token, ca string }

// podServiceAccount is where kubelet mounts them.
var podServiceAccount = serviceAccount{
	token: "/var/run/secrets/kubernetes.io/serviceaccount/token",
	ca:    "/var/run/secrets/kubernetes.io/serviceaccount/ca.crt",
}

// discoveryTimeout bounds each read through the kubernetes Service while
// discovering the API server: on a fresh node nothing answers there.
const discoveryTimeout = 5 * time.Second

// restConfig is the API client's config, speaking protobuf as kube-proxy
// does: --kubeconfig as given, else the pod's service account with the
// address apiaddr.Discover finds (never the kubernetes Service's ClusterIP,
// which this agent programs).
func restConfig(ctx context.Context, o Options, serviceCIDRs []string, log klog.Logger) (*rest.Config, error) {
	var rc *rest.Config
	var err error
	if o.Kubeconfig == "" {
		rc, err = discoveredConfig(ctx, o, serviceCIDRs, podServiceAccount, log)
		if err != nil {
			return nil, err
		}
	} else {
		rc, err = clientcmd.BuildConfigFromFlags("", o.Kubeconfig)
		if err != nil {
			return nil, fmt.Errorf("kubeconfig %s: %w", o.Kubeconfig, err)
		}
	}
	rc = rest.CopyConfig(rc)
	rc.UserAgent = "nodenet-agent"
	rc.ContentType = "application/vnd.kubernetes.protobuf"
	rc.AcceptContentTypes = "application/vnd.kubernetes.protobuf,application/json"
	return rc, nil
}

// discoveredConfig is the service account's config at the discovered
// address; the log line says which source won.
func discoveredConfig(ctx context.Context, o Options, serviceCIDRs []string, sa serviceAccount, log klog.Logger) (*rest.Config, error) {
	if _, err := os.Stat(sa.token); err != nil {
		return nil, fmt.Errorf("in-cluster API config (pass --kubeconfig outside a pod): %w", err)
	}
	base := &rest.Config{
		BearerTokenFile: sa.token,
		TLSClientConfig: rest.TLSClientConfig{CAFile: sa.ca},
	}
	getenv := o.Getenv
	if getenv == nil {
		getenv = os.Getenv
	}
	var via apiaddr.Reader
	if h, p := getenv("KUBERNETES_SERVICE_HOST"), getenv("KUBERNETES_SERVICE_PORT"); h != "" && p != "" {
		svc := rest.CopyConfig(base)
		svc.Host = "https://" + net.JoinHostPort(h, p)
		svc.Timeout = discoveryTimeout
		if c, err := kubernetes.NewForConfig(svc); err == nil {
			via = apiaddr.NewReader(c)
		}
	}
	res, err := apiaddr.Discover(ctx, apiaddr.Options{
		Flag: o.APIServer, Getenv: getenv, ServiceCIDRs: serviceCIDRs,
		ViaService: via, Timeout: discoveryTimeout,
	})
	if err != nil {
		return nil, err
	}
	log.Info("API server address", "host", res.Host, "source", res.Source, "skipped", res.Skipped)
	base.Host = res.Host
	return base, nil
}

// APIServerDiscoveryOrder is --apiserver's help: where the address comes
// from when it is not given.
const APIServerDiscoveryOrder = "$" + apiaddr.EnvAPIServer + ", KUBERNETES_SERVICE_HOST/PORT if not a Service IP, the kubelet's kubeconfig on the node, kube-system/kube-proxy's kubeconfig, the kubernetes EndpointSlice"
