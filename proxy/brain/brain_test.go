package brain

import (
	"fmt"
	"net/netip"
	"reflect"
	"sort"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"

	"github.com/nodenet/nodenet/proxy"
)

func keysOf(m map[proxy.ServicePortKey]struct{}) []string {
	out := []string{}
	for k := range m {
		out = append(out, k.String())
	}
	sort.Strings(out)
	return out
}

func bumped[T interface{ SetResourceVersion(string) }](obj T, rv string) T {
	obj.SetResourceVersion(rv)
	return obj
}

func TestIncrementalSnapshots(t *testing.T) {
	k1, k2, k3 := key("s1", "http", proxy.IPv4), key("s2", "http", proxy.IPv4), key("s3", "http", proxy.IPv4)
	tests := []struct {
		name string
		// change is applied after a first Snapshot of s1 and s2 (each
		// with one ready endpoint).
		change      func(b *Brain)
		wantChanged []string
		wantKeys    []proxy.ServicePortKey
	}{
		{
			name:        "adding a service reports only its port as changed",
			change:      func(b *Brain) { b.OnServiceUpdate(nil, service("s3", 3)) },
			wantChanged: []string{k3.String()},
			wantKeys:    []proxy.ServicePortKey{k1, k2, k3},
		},
		{
			name:        "deleting a service removes its port and reports it",
			change:      func(b *Brain) { b.OnServiceUpdate(service("s2", 2), nil) },
			wantChanged: []string{k2.String()},
			wantKeys:    []proxy.ServicePortKey{k1},
		},
		{
			name: "a slice change reports only its service's port",
			change: func(b *Brain) {
				b.OnEndpointSliceUpdate(nil, epSlice("s1", "s1-2", httpPort(80), ep("10.244.2.9", "node-b", readyCond)))
			},
			wantChanged: []string{k1.String()},
			wantKeys:    []proxy.ServicePortKey{k1, k2},
		},
		{
			name: "a Service update that changes nothing the proxy uses reports no change",
			change: func(b *Brain) {
				b.OnServiceUpdate(service("s1", 1), service("s1", 1, func(s *v1.Service) {
					s.ResourceVersion = "2"
					s.Labels = map[string]string{"app": "web"}
				}))
			},
			wantChanged: []string{},
			wantKeys:    []proxy.ServicePortKey{k1, k2},
		},
		{
			name: "a Service that another proxy claims leaves the state",
			change: func(b *Brain) {
				b.OnServiceUpdate(service("s1", 1), service("s1", 1, func(s *v1.Service) {
					s.ResourceVersion = "2"
					s.Labels = map[string]string{"service.kubernetes.io/service-proxy-name": "other"}
				}))
			},
			wantChanged: []string{k1.String()},
			wantKeys:    []proxy.ServicePortKey{k2},
		},
		{
			name: "a slice relabelled to another service leaves the first one",
			change: func(b *Brain) {
				b.OnEndpointSliceUpdate(epSlice("s1", "s1-1", httpPort(80), ep("10.244.2.1", "node-b", readyCond)),
					bumped(epSlice("s2", "s1-1", httpPort(80), ep("10.244.2.1", "node-b", readyCond)), "2"))
			},
			wantChanged: []string{k1.String(), k2.String()},
			wantKeys:    []proxy.ServicePortKey{k1, k2},
		},
		{
			name: "a slice losing its service label leaves its service",
			change: func(b *Brain) {
				s := bumped(epSlice("s1", "s1-1", httpPort(80), ep("10.244.2.1", "node-b", readyCond)), "2")
				delete(s.Labels, discoveryv1.LabelServiceName)
				b.OnEndpointSliceUpdate(epSlice("s1", "s1-1", httpPort(80), ep("10.244.2.1", "node-b", readyCond)), s)
			},
			wantChanged: []string{k1.String()},
			wantKeys:    []proxy.ServicePortKey{k1, k2},
		},
		{
			name: "an informer resync with the same resource version changes nothing",
			change: func(b *Brain) {
				b.OnServiceUpdate(service("s1", 1), service("s1", 1))
				s := epSlice("s1", "s1-1", httpPort(80), ep("10.244.2.1", "node-b", readyCond))
				b.OnEndpointSliceUpdate(s, s)
			},
			wantChanged: []string{},
			wantKeys:    []proxy.ServicePortKey{k1, k2},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := newTestBrain(t, Options{})
			for i, name := range []string{"s1", "s2"} {
				b.OnServiceUpdate(nil, service(name, i+1))
				b.OnEndpointSliceUpdate(nil, epSlice(name, name+"-1", httpPort(80), ep("10.244.2."+string(rune('1'+i)), "node-b", readyCond)))
			}
			first, _ := b.Snapshot(false)
			if !first.Full || len(first.Changed) != 2 {
				t.Errorf("first Snapshot: full %v, changed %v; want full with both ports", first.Full, keysOf(first.Changed))
			}
			tt.change(b)
			u, _ := b.Snapshot(false)
			if u.Full {
				t.Error("a partial Snapshot says it is full")
			}
			if diff := cmp.Diff(tt.wantChanged, keysOf(u.Changed)); diff != "" {
				t.Errorf("changed keys (-want +got):\n%s", diff)
			}
			var keys []proxy.ServicePortKey
			for k, sp := range u.State.ServicePorts {
				keys = append(keys, k)
				if _, changed := u.Changed[k]; !changed && first.State.ServicePorts[k] != sp {
					t.Errorf("%v did not change but its ServicePort is a new pointer", k)
				}
			}
			sort.Slice(keys, func(i, j int) bool { return keys[i].String() < keys[j].String() })
			if diff := cmp.Diff(tt.wantKeys, keys); diff != "" {
				t.Errorf("state keys (-want +got):\n%s", diff)
			}
			if reflect.ValueOf(first.State.ServicePorts).Pointer() == reflect.ValueOf(u.State.ServicePorts).Pointer() {
				t.Error("Snapshot returned the same map twice")
			}
			// A full snapshot right after finds nothing more to report.
			full, _ := b.Snapshot(true)
			if len(full.Changed) != 0 || !full.Full {
				t.Errorf("full snapshot after no change: changed %v, full %v", keysOf(full.Changed), full.Full)
			}
		})
	}
}

