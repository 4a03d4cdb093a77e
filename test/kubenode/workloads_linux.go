package kubenode

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/nodenet/nodenet/test/netnode"
)

// NetexecPort is where NetexecPod's agnhost netexec serves HTTP.
const NetexecPort = 8080

// ImageRef returns the imported image whose reference contains name
// (agnhost, busybox, pause), or "".
func (c *Cluster) ImageRef(name string) string {
	for _, im := range c.Images {
		if strings.Contains(im.Ref, "/"+name+":") {
			return im.Ref
		}
	}
	return ""
}

// NetexecPod is a pod running agnhost netexec (HTTP on NetexecPort:
// /hostname answers the pod's name, /dial makes the pod itself call
// another address) on the node called node, labelled labels.
func (c *Cluster) NetexecPod(name, node string, labels map[string]string) *corev1.Pod {
	zero := int64(0)
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", Labels: labels},
		Spec: corev1.PodSpec{
			NodeSelector:                  map[string]string{corev1.LabelHostname: node},
			TerminationGracePeriodSeconds: &zero,
			Containers: []corev1.Container{{
				Name:            "netexec",
				Image:           c.ImageRef("agnhost"),
				ImagePullPolicy: corev1.PullNever,
				Args:            []string{"netexec", "--http-port=" + strconv.Itoa(NetexecPort), "--udp-port=-1"},
				Ports:           []corev1.ContainerPort{{ContainerPort: NetexecPort}},
			}},
		},
	}
}

// RunPod creates pod and waits until it runs with an IP.
func (c *Cluster) RunPod(ctx context.Context, pod *corev1.Pod) (*corev1.Pod, error) {
	if _, err := c.Client.CoreV1().Pods(pod.Namespace).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		return nil, fmt.Errorf("create pod %s: %w", pod.Name, err)
	}
	return c.WaitRunning(ctx, pod.Namespace, pod.Name)
}

// WaitRunning waits until the pod is Running and Ready with an IP.
func (c *Cluster) WaitRunning(ctx context.Context, ns, name string) (*corev1.Pod, error) {
	var got *corev1.Pod
	err := c.poll(ctx, "pod "+name+" running", func(ctx context.Context) error {
		p, err := c.Client.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if p.Status.Phase != corev1.PodRunning || p.Status.PodIP == "" {
			return fmt.Errorf("pod %s is %s (%s)", name, p.Status.Phase, podWhy(p))
		}
		for _, cond := range p.Status.Conditions {
			if cond.Type == corev1.PodReady && cond.Status != corev1.ConditionTrue {
				return fmt.Errorf("pod %s not ready", name)
			}
		}
		got = p
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("%w; events: %s", err, c.events(ctx, ns, name))
	}
	return got, nil
}

// events lists the events about an object, for failure messages.
func (c *Cluster) events(ctx context.Context, ns, name string) string {
	list, err := c.Client.CoreV1().Events(ns).List(context.WithoutCancel(ctx), metav1.ListOptions{
		FieldSelector: "involvedObject.name=" + name,
	})
	if err != nil {
		return err.Error()
	}
	var out []string
	for _, e := range list.Items {
		out = append(out, e.Reason+": "+e.Message)
	}
	return strings.Join(out, " | ")
}

// HTTPService is a Service of type typ selecting labels, port 80 to
// NetexecPort.
func HTTPService(name string, typ corev1.ServiceType, labels map[string]string) *corev1.Service {
	return &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec: corev1.ServiceSpec{
			Type:     typ,
			Selector: labels,
			Ports: []corev1.ServicePort{{
				Name: "http", Protocol: corev1.ProtocolTCP, Port: 80,
				TargetPort: intstr.FromInt32(NetexecPort),
			}},
		},
	}
}

// HTTPGet GETs path from dst over a new connection opened inside from
// (nil: the root namespace, the underlay's outside) and returns the body.
func HTTPGet(ctx context.Context, from *netnode.NS, dst netip.AddrPort, path string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	tr := netnode.HTTPTransport(from, dst)
	defer tr.CloseIdleConnections()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+dst.String()+path, nil)
	if err != nil {
		return "", err
	}
	resp, err := (&http.Client{Transport: tr}).Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if err != nil {
		return "", err
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("GET %s%s: %s: %s", dst, path, resp.Status, body)
	}
	return strings.TrimSpace(string(body)), nil
}

