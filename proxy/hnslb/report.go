package hnslb

import (
	"fmt"
	"sort"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"

	"github.com/nodenet/nodenet/proxy"
)

// Event reasons on a Service whose port this node cannot program as asked.
const (
	reasonSCTP         = "SCTPUnsupported"
	reasonAffinity     = "SessionAffinityUnsupported"
	reasonBackendLimit = "TooManyBackends"
	reasonNoDSR        = "DSRUnsupported"
	reasonMixedPorts   = "MixedTargetPorts"
	reasonSourceRanges = "LoadBalancerSourceRangesUnsupported"
)

// notes collects what planning one service port could not honor, one
// message per reason.
type notes struct {
	byReason map[string]note
}

type note struct{ op, msg string }

func (n *notes) add(reason, op, format string, args ...any) {
	if _, ok := n.byReason[reason]; ok {
		return
	}
	if n.byReason == nil {
		n.byReason = map[string]note{}
	}
	n.byReason[reason] = note{op: op, msg: fmt.Sprintf(format, args...)}
}

// reporter turns notes into a warning event on the Service, a log line
// and an Observe count, once per condition: a port planned again with the
// same condition (every full sync) reports nothing new.
type reporter struct {
	rec      record.EventRecorder
	observe  func(op string, err error, d time.Duration)
	log      klog.Logger
	reported map[proxy.ServicePortKey]map[string]string
	families map[proxy.ServicePortKey]bool
}

func newReporter(rec record.EventRecorder, observe func(string, error, time.Duration), log klog.Logger) *reporter {
	return &reporter{rec: rec, observe: observe, log: log,
		reported: map[proxy.ServicePortKey]map[string]string{}, families: map[proxy.ServicePortKey]bool{}}
}

func (r *reporter) begin(proxy.ServicePortKey) *notes { return &notes{} }

// end reports key's new conditions and remembers all of them.
func (r *reporter) end(key proxy.ServicePortKey, n *notes) {
	if len(n.byReason) == 0 {
		delete(r.reported, key)
		return
	}
	old := r.reported[key]
	cur := make(map[string]string, len(n.byReason))
	reasons := make([]string, 0, len(n.byReason))
	for reason := range n.byReason {
		reasons = append(reasons, reason)
	}
	sort.Strings(reasons)
	for _, reason := range reasons {
		x := n.byReason[reason]
		cur[reason] = x.msg
		if old[reason] == x.msg {
			continue
		}
		r.log.Info("Service port programmed with a limitation", "servicePort", key.String(), "reason", reason, "detail", x.msg)
		if r.observe != nil {
			r.observe(x.op, nil, 0)
		}
		if r.rec != nil {
			ref := &v1.ObjectReference{Kind: "Service", APIVersion: "v1", Namespace: key.Namespace, Name: key.Name}
			r.rec.Eventf(ref, v1.EventTypeWarning, reason, "%s (%s)", x.msg, key.ServicePortName)
		}
	}
	r.reported[key] = cur
}

// skipFamily logs once that a port's family is not served here.
func (r *reporter) skipFamily(key proxy.ServicePortKey) {
	if r.families[key] {
		return
	}
	r.families[key] = true
	r.log.V(2).Info("Ignoring a service port of an IP family this node's network does not serve", "servicePort", key.String())
}

// forget drops what was reported about a port that is gone.
func (r *reporter) forget(key proxy.ServicePortKey) {
	delete(r.reported, key)
	delete(r.families, key)
}

// forgetAllBut drops what was reported about ports st no longer has.
func (r *reporter) forgetAllBut(st *proxy.State) {
	for k := range r.reported {
		if _, ok := st.ServicePorts[k]; !ok {
			delete(r.reported, k)
		}
	}
	for k := range r.families {
		if _, ok := st.ServicePorts[k]; !ok {
			delete(r.families, k)
		}
	}
}
