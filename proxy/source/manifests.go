package source

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"regexp"
	"strconv"
	"strings"

	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/klog/v2"
	kjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"
)

// objectKind orders deliveries: the Node first (its zone decides topology),
// then Services, then their EndpointSlices. Pods are never delivered to
// the proxy: they stand for the pods CNI wires on a node (Folder.Pods).
type objectKind int

const (
	kindNode objectKind = iota
	kindService
	kindSlice
	kindPod
)

func (k objectKind) String() string {
	return [...]string{"Node", "Service", "EndpointSlice", "Pod"}[k]
}

// objectKey identifies an object the way the API server does.
type objectKey struct {
	kind      objectKind
	namespace string
	name      string
}

func (k objectKey) String() string {
	if k.namespace == "" {
		return k.kind.String() + " " + k.name
	}
	return k.kind.String() + " " + k.namespace + "/" + k.name
}

func (k objectKey) compare(o objectKey) int {
	switch {
	case k.kind != o.kind:
		return int(k.kind) - int(o.kind)
	case k.namespace != o.namespace:
		return strings.Compare(k.namespace, o.namespace)
	default:
		return strings.Compare(k.name, o.name)
	}
}

// object is one manifest object, ready to deliver.
type object struct {
	key objectKey
	// obj is a *v1.Service, *discoveryv1.EndpointSlice, *v1.Node or
	// *v1.Pod.
	obj any
	// rv is its resourceVersion: a hash of its content.
	rv string
	// where is "file:line" (plus the item of a List) for logs.
	where string
	// file and index place it in the folder: the file's name and the
	// object's position in it. The checks across objects go in this
	// order, so the first of two conflicting objects wins.
	file  string
	index int
}

// before orders objects by where they are in the folder.
func (o object) before(p object) int {
	if c := strings.Compare(o.file, p.file); c != 0 {
		return c
	}
	return o.index - p.index
}

// manifest reads one manifest file: every document, and every item of a
// List. A document or item with an error is reported and skipped; the
// file's other objects are still read. Objects of kinds nodenet does not
// read are skipped.
type manifest struct {
	file string
	log  klog.Logger
}

func (m manifest) parse(data []byte) ([]object, error) {
	var objects []object
	var errs []error
	for _, doc := range splitDocuments(data) {
		j, err := yaml.YAMLToJSONStrict(doc.text)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %s", m.file, shiftLines(err.Error(), doc.line-1)))
			continue
		}
		if string(j) == "null" { // only comments, or nothing
			continue
		}
		where := fmt.Sprintf("%s:%d", m.file, doc.line)
		var tm metav1.TypeMeta
		if err := json.Unmarshal(j, &tm); err != nil {
			errs = append(errs, fmt.Errorf("%s: not a Kubernetes object: %w", where, err))
			continue
		}
		if tm.Kind != "List" {
			if o, ok, err := m.decode(j, where); err != nil {
				errs = append(errs, err)
			} else if ok {
				objects = append(objects, o)
			}
			continue
		}
		var list struct {
			Items []json.RawMessage `json:"items"`
		}
		if err := json.Unmarshal(j, &list); err != nil {
			errs = append(errs, fmt.Errorf("%s: List: %w", where, err))
			continue
		}
		for i, item := range list.Items {
			if o, ok, err := m.decode(item, fmt.Sprintf("%s (List item %d)", where, i)); err != nil {
				errs = append(errs, err)
			} else if ok {
				objects = append(objects, o)
			}
		}
	}
	for i := range objects {
		objects[i].file, objects[i].index = m.file, i
	}
	return objects, errors.Join(errs...)
}

