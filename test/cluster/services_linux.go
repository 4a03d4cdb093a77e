package cluster

import (
	"context"
	"fmt"
	"net/netip"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/nodenet/nodenet/test/netnode"
)

// Namespace holds every Service the harness makes.
const Namespace = metav1.NamespaceDefault

// HTTPService is a Service named name with one TCP port "http", port
// → targetPort; opts adjust it (type, policies, affinity).
func HTTPService(name string, port, targetPort int32, opts ...func(*corev1.Service)) *corev1.Service {
	s := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: Namespace, Name: name},
		Spec: corev1.ServiceSpec{
			Type: corev1.ServiceTypeClusterIP,
			Ports: []corev1.ServicePort{{
				Name: "http", Protocol: corev1.ProtocolTCP, Port: port, TargetPort: intstr.FromInt32(targetPort),
			}},
		},
	}
	for _, o := range opts {
		o(s)
	}
	return s
}

// NodePort makes a Service type NodePort with externalTrafficPolicy
// policy; the apiserver picks the port.
func NodePort(policy corev1.ServiceExternalTrafficPolicy) func(*corev1.Service) {
	return func(s *corev1.Service) {
		s.Spec.Type = corev1.ServiceTypeNodePort
		s.Spec.ExternalTrafficPolicy = policy
	}
}

// ClientIPAffinity gives a Service ClientIP session affinity.
func ClientIPAffinity(timeoutSeconds int32) func(*corev1.Service) {
	return func(s *corev1.Service) {
		s.Spec.SessionAffinity = corev1.ServiceAffinityClientIP
		s.Spec.SessionAffinityConfig = &corev1.SessionAffinityConfig{ClientIP: &corev1.ClientIPConfig{TimeoutSeconds: &timeoutSeconds}}
	}
}

// Expose creates svc and its EndpointSlice (see SetEndpoints) and
// returns the Service as the apiserver stored it, cluster IP and node
// ports allocated.
func (c *Cluster) Expose(ctx context.Context, svc *corev1.Service, pods ...*netnode.Pod) (*corev1.Service, error) {
	created, err := c.API.Client().CoreV1().Services(svc.Namespace).Create(ctx, svc, metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("create Service %s: %w", svc.Name, err)
	}
	if err := c.SetEndpoints(ctx, created, pods...); err != nil {
		return nil, err
	}
	return created, nil
}

// SetEndpoints makes svc's EndpointSlice hold pods, ready, on every port
// of svc (target ports must be numbers), each with its node's name: what
// the EndpointSlice controller, absent here, would write. It creates the
// slice or replaces its endpoints.
func (c *Cluster) SetEndpoints(ctx context.Context, svc *corev1.Service, pods ...*netnode.Pod) error {
	want := endpointSlice(svc, pods)
	slices := c.API.Client().DiscoveryV1().EndpointSlices(svc.Namespace)
	got, err := slices.Get(ctx, want.Name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		_, err = slices.Create(ctx, want, metav1.CreateOptions{})
	case err == nil:
		got.Endpoints, got.Ports = want.Endpoints, want.Ports
		_, err = slices.Update(ctx, got, metav1.UpdateOptions{})
	}
	if err != nil {
		return fmt.Errorf("EndpointSlice of %s: %w", svc.Name, err)
	}
	return nil
}

// Delete removes svc and its EndpointSlice.
func (c *Cluster) Delete(ctx context.Context, svc *corev1.Service) error {
	client := c.API.Client()
	if err := client.DiscoveryV1().EndpointSlices(svc.Namespace).Delete(ctx, sliceName(svc), metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	if err := client.CoreV1().Services(svc.Namespace).Delete(ctx, svc.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	return nil
}

func sliceName(svc *corev1.Service) string { return svc.Name + "-nodenet" }

func endpointSlice(svc *corev1.Service, pods []*netnode.Pod) *discoveryv1.EndpointSlice {
	es := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: svc.Namespace,
			Name:      sliceName(svc),
			Labels: map[string]string{
				discoveryv1.LabelServiceName: svc.Name,
				discoveryv1.LabelManagedBy:   "nodenet-test-cluster",
			},
		},
		AddressType: discoveryv1.AddressTypeIPv4,
	}
	for _, sp := range svc.Spec.Ports {
		es.Ports = append(es.Ports, discoveryv1.EndpointPort{Name: &sp.Name, Protocol: &sp.Protocol, Port: &sp.TargetPort.IntVal})
	}
	for _, p := range pods {
		ready, serving, terminating := true, true, false
		node := p.Node.Name
		es.Endpoints = append(es.Endpoints, discoveryv1.Endpoint{
			Addresses:  []string{p.IP.String()},
			Conditions: discoveryv1.EndpointConditions{Ready: &ready, Serving: &serving, Terminating: &terminating},
			NodeName:   &node,
			TargetRef:  &corev1.ObjectReference{Kind: "Pod", Namespace: svc.Namespace, Name: p.Name},
		})
	}
	return es
}

// ClusterIP is svc's first port on its cluster IP.
func ClusterIP(svc *corev1.Service) netip.AddrPort {
	return AddrPort(svc.Spec.ClusterIP, svc.Spec.Ports[0].Port)
}

// NodePortOn is svc's first node port on n's address.
func NodePortOn(n *Node, svc *corev1.Service) netip.AddrPort {
	return netip.AddrPortFrom(n.IP, uint16(svc.Spec.Ports[0].NodePort))
}
