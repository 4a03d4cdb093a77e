package hostport

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"

	current "github.com/containernetworking/cni/pkg/types/100"
	"sigs.k8s.io/knftables"

	"github.com/nodenet/nodenet/cni"
)

// fakeInner is a stateful pod wiring: the set of wired attachments.
type fakeInner struct {
	mu       sync.Mutex
	wired    map[cni.Attachment]bool
	addErr   error
	delErr   error
	readyErr error
}

func newFakeInner() *fakeInner { return &fakeInner{wired: map[cni.Attachment]bool{}} }

func (f *fakeInner) Ready(context.Context, *cni.NodeNetwork) error { return f.readyErr }

func (f *fakeInner) Add(_ context.Context, _ *cni.NodeNetwork, pod *cni.Pod) (*current.Result, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.addErr != nil {
		return nil, f.addErr
	}
	f.wired[pod.Attachment] = true
	return &current.Result{CNIVersion: current.ImplementedSpecVersion}, nil
}

func (f *fakeInner) Check(_ context.Context, _ *cni.NodeNetwork, pod *cni.Pod, _ *current.Result) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.wired[pod.Attachment] {
		return fmt.Errorf("inner: %s/%s is not wired", pod.ContainerID, pod.IfName)
	}
	return nil
}

func (f *fakeInner) Del(_ context.Context, _ *cni.NodeNetwork, pod *cni.Pod) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.delErr != nil {
		return f.delErr
	}
	delete(f.wired, pod.Attachment)
	return nil
}

func (f *fakeInner) List(context.Context, *cni.NodeNetwork) ([]cni.Attachment, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []cni.Attachment
	for a := range f.wired {
		out = append(out, a)
	}
	sortAttachments(out)
	return out, nil
}

func (f *fakeInner) isWired(a cni.Attachment) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.wired[a]
}

func sortAttachments(atts []cni.Attachment) {
	sort.Slice(atts, func(i, j int) bool {
		return atts[i].ContainerID+"/"+atts[i].IfName < atts[j].ContainerID+"/"+atts[j].IfName
	})
}

// countingNFT counts the nft commands run through it, and fails the
// transactions failRun picks (knftables' Fake is atomic: a failed
// transaction changes nothing, as in the kernel).
type countingNFT struct {
	knftables.Interface
	mu      sync.Mutex
	runs    int
	lists   int
	failRun func(tx *knftables.Transaction) error
}

var errInjected = errors.New("injected nft failure")

func (c *countingNFT) Run(ctx context.Context, tx *knftables.Transaction) error {
	c.mu.Lock()
	c.runs++
	fail := c.failRun
	c.mu.Unlock()
	if fail != nil {
		if err := fail(tx); err != nil {
			return err
		}
	}
	return c.Interface.Run(ctx, tx)
}

func (c *countingNFT) ListElements(ctx context.Context, objectType, name string) ([]*knftables.Element, error) {
	c.count()
	return c.Interface.ListElements(ctx, objectType, name)
}

func (c *countingNFT) List(ctx context.Context, objectType string) ([]string, error) {
	c.count()
	return c.Interface.List(ctx, objectType)
}

func (c *countingNFT) count() {
	c.mu.Lock()
	c.lists++
	c.mu.Unlock()
}

// calls returns how many nft commands ran and resets the count.
func (c *countingNFT) calls() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := c.runs + c.lists
	c.runs, c.lists = 0, 0
	return n
}

// failElementTxs fails the next n transactions that touch map elements.
func failElementTxs(n int) func(tx *knftables.Transaction) error {
	var mu sync.Mutex
	return func(tx *knftables.Transaction) error {
		if !strings.Contains(tx.String(), " element ") || strings.Contains(tx.String(), "add table") {
			return nil
		}
		mu.Lock()
		defer mu.Unlock()
		if n == 0 {
			return nil
		}
		n--
		return errInjected
	}
}

// fakeConntrack records the keys whose UDP flows were cleared.
type fakeConntrack struct {
	mu      sync.Mutex
	cleared []string
}