// decode reads one object; ok is false for objects nodenet skips.
func (m manifest) decode(data []byte, where string) (o object, ok bool, err error) {
	head, ok, err := m.readHead(data, where)
	if !ok {
		return object{}, false, err
	}
	what := head.what()
	var meta *metav1.ObjectMeta
	switch head.Kind {
	case "Service":
		svc, err := m.decodeService(data, where, what)
		if svc == nil {
			return object{}, false, err
		}
		o.obj, meta, o.key.kind = svc, &svc.ObjectMeta, kindService
	case "EndpointSlice":
		slice, err := m.decodeSlice(data, where, what)
		if slice == nil {
			return object{}, false, err
		}
		o.obj, meta, o.key.kind = slice, &slice.ObjectMeta, kindSlice
	case "Node":
		node, err := m.decodeNode(data, where, what)
		if node == nil {
			return object{}, false, err
		}
		o.obj, meta, o.key.kind = node, &node.ObjectMeta, kindNode
	case "Pod":
		pod, err := m.decodePod(data, where, what)
		if pod == nil {
			return object{}, false, err
		}
		o.obj, meta, o.key.kind = pod, &pod.ObjectMeta, kindPod
	}
	if err := identify(&o, meta); err != nil {
		return object{}, false, fmt.Errorf("%s: %s: %w", where, what, err)
	}
	o.where = where
	return o, true, nil
}

// manifestHead is what decode reads of an object before its kind.
type manifestHead struct {
	metav1.TypeMeta
	Metadata struct {
		Name      string `json:"name"`
		Namespace string `json:"namespace"`
	} `json:"metadata"`
}

// what names the object in errors.
func (h manifestHead) what() string { return strings.TrimSpace(h.Kind + " " + h.Metadata.Name) }

// readHead reads an object's kind, apiVersion and name, and checks them;
// ok is false for an error, or for a kind the proxy does not read.
func (m manifest) readHead(data []byte, where string) (head manifestHead, ok bool, err error) {
	if err := json.Unmarshal(data, &head); err != nil {
		return head, false, fmt.Errorf("%s: not a Kubernetes object: %w", where, err)
	}
	wantVersion := map[string]string{"Service": "v1", "Node": "v1", "Pod": "v1", "EndpointSlice": discoveryv1.SchemeGroupVersion.String()}[head.Kind]
	switch {
	case head.Kind == "":
		return head, false, fmt.Errorf("%s: no kind", where)
	case wantVersion == "":
		m.log.V(2).Info("Ignoring an object nodenet does not read", "at", where, "apiVersion", head.APIVersion, "kind", head.Kind, "name", head.Metadata.Name)
		return head, false, nil
	case head.APIVersion != wantVersion:
		return head, false, fmt.Errorf("%s: %s: apiVersion %q, want %q", where, head.what(), head.APIVersion, wantVersion)
	case head.Metadata.Name == "":
		return head, false, fmt.Errorf("%s: %s: no metadata.name", where, head.Kind)
	}
	return head, true, nil
}

// decodeService reads a Service, defaulted; nil for one the proxy skips
// or an error.
func (m manifest) decodeService(data []byte, where, what string) (*v1.Service, error) {
	svc := &v1.Service{}
	if err := strictUnmarshal(data, svc); err != nil {
		return nil, fmt.Errorf("%s: %s: %w", where, what, err)
	}
	if !wantService(svc) {
		m.log.V(2).Info("Skipping a Service the proxy does not serve (headless, or another proxy's)", "at", where, "service", svc.Name)
		return nil, nil
	}
	defaultService(svc)
	return svc, nil
}

// decodeSlice reads an EndpointSlice, defaulted; nil for one the proxy
// skips or an error.
func (m manifest) decodeSlice(data []byte, where, what string) (*discoveryv1.EndpointSlice, error) {
	slice := &discoveryv1.EndpointSlice{}
	if err := strictUnmarshal(data, slice); err != nil {
		return nil, fmt.Errorf("%s: %s: %w", where, what, err)
	}
	if slice.AddressType == "" {
		return nil, fmt.Errorf("%s: %s: no addressType", where, what)
	}
	if !wantSlice(slice) {
		m.log.V(2).Info("Skipping an EndpointSlice of a headless Service", "at", where, "endpointSlice", slice.Name)
		return nil, nil
	}
	if slice.Labels[discoveryv1.LabelServiceName] == "" {
		m.log.Info("EndpointSlice has no "+discoveryv1.LabelServiceName+" label: no Service will use it", "at", where, "endpointSlice", slice.Name)
	}
	defaultSlice(slice)
	return slice, nil
}

