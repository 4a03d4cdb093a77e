//go:build linux

package main

import (
	"context"
	"fmt"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

const (
	namespace = "bench"
	nodeName  = "bench-node"
	// clusterCIDR holds every endpoint (pod) IP: 4M addresses.
	clusterCIDR = "100.64.0.0/10"
	// triggerTimeAnnotation is what the EndpointSlice controller sets and
	// both proxies turn into network programming latency.
	triggerTimeAnnotation = "endpoints.kubernetes.io/last-change-trigger-time"
	// workers creating objects in parallel: enough to keep the apiserver
	// busy on two cores.
	workers = 32
)

var (
	// ClusterIPs are set explicitly, from 10.96.1.0 up, so creating 10k
	// Services never waits on the allocator; 10.96.0.1 is the kubernetes
	// Service's.
	firstClusterIP = netip.MustParseAddr("10.96.1.0")
	firstPodIP     = netip.MustParseAddr("100.64.0.10")
)

// cluster creates the benchmark's objects: Services svc-NNNNN (index i),
// each with one TCP port and one EndpointSlice of e ready endpoints on
// other nodes.
type cluster struct {
	client kubernetes.Interface
	// services is how many exist (populate's last n).
	services  int
	endpoints int
}

func newCluster(cfg *rest.Config, endpoints int) (*cluster, error) {
	cfg = rest.CopyConfig(cfg)
	cfg.QPS, cfg.Burst = 20000, 40000
	cfg.ContentType = "application/vnd.kubernetes.protobuf"
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("make client: %w", err)
	}
	return &cluster{client: client, endpoints: endpoints}, nil
}

// populate creates the namespace and this node's Node (the first time),
// then Services and EndpointSlices up to n: a scaling run grows one set
// of objects from scale to scale.
func (c *cluster) populate(ctx context.Context, n int) error {
	if c.services == 0 {
		ns := &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}
		if _, err := c.client.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("create namespace: %w", err)
		}
		if _, err := c.client.CoreV1().Nodes().Create(ctx, benchNode(), metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("create node: %w", err)
		}
	}
	from := c.services
	defer func() { c.services = max(c.services, n) }()
	var next atomic.Int64
	next.Store(int64(from))
	errs := make(chan error, workers)
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= n || ctx.Err() != nil {
					return
				}
				if err := c.createService(ctx, i, time.Now()); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return err
	}
	return ctx.Err()
}

func benchNode() *v1.Node {
	return &v1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name:   nodeName,
			Labels: map[string]string{"kubernetes.io/hostname": nodeName},
			// Agents must cope with nil maps, but flanneld does not.
			Annotations: map[string]string{"nodenet.io/bench": "proxy"},
		},
		Spec: v1.NodeSpec{PodCIDR: "100.64.0.0/24", PodCIDRs: []string{"100.64.0.0/24"}},
		Status: v1.NodeStatus{
			Addresses: []v1.NodeAddress{
				{Type: v1.NodeInternalIP, Address: nodeAddr},
				{Type: v1.NodeHostName, Address: nodeName},
			},
		},
	}
}

func serviceName(i int) string { return fmt.Sprintf("svc-%05d", i) }

// clusterIP of Service i.
func clusterIP(i int) netip.Addr { return addAddr(firstClusterIP, i) }

// endpointIP j of Service i; no two endpoints share one.
func (c *cluster) endpointIP(i, j int) netip.Addr { return addAddr(firstPodIP, i*c.endpoints+j) }

func addAddr(a netip.Addr, n int) netip.Addr {
	b := a.As4()
	v := uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3])
	v += uint32(n)
	return netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)})
}