func TestSlicesDeletion(t *testing.T) {
	b := newTestBrain(t, Options{})
	s1 := epSlice("s", "s-1", httpPort(80), ep("10.244.2.1", "node-b", readyCond))
	s2 := epSlice("s", "s-2", httpPort(80), ep("10.244.2.2", "node-b", readyCond))
	b.OnServiceUpdate(nil, service("s", 10))
	b.OnEndpointSliceUpdate(nil, s1)
	b.OnEndpointSliceUpdate(nil, s2)
	k := key("s", "http", proxy.IPv4)
	steps := []struct {
		name   string
		change func()
		want   []string
	}{
		{name: "both slices' endpoints are merged", change: func() {}, want: []string{r1, r2}},
		{name: "deleting one slice keeps the other's endpoints", change: func() { b.OnEndpointSliceUpdate(s1, nil) }, want: []string{r2}},
		{name: "deleting the last slice leaves the port without endpoints", change: func() { b.OnEndpointSliceUpdate(s2, nil) }},
		{name: "slices that arrive before their service are used once it comes", change: func() {
			b.OnServiceUpdate(service("s", 10), nil)
			b.OnEndpointSliceUpdate(nil, s1)
			b.OnServiceUpdate(nil, service("s", 10))
		}, want: []string{r1}},
	}
	for _, st := range steps {
		t.Run(st.name, func(t *testing.T) {
			st.change()
			u, _ := b.Snapshot(false)
			sp := u.State.ServicePorts[k]
			if sp == nil {
				t.Fatal("no ServicePort")
			}
			if diff := cmp.Diff(st.want, addrs(sp.ClusterEndpoints)); diff != "" {
				t.Errorf("endpoints (-want +got):\n%s", diff)
			}
			if sp.HasEndpoints != (len(st.want) > 0) {
				t.Errorf("HasEndpoints %v with endpoints %v", sp.HasEndpoints, st.want)
			}
		})
	}
}