// decodeNode reads a Node, this node's or another's (the proxy gets only
// this node's; the network part, reading Nodes from a folder, all).
func (m manifest) decodeNode(data []byte, where, what string) (*v1.Node, error) {
	node := &v1.Node{}
	if err := strictUnmarshal(data, node); err != nil {
		return nil, fmt.Errorf("%s: %s: %w", where, what, err)
	}
	return node, nil
}

// decodePod reads a Pod that runs somewhere: nil for one without a
// nodeName or a pod IP (not scheduled or not started: CNI has not wired
// it), or an error.
func (m manifest) decodePod(data []byte, where, what string) (*v1.Pod, error) {
	pod := &v1.Pod{}
	if err := strictUnmarshal(data, pod); err != nil {
		return nil, fmt.Errorf("%s: %s: %w", where, what, err)
	}
	if pod.Spec.NodeName == "" || (pod.Status.PodIP == "" && len(pod.Status.PodIPs) == 0) {
		m.log.V(2).Info("Skipping a Pod without spec.nodeName and status.podIP: no pod network to wire yet", "at", where, "pod", pod.Name)
		return nil, nil
	}
	if pod.Status.PodIP == "" {
		pod.Status.PodIP = pod.Status.PodIPs[0].IP
	}
	if len(pod.Status.PodIPs) == 0 {
		pod.Status.PodIPs = []v1.PodIP{{IP: pod.Status.PodIP}}
	}
	return pod, nil
}

// identify completes o's key (a Node has no namespace; other objects
// default to "default") and sets the UID and resourceVersion the proxy
// tells objects and their versions apart by. A manifest's are derived
// from what it says, so the same content always gets the same ones and an
// edit is always a new version.
func identify(o *object, meta *metav1.ObjectMeta) error {
	if o.key.kind == kindNode {
		meta.Namespace = ""
	} else if meta.Namespace == "" {
		meta.Namespace = metav1.NamespaceDefault
	}
	o.key.namespace, o.key.name = meta.Namespace, meta.Name
	if meta.UID == "" {
		meta.UID = syntheticUID(o.key)
	}
	meta.ResourceVersion = ""
	content, err := json.Marshal(o.obj)
	if err != nil {
		return err
	}
	sum := sha256.Sum256(content)
	meta.ResourceVersion = strconv.FormatUint(binary.BigEndian.Uint64(sum[:8])>>1, 10)
	o.rv = meta.ResourceVersion
	return nil
}

// strictUnmarshal rejects unknown and duplicate fields, as kubectl's
// strict validation does: a misspelt field would otherwise be dropped
// silently.
func strictUnmarshal(data []byte, into any) error {
	strict, err := kjson.UnmarshalStrict(data, into)
	if err != nil {
		return err
	}
	return errors.Join(strict...)
}

func syntheticUID(key objectKey) types.UID {
	sum := sha256.Sum256([]byte("nodenet.io/source-files/" + key.String()))
	// Shaped like a version-4 UUID.
	sum[6] = sum[6]&0x0f | 0x40
	sum[8] = sum[8]&0x3f | 0x80
	return types.UID(fmt.Sprintf("%x-%x-%x-%x-%x", sum[0:4], sum[4:6], sum[6:8], sum[8:10], sum[10:16]))
}

// document is one YAML document of a file and the line it starts on.
type document struct {
	text []byte
	line int
}

// splitDocuments splits a YAML stream at its "---" lines.
func splitDocuments(data []byte) []document {
	var docs []document
	start, startLine, line := 0, 1, 1
	for pos := 0; pos < len(data); line++ {
		end := len(data)
		if i := bytes.IndexByte(data[pos:], '\n'); i >= 0 {
			end = pos + i + 1
		}
		text := bytes.TrimRight(data[pos:end], "\r\n")
		if string(text) == "---" || bytes.HasPrefix(text, []byte("--- ")) || bytes.HasPrefix(text, []byte("---\t")) {
			docs = append(docs, document{text: data[start:pos], line: startLine})
			start, startLine = end, line+1
		}
		pos = end
	}
	return append(docs, document{text: data[start:], line: startLine})
}

