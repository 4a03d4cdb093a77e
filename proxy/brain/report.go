package brain

import (
	"fmt"
	"sort"
	"strings"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/klog/v2"
)

const (
	kindService = "Service"
	kindSlice   = "EndpointSlice"

	// Event reasons.
	reasonInvalidService = "InvalidServiceForProxy"
	reasonInvalidSlice   = "InvalidEndpointSliceForProxy"
)

// object is what a problem is reported on.
type object interface {
	metav1.Object
	runtime.Object
}

// reportKey names an object in Brain.reported: by UID, or by name for
// objects without one (manifests read from files).
func reportKey(kind string, o metav1.Object) string {
	if uid := o.GetUID(); uid != "" {
		return kind + "/" + string(uid)
	}
	return kind + "/" + o.GetNamespace() + "/" + o.GetName()
}

// familyKey is where a service's "family dropped" log is remembered.
func familyKey(o metav1.Object) string { return "family:" + reportKey(kindService, o) }

// problems collects, during one Snapshot, what was skipped in each object.
type problems struct {
	byKey map[string]*objectProblems
	// dropped are services that have a cluster IP of a family this node
	// doesn't run.
	dropped map[string]droppedFamilies
}

type objectProblems struct {
	kind    string
	obj     object
	reasons []string
}

type droppedFamilies struct {
	svc      *v1.Service
	families []string
}

// add records that a piece of obj was skipped and why.
func (p *problems) add(kind string, obj object, format string, args ...any) {
	if p.byKey == nil {
		p.byKey = map[string]*objectProblems{}
	}
	key := reportKey(kind, obj)
	op := p.byKey[key]
	if op == nil {
		op = &objectProblems{kind: kind, obj: obj}
		p.byKey[key] = op
	}
	reason := fmt.Sprintf(format, args...)
	for _, r := range op.reasons {
		if r == reason {
			return
		}
	}
	op.reasons = append(op.reasons, reason)
}

func (p *problems) dropFamily(svc *v1.Service, family string) {
	if p.dropped == nil {
		p.dropped = map[string]droppedFamilies{}
	}
	key := familyKey(svc)
	d := p.dropped[key]
	d.svc = svc
	d.families = append(d.families, family)
	p.dropped[key] = d
}

// maxEventReasons bounds an event's message; the log has them all.
const maxEventReasons = 5

// flush logs and records what p collected, once per object generation;
// b.snapMu is held.
func (b *Brain) flush(p *problems) {
	keys := make([]string, 0, len(p.byKey))
	for k := range p.byKey {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, key := range keys {
		op := p.byKey[key]
		seen := op.obj.GetResourceVersion() + "\x00" + strings.Join(op.reasons, "\x00")
		if b.reported[key] == seen {
			continue
		}
		b.reported[key] = seen
		b.log.Info("Ignoring invalid parts of an object", "kind", op.kind, "object", klog.KObj(op.obj), "resourceVersion", op.obj.GetResourceVersion(), "reasons", op.reasons)
		if b.opts.Recorder == nil {
			continue
		}
		reasons := op.reasons
		more := ""
		if len(reasons) > maxEventReasons {
			more = fmt.Sprintf(" (and %d more)", len(reasons)-maxEventReasons)
			reasons = reasons[:maxEventReasons]
		}
		reason := reasonInvalidService
		if op.kind == kindSlice {
			reason = reasonInvalidSlice
		}
		b.opts.Recorder.Eventf(op.obj, v1.EventTypeWarning, reason, "nodenet proxy ignored: %s%s", strings.Join(reasons, "; "), more)
	}
	for key, d := range p.dropped {
		if b.reported[key] == d.svc.ResourceVersion {
			continue
		}
		b.reported[key] = d.svc.ResourceVersion
		b.log.V(2).Info("Ignoring service IP families this node doesn't run", "service", klog.KObj(d.svc), "families", d.families)
	}
}

// forgetReports drops what was remembered about deleted objects; b.snapMu
// is held.
func (b *Brain) forgetReports(keys []string) {
	for _, k := range keys {
		delete(b.reported, k)
	}
}