// DialFromPod asks the netexec pod at client (reached from the node
// namespace from) to GET /hostname from dst itself, and returns what
// answered: traffic from inside a pod, through its own netns.
func DialFromPod(ctx context.Context, from *netnode.NS, client netip.Addr, dst netip.AddrPort) (string, error) {
	q := url.Values{
		"request": {"hostname"}, "protocol": {"http"}, "tries": {"1"},
		"host": {dst.Addr().String()}, "port": {strconv.Itoa(int(dst.Port()))},
	}
	body, err := HTTPGet(ctx, from, netip.AddrPortFrom(client, NetexecPort), "/dial?"+q.Encode())
	if err != nil {
		return "", err
	}
	var out struct {
		Responses []string `json:"responses"`
		Errors    []string `json:"errors"`
	}
	if err := json.Unmarshal([]byte(body), &out); err != nil {
		return "", fmt.Errorf("dial answer %q: %w", body, err)
	}
	if len(out.Responses) != 1 {
		return "", fmt.Errorf("pod %s dialing %s: %v", client, dst, out.Errors)
	}
	return out.Responses[0], nil
}

// Eventually retries check until it succeeds within Converge.
func Eventually(ctx context.Context, check func(context.Context) error) error {
	return netnode.Eventually(ctx, Converge, check)
}

// AllocatedIPs lists the addresses the node's agent has allocated: the
// IPAM store's files under its CNI data dir, one per allocation.
func (n *Node) AllocatedIPs() ([]netip.Addr, error) {
	var out []netip.Addr
	err := filepath.WalkDir(n.CNIDataDir, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		if ip, err := netip.ParseAddr(d.Name()); err == nil {
			out = append(out, ip)
		}
		return nil
	})
	return out, err
}

// CNIVerbs counts the CNI requests the node's agent served, by command
// (ADD, DEL, CHECK, GC, STATUS), from its log (--v=2 logs one line per
// request).
func (n *Node) CNIVerbs() (map[string]int, error) {
	data, err := n.agentLog()
	if err != nil {
		return nil, err
	}
	counts := map[string]int{}
	for _, line := range strings.Split(data, "\n") {
		if !strings.Contains(line, "CNI request") {
			continue
		}
		_, rest, ok := strings.Cut(line, `command="`)
		if !ok {
			continue
		}
		verb, _, _ := strings.Cut(rest, `"`)
		counts[verb]++
	}
	return counts, nil
}

// PausePod is the lightest pod: the pause image, on node.
func (c *Cluster) PausePod(name, node string) *corev1.Pod {
	zero := int64(0)
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec: corev1.PodSpec{
			NodeSelector:                  map[string]string{corev1.LabelHostname: node},
			TerminationGracePeriodSeconds: &zero,
			Containers: []corev1.Container{{
				Name: "pause", Image: c.Pause, ImagePullPolicy: corev1.PullNever,
			}},
		},
	}
}

// SandboxNetns is the network namespace path containerd gave the pod's
// sandbox (crictl inspectp's runtime spec).
func (n *Node) SandboxNetns(ctx context.Context, pod *corev1.Pod) (string, error) {
	id, err := n.Crictl(ctx, "pods", "-q", "--name", pod.Name, "--namespace", pod.Namespace)
	if err != nil {
		return "", err
	}
	id = strings.TrimSpace(id)
	if id == "" || strings.Contains(id, "\n") {
		return "", fmt.Errorf("want one sandbox for %s, got %q", pod.Name, id)
	}
	out, err := n.Crictl(ctx, "inspectp", id)
	if err != nil {
		return "", err
	}
	var v struct {
		Info struct {
			RuntimeSpec struct {
				Linux struct {
					Namespaces []struct {
						Type string `json:"type"`
						Path string `json:"path"`
					} `json:"namespaces"`
				} `json:"linux"`
			} `json:"runtimeSpec"`
		} `json:"info"`
	}
	if err := json.Unmarshal([]byte(out), &v); err != nil {
		return "", fmt.Errorf("crictl inspectp %s: %w", id, err)
	}
	for _, ns := range v.Info.RuntimeSpec.Linux.Namespaces {
		if ns.Type == "network" && ns.Path != "" {
			return ns.Path, nil
		}
	}
	return "", fmt.Errorf("sandbox %s has no network namespace path", id)
}
