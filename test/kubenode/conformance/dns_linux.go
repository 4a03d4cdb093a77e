package main

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/nodenet/nodenet/test/cluster"
	"github.com/nodenet/nodenet/test/kubenode"
)

// startCoreDNS runs CoreDNS as a process in the first node's namespace
// (as a hostNetwork pod would run), serving cluster.local from the API,
// and publishes it as Service kube-system/kube-dns on kubelet's
// clusterDNS address with an EndpointSlice naming the node: pods reach it
// through nodenet's service proxy, as they reach a CoreDNS Deployment.
func startCoreDNS(p *cluster.Program, c *kubenode.Cluster, bin string) error {
	n := c.Nodes[0]
	corefile := filepath.Join(n.Dir, "Corefile")
	conf := fmt.Sprintf(`.:53 {
    errors
    health 127.0.0.1:18080
    ready 127.0.0.1:18181
    kubernetes cluster.local in-addr.arpa ip6.arpa {
        kubeconfig %s
        pods insecure
        fallthrough in-addr.arpa ip6.arpa
        ttl 30
    }
    cache 30
}
`, c.Kubeconfig)
	if err := os.WriteFile(corefile, []byte(conf), 0o644); err != nil {
		return err
	}
	n.StartProcess(p, "coredns", bin, "-conf", corefile)

	ctx := p.Context()
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "kube-dns", Namespace: "kube-system", Labels: map[string]string{"k8s-app": "kube-dns"}},
		Spec: corev1.ServiceSpec{
			ClusterIP: kubenode.DNSServiceIP,
			Ports: []corev1.ServicePort{
				{Name: "dns", Protocol: corev1.ProtocolUDP, Port: 53, TargetPort: intstr.FromInt32(53)},
				{Name: "dns-tcp", Protocol: corev1.ProtocolTCP, Port: 53, TargetPort: intstr.FromInt32(53)},
			},
		},
	}
	if _, err := c.Client.CoreV1().Services("kube-system").Create(ctx, svc, metav1.CreateOptions{}); err != nil {
		return err
	}
	slice := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Name: "kube-dns-coredns", Namespace: "kube-system", Labels: map[string]string{
			discoveryv1.LabelServiceName: "kube-dns",
			discoveryv1.LabelManagedBy:   "nodenet-conformance",
		}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints: []discoveryv1.Endpoint{{
			Addresses:  []string{n.IP.String()},
			Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)},
			NodeName:   ptr.To(n.Name),
		}},
		Ports: []discoveryv1.EndpointPort{
			{Name: ptr.To("dns"), Protocol: ptr.To(corev1.ProtocolUDP), Port: ptr.To[int32](53)},
			{Name: ptr.To("dns-tcp"), Protocol: ptr.To(corev1.ProtocolTCP), Port: ptr.To[int32](53)},
		},
	}
	if _, err := c.Client.DiscoveryV1().EndpointSlices("kube-system").Create(ctx, slice, metav1.CreateOptions{}); err != nil {
		return err
	}
	// Ready once it has synced with the API (the ready plugin).
	wctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	for {
		if _, err := kubenode.HTTPGet(wctx, n.NS, netip.MustParseAddrPort("127.0.0.1:18181"), "/ready"); err == nil {
			return nil
		}
		select {
		case <-wctx.Done():
			return fmt.Errorf("CoreDNS not ready within a minute; see %s", filepath.Join(n.Dir, "coredns.log"))
		case <-time.After(time.Second):
		}
	}
}