func TestPendingChangesAndTriggerTimes(t *testing.T) {
	calls := 0
	b := newTestBrain(t, Options{OnChange: func() { calls++ }})
	calls = 0 // the node update in newTestBrain

	trigger := func(s *discoveryv1.EndpointSlice, v string) *discoveryv1.EndpointSlice {
		s.Annotations = map[string]string{v1.EndpointsLastChangeTriggerTime: v}
		return s
	}
	now := time.Now().Add(time.Minute).UTC().Truncate(time.Second)
	b.OnServiceUpdate(nil, service("s1", 1))
	b.OnServiceUpdate(service("s1", 1), service("s1", 1, func(s *v1.Service) { s.ResourceVersion = "2" }))
	b.OnServiceUpdate(nil, service("s2", 2))
	b.OnEndpointSliceUpdate(nil, trigger(epSlice("s1", "a", httpPort(80)), now.Format(time.RFC3339)))
	b.OnEndpointSliceUpdate(nil, trigger(epSlice("s1", "b", httpPort(80)), "yesterday"))
	b.OnEndpointSliceUpdate(nil, trigger(epSlice("s2", "c", httpPort(80)), "2001-01-01T00:00:00Z"))
	b.OnEndpointSliceUpdate(trigger(epSlice("s1", "a", httpPort(80)), now.Format(time.RFC3339)), nil)

	if s, e := b.Pending(); s != 2 || e != 4 {
		t.Errorf("Pending() = %d services, %d endpoint changes; want 2, 4", s, e)
	}
	if calls != 7 {
		t.Errorf("OnChange called %d times for 7 changes", calls)
	}
	_, ch := b.Snapshot(false)
	want := Changes{ServiceChanges: 2, EndpointChanges: 4, TriggerTimes: []time.Time{now}}
	if diff := cmp.Diff(want, ch); diff != "" {
		t.Errorf("changes (-want +got):\n%s", diff)
	}
	if s, e := b.Pending(); s != 0 || e != 0 {
		t.Errorf("after Snapshot Pending() = %d, %d; want 0, 0", s, e)
	}
	_, ch = b.Snapshot(false)
	if diff := cmp.Diff(Changes{}, ch); diff != "" {
		t.Errorf("second snapshot changes (-want +got):\n%s", diff)
	}
}

func TestSyncedAndNodes(t *testing.T) {
	calls := 0
	b := New(Options{NodeName: thisNode, OnChange: func() { calls++ }})
	if b.Synced() {
		t.Error("Synced before OnSynced")
	}
	b.OnSynced()
	if !b.Synced() {
		t.Error("not Synced after OnSynced")
	}
	other := &v1.Node{}
	other.Name, other.Labels = "node-b", map[string]string{v1.LabelTopologyZone: "zone-b"}
	b.OnNodeUpdate(nil, other)
	self := &v1.Node{}
	self.Name = thisNode // nil labels
	b.OnNodeUpdate(nil, self)
	b.OnNodeUpdate(nil, nil)
	b.OnServiceUpdate(nil, nil)
	b.OnEndpointSliceUpdate(nil, nil)
	if calls != 1 {
		t.Errorf("OnChange called %d times, want once (for OnSynced)", calls)
	}
	u, _ := b.Snapshot(false)
	if u.State.Zone != "" || u.State.NodeName != thisNode {
		t.Errorf("state node %q zone %q; another node's labels must not count", u.State.NodeName, u.State.Zone)
	}
}

func TestConcurrentHandlersAndSnapshots(t *testing.T) {
	// Handlers racing with Snapshots must converge: after the last change,
	// one more Snapshot equals a fresh Brain's view of the final objects.
	b := newTestBrain(t, Options{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := range 200 {
			name := fmt.Sprintf("s%d", i%20)
			b.OnServiceUpdate(nil, service(name, i%20+1, func(s *v1.Service) { s.ResourceVersion = fmt.Sprint(i) }))
			b.OnEndpointSliceUpdate(nil, bumped(epSlice(name, name+"-1", httpPort(int32(8000+i)), ep(fmt.Sprintf("10.244.2.%d", i%250+1), "node-b", readyCond)), fmt.Sprint(i)))
			if i%7 == 0 {
				b.OnServiceUpdate(service(name, 1), nil)
			}
		}
	}()
	for {
		b.Snapshot(false)
		select {
		case <-done:
			u, _ := b.Snapshot(false)
			fresh := newTestBrain(t, Options{})
			b.mu.Lock()
			for _, s := range b.services {
				fresh.OnServiceUpdate(nil, s)
			}
			for _, bySlice := range b.slices {
				for _, s := range bySlice {
					fresh.OnEndpointSliceUpdate(nil, s)
				}
			}
			b.mu.Unlock()
			want, _ := fresh.Snapshot(true)
			if diff := cmp.Diff(want.State, u.State, cmpopts.EquateComparable(netip.Addr{}, netip.Prefix{})); diff != "" {
				t.Errorf("incremental state differs from a fresh one (-fresh +incremental):\n%s", diff)
			}
			return
		default:
		}
	}
}
