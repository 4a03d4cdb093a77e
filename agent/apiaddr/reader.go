package apiaddr

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"

	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// kubeadm's kube-proxy ConfigMap and the key holding its kubeconfig.
const (
	kubeProxyNamespace = "kube-system"
	kubeProxyName      = "kube-proxy"
	kubeProxyKey       = "kubeconfig.conf"
)

// NewReader reads steps 3 and 4 with client (the agent's in-cluster one,
// through the kubernetes Service).
func NewReader(client kubernetes.Interface) Reader { return clientReader{client} }

type clientReader struct{ c kubernetes.Interface }

func (r clientReader) KubeProxyKubeconfig(ctx context.Context) ([]byte, error) {
	cm, err := r.c.CoreV1().ConfigMaps(kubeProxyNamespace).Get(ctx, kubeProxyName, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	data, ok := cm.Data[kubeProxyKey]
	if !ok {
		return nil, fmt.Errorf("no %s key", kubeProxyKey)
	}
	return []byte(data), nil
}

func (r clientReader) KubernetesEndpoint(ctx context.Context) (string, error) {
	slices, err := r.c.DiscoveryV1().EndpointSlices(metav1.NamespaceDefault).List(ctx, metav1.ListOptions{
		LabelSelector: discoveryv1.LabelServiceName + "=kubernetes",
	})
	if err != nil {
		return "", err
	}
	for _, s := range slices.Items {
		port := httpsPort(s.Ports)
		if port == 0 {
			continue
		}
		for _, e := range s.Endpoints {
			// Ready nil means ready (the API's documented default).
			if (e.Conditions.Ready == nil || *e.Conditions.Ready) && len(e.Addresses) > 0 {
				return "https://" + net.JoinHostPort(e.Addresses[0], strconv.Itoa(int(port))), nil
			}
		}
	}
	return "", errors.New("no ready endpoint with an https port")
}

// httpsPort is the slice's "https" port (the kubernetes Service names its
// one port so), or 0.
func httpsPort(ports []discoveryv1.EndpointPort) int32 {
	for _, p := range ports {
		if p.Name != nil && *p.Name == "https" && p.Port != nil {
			return *p.Port
		}
	}
	return 0
}
