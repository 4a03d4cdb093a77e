// Address plan: one dual-stack node, 10.244.1.0/24 (.2 is the source VIP)
// and fd00:10:244:1::/64 (::2 is the source VIP). Goroutines and processes
// allocate for shared attachments (shared-N, every worker asks for the
// same ones) and their own (<worker>-N).
package ipam

import (
	"bufio"
	"bytes"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// dualStack is the node's ranges in every concurrency test.
func dualStack() []Range {
	return []Range{
		rng("10.244.1.0/24", "10.244.1.2"),
		rng("fd00:10:244:1::/64", "fd00:10:244:1::2"),
	}
}

// attachmentIPs collects what every worker was given, and checks that an
// attachment got the same addresses everywhere and no address went to two
// attachments.
type attachmentIPs struct {
	mu    sync.Mutex
	byAtt map[string][]netip.Addr
	errs  []string
}

func newAttachmentIPs() *attachmentIPs { return &attachmentIPs{byAtt: map[string][]netip.Addr{}} }

func (c *attachmentIPs) add(worker, att string, ips []netip.Addr) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if prev, ok := c.byAtt[att]; ok && !cmp.Equal(prev, ips, netipCmp) {
		c.errs = append(c.errs, fmt.Sprintf("%s got %v for %s, another worker got %v", worker, ips, att, prev))
		return
	}
	c.byAtt[att] = ips
}

// check fails t unless every attachment holds exactly the addresses the
// workers saw, with no address shared, and the store holds nothing else.
func (c *attachmentIPs) check(t *testing.T, list []Allocation, wantAttachments int) {
	t.Helper()
	for _, e := range c.errs {
		t.Error(e)
	}
	if len(c.byAtt) != wantAttachments {
		t.Errorf("workers reported %d attachments, want %d", len(c.byAtt), wantAttachments)
	}
	owner := map[netip.Addr]string{}
	for att, ips := range c.byAtt {
		for _, ip := range ips {
			if prev, dup := owner[ip]; dup {
				t.Errorf("%s was given to both %s and %s", ip, prev, att)
			}
			owner[ip] = att
		}
	}
	onDisk := map[netip.Addr]string{}
	for _, al := range list {
		onDisk[al.IP] = al.ContainerID + "/" + al.IfName
	}
	if diff := cmp.Diff(owner, onDisk, netipCmp); diff != "" {
		t.Errorf("store content differs from what workers were given (-given +on disk):\n%s", diff)
	}
}

func TestConcurrentGoroutinesNeverShareAnAddress(t *testing.T) {
	dataDir := t.TempDir()
	// Two Allocators on one directory, so both locks are in play: the
	// goroutines of one Allocator share its mutex (and its flock'd file),
	// the two Allocators exclude each other through the file lock.
	allocators := []*Allocator{newAllocator(t, dataDir, dualStack()...), newAllocator(t, dataDir, dualStack()...)}
	const goroutines, shared = 100, 10
	seen := newAttachmentIPs()
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Go(func() {
			a := allocators[g%len(allocators)]
			for _, id := range []string{fmt.Sprintf("pod-%d", g), fmt.Sprintf("shared-%d", g%shared)} {
				got, err := a.Allocate(id, "eth0")
				if err != nil {
					t.Errorf("Allocate(%s): %v", id, err)
					return
				}
				seen.add(fmt.Sprint("goroutine ", g), id+"/eth0", ipsOf(got))
			}
		})
	}
	wg.Wait()
	seen.check(t, mustList(t, allocators[0]), goroutines+shared)
}

// The cross-process test: children are this test binary, re-run with
// childEnv set, so TestMain hands them to runChild.
const (
	childEnv        = "NODENET_IPAM_TEST_CHILD"
	childDataDirEnv = "NODENET_IPAM_TEST_DATADIR"
	childStartEnv   = "NODENET_IPAM_TEST_START"

	childOwnPods    = 40
	childSharedPods = 50
	childWorkers    = 4
)

func TestConcurrentProcessesNeverShareAnAddress(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	dataDir := t.TempDir()
	start := filepath.Join(t.TempDir(), "start")
	const processes = 3

	type child struct {
		cmd            *exec.Cmd
		stdout, stderr bytes.Buffer
	}
	children := make([]*child, processes)
	for i := range children {
		c := &child{cmd: exec.Command(os.Args[0], "-test.run=^$")}
		c.cmd.Env = append(os.Environ(), childEnv+"="+fmt.Sprint("proc", i), childDataDirEnv+"="+dataDir, childStartEnv+"="+start)
		c.cmd.Stdout, c.cmd.Stderr = &c.stdout, &c.stderr
		if err := c.cmd.Start(); err != nil {
			t.Fatalf("start child %d: %v", i, err)
		}
		children[i] = c
	}
	// Let every child get going before any allocates, so they overlap.
	if err := os.WriteFile(start, nil, 0o600); err != nil {
		t.Fatal(err)
	}

	seen := newAttachmentIPs()
	for i, c := range children {
		if err := c.cmd.Wait(); err != nil {
			t.Fatalf("child %d: %v\n%s", i, err, c.stderr.String())
		}
		sc := bufio.NewScanner(&c.stdout)
		for sc.Scan() {
			f := strings.Fields(sc.Text()) // "<attachment> <ip> <ip>"
			ips := make([]netip.Addr, 0, len(f)-1)
			for _, s := range f[1:] {
				ips = append(ips, addr(s))
			}
			seen.add(fmt.Sprint("process ", i), f[0], ips)
		}
	}
	a := newAllocator(t, dataDir, dualStack()...)
	seen.check(t, mustList(t, a), processes*childOwnPods+childSharedPods)
}

// runChild allocates, with a few goroutines, for the child's own pods and
// for the shared ones (in its own random order), printing what it got.
func runChild() int {
	name := os.Getenv(childEnv)
	a, err := New(Options{DataDir: os.Getenv(childDataDirEnv), Network: testNetwork, Ranges: dualStack()})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer a.Close()

	var ids []string
	for i := range childOwnPods {
		ids = append(ids, name+"-"+strconv.Itoa(i))
	}
	for i := range childSharedPods {
		ids = append(ids, "shared-"+strconv.Itoa(i))
	}
	rand.Shuffle(len(ids), func(i, j int) { ids[i], ids[j] = ids[j], ids[i] })

	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(time.Millisecond) {
		if _, err := os.Stat(os.Getenv(childStartEnv)); err == nil {
			break
		}
		if time.Now().After(deadline) {
			fmt.Fprintln(os.Stderr, "no start signal")
			return 1
		}
	}

	var (
		mu     sync.Mutex
		out    []string
		failed bool
		wg     sync.WaitGroup
	)
	for w := range childWorkers {
		wg.Go(func() {
			for i := w; i < len(ids); i += childWorkers {
				got, err := a.Allocate(ids[i], "eth0")
				mu.Lock()
				if err != nil {
					fmt.Fprintf(os.Stderr, "Allocate(%s): %v\n", ids[i], err)
					failed = true
				} else {
					out = append(out, fmt.Sprintf("%s/eth0 %s %s", ids[i], got[0].IP, got[1].IP))
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	fmt.Println(strings.Join(out, "\n"))
	if failed {
		return 1
	}
	return 0
}