// createService creates Service i and its EndpointSlice, stamping trigger
// as the slice's last change.
func (c *cluster) createService(ctx context.Context, i int, trigger time.Time) error {
	name := serviceName(i)
	svc := &v1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace},
		Spec: v1.ServiceSpec{
			Type:      v1.ServiceTypeClusterIP,
			ClusterIP: clusterIP(i).String(),
			Selector:  map[string]string{"app": name},
			Ports: []v1.ServicePort{{
				Name: "http", Protocol: v1.ProtocolTCP, Port: 80, TargetPort: intstr.FromInt32(8080),
			}},
		},
	}
	if _, err := c.client.CoreV1().Services(namespace).Create(ctx, svc, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("create service %s: %w", name, err)
	}
	slice := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{
			Name:      name + "-bench",
			Namespace: namespace,
			Labels: map[string]string{
				discoveryv1.LabelServiceName: name,
				discoveryv1.LabelManagedBy:   "bench.nodenet.io",
			},
			Annotations: map[string]string{triggerTimeAnnotation: trigger.UTC().Format(time.RFC3339Nano)},
		},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints:   c.sliceEndpoints(i),
		Ports: []discoveryv1.EndpointPort{{
			Name: new("http"), Protocol: new(v1.ProtocolTCP), Port: new(int32(8080)),
		}},
	}
	if _, err := c.client.DiscoveryV1().EndpointSlices(namespace).Create(ctx, slice, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("create endpointslice %s: %w", slice.Name, err)
	}
	return nil
}

// sliceEndpoints are Service i's endpoints as populate creates them.
func (c *cluster) sliceEndpoints(i int) []discoveryv1.Endpoint {
	eps := make([]discoveryv1.Endpoint, c.endpoints)
	for j := range eps {
		eps[j] = discoveryv1.Endpoint{
			Addresses:  []string{c.endpointIP(i, j).String()},
			Conditions: discoveryv1.EndpointConditions{Ready: new(true)},
			// Remote endpoints, as on a real node most are.
			NodeName: new(fmt.Sprintf("node-%d", j)),
		}
	}
	return eps
}

// extraEndpointIP is the r-th endpoint added by setExtraEndpoint, in
// 100.127.0.0/16: populate's endpoints stay below it up to 400k Services.
func extraEndpointIP(r int) netip.Addr { return addAddr(netip.MustParseAddr("100.127.0.10"), r) }

// setExtraEndpoint gives Service i's EndpointSlice one endpoint more than
// populate did (extra), or populate's endpoints again (no extra), stamping
// trigger as the change time.
func (c *cluster) setExtraEndpoint(ctx context.Context, i int, extra *netip.Addr, trigger time.Time) error {
	slices := c.client.DiscoveryV1().EndpointSlices(namespace)
	name := serviceName(i) + "-bench"
	slice, err := slices.Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("get endpointslice %s: %w", name, err)
	}
	slice.Endpoints = c.sliceEndpoints(i)
	if extra != nil {
		slice.Endpoints = append(slice.Endpoints, discoveryv1.Endpoint{
			Addresses:  []string{extra.String()},
			Conditions: discoveryv1.EndpointConditions{Ready: new(true)},
			NodeName:   new("node-extra"),
		})
	}
	slice.Annotations[triggerTimeAnnotation] = trigger.UTC().Format(time.RFC3339Nano)
	if _, err := slices.Update(ctx, slice, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("update endpointslice %s: %w", name, err)
	}
	return nil
}

// deleteService removes Service i and its EndpointSlice.
func (c *cluster) deleteService(ctx context.Context, i int) error {
	name := serviceName(i)
	if err := c.client.DiscoveryV1().EndpointSlices(namespace).Delete(ctx, name+"-bench", metav1.DeleteOptions{}); err != nil {
		return fmt.Errorf("delete endpointslice: %w", err)
	}
	if err := c.client.CoreV1().Services(namespace).Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
		return fmt.Errorf("delete service: %w", err)
	}
	return nil
}

// wantIPs lists the ClusterIPs and endpoint IPs of Services [0, n).
func (c *cluster) wantIPs(n int) (clusterIPs, endpointIPs []netip.Addr) {
	for i := range n {
		clusterIPs = append(clusterIPs, clusterIP(i))
		for j := range c.endpoints {
			endpointIPs = append(endpointIPs, c.endpointIP(i, j))
		}
	}
	return clusterIPs, endpointIPs
}