var lineRE = regexp.MustCompile(`\bline (\d+)`)

// shiftLines turns a YAML parser's "line N" within a document into the
// file's line.
func shiftLines(msg string, offset int) string {
	return lineRE.ReplaceAllStringFunc(msg, func(s string) string {
		n, err := strconv.Atoi(strings.TrimPrefix(s, "line "))
		if err != nil {
			return s
		}
		return "line " + strconv.Itoa(n+offset)
	})
}

// defaultService applies the API server's defaults the proxy relies on,
// so a short manifest means what it would mean in a cluster.
func defaultService(svc *v1.Service) {
	spec := &svc.Spec
	if spec.Type == "" {
		spec.Type = v1.ServiceTypeClusterIP
	}
	if spec.SessionAffinity == "" {
		spec.SessionAffinity = v1.ServiceAffinityNone
	}
	if spec.SessionAffinity == v1.ServiceAffinityClientIP {
		if spec.SessionAffinityConfig == nil {
			spec.SessionAffinityConfig = &v1.SessionAffinityConfig{}
		}
		if spec.SessionAffinityConfig.ClientIP == nil {
			spec.SessionAffinityConfig.ClientIP = &v1.ClientIPConfig{}
		}
		if spec.SessionAffinityConfig.ClientIP.TimeoutSeconds == nil {
			timeout := v1.DefaultClientIPServiceAffinitySeconds
			spec.SessionAffinityConfig.ClientIP.TimeoutSeconds = &timeout
		}
	}
	for i := range spec.Ports {
		p := &spec.Ports[i]
		if p.Protocol == "" {
			p.Protocol = v1.ProtocolTCP
		}
		if p.TargetPort == (intstr.IntOrString{}) {
			p.TargetPort = intstr.FromInt32(p.Port)
		}
	}
	if spec.Type == v1.ServiceTypeExternalName {
		return
	}
	switch {
	case len(spec.ClusterIPs) == 0 && spec.ClusterIP != "":
		spec.ClusterIPs = []string{spec.ClusterIP}
	case spec.ClusterIP == "" && len(spec.ClusterIPs) > 0:
		spec.ClusterIP = spec.ClusterIPs[0]
	}
	if len(spec.IPFamilies) == 0 {
		for _, ip := range spec.ClusterIPs {
			if addr, err := netip.ParseAddr(ip); err == nil {
				if addr.Unmap().Is4() {
					spec.IPFamilies = append(spec.IPFamilies, v1.IPv4Protocol)
				} else {
					spec.IPFamilies = append(spec.IPFamilies, v1.IPv6Protocol)
				}
			}
		}
	}
	if spec.IPFamilyPolicy == nil && len(spec.IPFamilies) > 0 {
		policy := v1.IPFamilyPolicySingleStack
		if len(spec.IPFamilies) > 1 {
			policy = v1.IPFamilyPolicyRequireDualStack
		}
		spec.IPFamilyPolicy = &policy
	}
	if spec.InternalTrafficPolicy == nil {
		policy := v1.ServiceInternalTrafficPolicyCluster
		spec.InternalTrafficPolicy = &policy
	}
	if spec.ExternalTrafficPolicy == "" && (spec.Type == v1.ServiceTypeNodePort || spec.Type == v1.ServiceTypeLoadBalancer) {
		spec.ExternalTrafficPolicy = v1.ServiceExternalTrafficPolicyCluster
	}
}

// defaultSlice applies the API server's EndpointSlice port defaults.
func defaultSlice(slice *discoveryv1.EndpointSlice) {
	for i := range slice.Ports {
		p := &slice.Ports[i]
		if p.Name == nil {
			name := ""
			p.Name = &name
		}
		if p.Protocol == nil {
			tcp := v1.ProtocolTCP
			p.Protocol = &tcp
		}
	}
}