func (f *fakeConntrack) clearUDP(k key) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.cleared = append(f.cleared, k.String())
	return nil
}

// harness is a Wiring over a fake inner wiring, knftables' Fake (counted)
// and a fake conntrack.
type harness struct {
	t     testing.TB
	fake  *knftables.Fake
	nft   *countingNFT
	inner *fakeInner
	ct    *fakeConntrack
	w     *Wiring
	nw    *cni.NodeNetwork
}

func newHarness(t testing.TB) *harness {
	return newHarnessOn(t, knftables.NewFake(knftables.InetFamily, DefaultTableName))
}

// newHarnessOn is a fresh Wiring (a restarted agent) over an existing
// Fake kernel.
func newHarnessOn(t testing.TB, fake *knftables.Fake) *harness {
	t.Helper()
	h := &harness{t: t, fake: fake, inner: newFakeInner(), ct: &fakeConntrack{}, nw: testNetwork()}
	h.nft = &countingNFT{Interface: fake}
	w, err := New(Options{Inner: h.inner, NFT: h.nft})
	if err != nil {
		t.Fatal(err)
	}
	w.ct = h.ct
	h.w = w
	return h
}

func testNetwork() *cni.NodeNetwork {
	return &cni.NodeNetwork{
		Name:     "nodenet",
		PodCIDRs: []netip.Prefix{netip.MustParsePrefix("10.244.1.0/24"), netip.MustParsePrefix("fd00:10:244:1::/64")},
		Gateways: []netip.Addr{netip.MustParseAddr("10.244.1.1"), netip.MustParseAddr("fd00:10:244:1::1")},
		NodeIPs:  []netip.Addr{netip.MustParseAddr("192.168.1.11")},
	}
}

// testPod is pod name (namespace default) with container ID "c-<name>",
// interface eth0, the given addresses (pod CIDR prefix lengths) and
// hostPorts.
func testPod(name string, addrs []string, pms ...cni.PortMapping) *cni.Pod {
	p := &cni.Pod{
		Attachment:   cni.Attachment{ContainerID: "c-" + name, IfName: "eth0"},
		Namespace:    "default",
		Name:         name,
		PortMappings: pms,
	}
	for _, a := range addrs {
		ip := netip.MustParseAddr(a)
		bits := 24
		if ip.Is6() {
			bits = 64
		}
		p.Addresses = append(p.Addresses, cni.Address{IP: netip.PrefixFrom(ip, bits)})
	}
	return p
}

func tcp(hostPort, containerPort int) cni.PortMapping {
	return cni.PortMapping{HostPort: hostPort, ContainerPort: containerPort, Protocol: "tcp"}
}

func onIP(pm cni.PortMapping, hostIP string) cni.PortMapping {
	pm.HostIP = hostIP
	return pm
}

func withProto(pm cni.PortMapping, proto string) cni.PortMapping {
	pm.Protocol = proto
	return pm
}

// elements returns the map elements in the Fake, one line each:
// "<map> <key> : <value> # <comment>", sorted.
func (h *harness) elements() []string {
	h.fake.RLock()
	defer h.fake.RUnlock()
	var out []string
	if h.fake.Table == nil {
		return out
	}
	for name, m := range h.fake.Table.Maps {
		for _, e := range m.Elements {
			line := fmt.Sprintf("%s %s : %s", name, strings.Join(e.Key, " . "), strings.Join(e.Value, " . "))
			if e.Comment != nil {
				line += " # " + *e.Comment
			}
			out = append(out, line)
		}
	}
	slices.Sort(out)
	return out
}

func (h *harness) add(p *cni.Pod) error {
	_, err := h.w.Add(context.Background(), h.nw, p)
	return err
}

func (h *harness) mustAdd(p *cni.Pod) {
	h.t.Helper()
	if err := h.add(p); err != nil {
		h.t.Fatalf("Add %s: %v", p.Name, err)
	}
}

func (h *harness) del(p *cni.Pod) error {
	return h.w.Del(context.Background(), h.nw, p)
}

func (h *harness) check(p *cni.Pod) error {
	return h.w.Check(context.Background(), h.nw, p, &current.Result{})
}
