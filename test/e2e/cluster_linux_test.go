package e2e

// Address plan: see network_linux_test.go.

import (
	"context"
	"fmt"
	"net/netip"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodenet/nodenet/test/apiserver"
	"github.com/nodenet/nodenet/test/netnode"
)

const (
	clusterCIDR = "10.244.0.0/16"
	serviceCIDR = "10.96.0.0/12"
	// converge bounds every wait for the cluster to settle (routes
	// programmed, a restarted agent ready); nothing asserts on speed.
	converge = 30 * time.Second
	// testAnnotation is on every Node from creation: flanneld crashes on a
	// Node whose annotations map is nil.
	testAnnotation = "nodenet.io/e2e"
)

// cluster is the underlay with its node namespaces and an apiserver on the
// host's underlay address, holding one Node object per node.
type cluster struct {
	env *netnode.Env
	api *apiserver.Server
}

// newCluster makes the nodes named in names; the i-th (from 1) gets pod
// CIDR 10.244.i.0/24 and its eth0 address as InternalIP.
func newCluster(t *testing.T, names ...string) *cluster {
	t.Helper()
	env := netnode.New(t, netnode.Options{Nodes: names})
	api := apiserver.StartForTest(t, apiserver.Options{BindAddress: env.HostIP.String()})
	c := &cluster{env: env, api: api}
	for i, n := range env.Nodes {
		c.createNode(t, n, podCIDR(i+1))
	}
	return c
}

func podCIDR(i int) netip.Prefix {
	return netip.PrefixFrom(netip.AddrFrom4([4]byte{10, 244, byte(i), 0}), 24)
}

func (c *cluster) createNode(t *testing.T, n *netnode.Node, cidr netip.Prefix) {
	t.Helper()
	node := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name:        n.Name,
			Labels:      map[string]string{corev1.LabelHostname: n.Name},
			Annotations: map[string]string{testAnnotation: "true"},
		},
		Spec: corev1.NodeSpec{PodCIDR: cidr.String(), PodCIDRs: []string{cidr.String()}},
		Status: corev1.NodeStatus{
			Addresses: []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: n.IP.String()}},
		},
	}
	if _, err := c.api.Client().CoreV1().Nodes().Create(t.Context(), node, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create Node %s: %v", n.Name, err)
	}
}

// node returns the Node object called name.
func (c *cluster) node(ctx context.Context, name string) (*corev1.Node, error) {
	return c.api.Client().CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
}

// annotation waits until Node name carries key and returns its value.
func (c *cluster) annotation(t *testing.T, name, key string) string {
	t.Helper()
	var v string
	err := netnode.Eventually(t.Context(), converge, func(ctx context.Context) error {
		n, err := c.node(ctx, name)
		if err != nil {
			return err
		}
		var ok bool
		if v, ok = n.Annotations[key]; !ok {
			return fmt.Errorf("Node %s has no annotation %s", name, key)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// reach waits until from pings to; a route that never comes fails t.
func reach(t *testing.T, from *netnode.NS, to netip.Addr) {
	t.Helper()
	if err := netnode.Eventually(t.Context(), converge, func(ctx context.Context) error { return from.Ping(ctx, to) }); err != nil {
		t.Error(err)
	}
}
