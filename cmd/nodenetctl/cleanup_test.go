package main

// These tests run cleanup on files in a temporary directory with a fake
// dataplane (one nftables table that records its removal): the kernel
// side runs in a node namespace in cleanup_linux_test.go. Addresses:
// pod CIDR 10.244.1.0/24, one pod at 10.244.1.3.

import (
	"bytes"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/nodenet/nodenet/agent/status"
	"github.com/nodenet/nodenet/cni"
	"github.com/nodenet/nodenet/config"
)

// fakeNode is a node's files as an agent and the DaemonSet leave them,
// in a temporary directory, with the config naming them.
type fakeNode struct {
	t   *testing.T
	dir string
	cfg string // the config file
	// removed lists the fake dataplane's removals.
	removed []string
	// tables is what the fake dataplane holds.
	tables []string
}

func newFakeNode(t *testing.T, extra string) *fakeNode {
	t.Helper()
	n := &fakeNode{t: t, dir: shortTempDir(t), tables: []string{"nodenet"}}
	n.cfg = filepath.Join(n.dir, "config.yaml")
	n.write("config.yaml", fmt.Sprintf(`apiVersion: nodenet.io/v1alpha1
kind: AgentConfiguration
clusterCIDRs: [10.244.0.0/16]
serviceCIDRs: [10.96.0.0/12]
nodeName: node-a
cni:
  socketPath: %[1]s/run/cni.sock
  confDir: %[1]s/net.d
  binDir: %[1]s/bin
  dataDir: %[1]s/data
%[2]s`, n.dir, extra))
	return n
}

// install leaves what a stopped agent leaves: the conflist, the plugin,
// stale sockets and an IPAM store without allocations; and what is not
// nodenet's beside them.
func (n *fakeNode) install() {
	n.t.Helper()
	conflist, err := cni.RenderConflist(cni.ConflistOptions{Network: "nodenet", SocketPath: filepath.Join(n.dir, "run/cni.sock")})
	if err != nil {
		n.t.Fatal(err)
	}
	n.write("net.d/10-nodenet.conflist", string(conflist))
	n.write("net.d/99-loopback.conflist", `{"cniVersion":"1.0.0","name":"lo","plugins":[{"type":"loopback"}]}`)
	n.write("net.d/.10-nodenet.conflist.tmp-123", "{")
	n.write("bin/nodenet-cni", "#!/bin/true\n")
	n.write("bin/.nodenet-cni.new-456", "#!/bin/tr")
	n.write("bin/loopback", "#!/bin/true\n")
	n.staleSocket("run/cni.sock")
	n.staleSocket("run/" + status.SocketName)
	n.write("data/ipam/nodenet/lock", "")
	n.write("data/ipam/nodenet/last_reserved_ip.0", "10.244.1.3")
}

func (n *fakeNode) write(rel, content string) {
	n.t.Helper()
	path := filepath.Join(n.dir, rel)
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		n.t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		n.t.Fatal(err)
	}
}

// staleSocket leaves a socket file nobody listens on, as an agent that
// stopped does.
func (n *fakeNode) staleSocket(rel string) {
	n.t.Helper()
	path := filepath.Join(n.dir, rel)
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		n.t.Fatal(err)
	}
	l, err := net.Listen("unix", path)
	if err != nil {
		n.t.Fatal(err)
	}
	l.(*net.UnixListener).SetUnlinkOnClose(false)
	l.Close()
}

// files lists every path under the node's directory but the config.
func (n *fakeNode) files() []string {
	n.t.Helper()
	var out []string
	err := filepath.WalkDir(n.dir, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(n.dir, path)
		if rel != "." && rel != "config.yaml" {
			if d.IsDir() {
				rel += "/"
			}
			out = append(out, rel)
		}
		return nil
	})
	if err != nil {
		n.t.Fatal(err)
	}
	return out
}

// cleanup runs nodenetctl cleanup --config on the node with args.
func (n *fakeNode) cleanup(args ...string) result {
	var stdout, stderr bytes.Buffer
	c := &cleaner{
		stdout: &stdout, stderr: &stderr,
		dataplane: func(_ *config.AgentConfiguration, p *cleanupPlan) error {
			for _, table := range n.tables {
				p.add("nftables table inet "+table, func() error {
					n.removed = append(n.removed, table)
					n.tables = slices.DeleteFunc(n.tables, func(s string) bool { return s == table })
					return nil
				})
			}
			return nil
		},
		getenv:   func(string) string { return "" },
		hostname: func() (string, error) { return "node-a", nil },
	}
	code := c.run(append([]string{"--config", n.cfg}, args...))
	return result{code, stdout.String(), stderr.String()}
}

func (n *fakeNode) wantCode(r result, want int) {
	n.t.Helper()
	if r.code != want {
		n.t.Fatalf("exit code %d, want %d\nstdout:\n%s\nstderr:\n%s", r.code, want, r.stdout, r.stderr)
	}
}

// theRest is what stays on the node: the runtime's directories with what
// is not nodenet's.
var theRest = []string{"bin/", "bin/loopback", "net.d/", "net.d/99-loopback.conflist"}

func TestCleanupRemovesWhatTheAgentLeftAndOnlyThat(t *testing.T) {
	n := newFakeNode(t, "")
	n.install()
	r := n.cleanup()
	n.wantCode(r, exitOK)
	d := n.dir
	want := strings.Join([]string{
		"removed conflist " + d + "/net.d/10-nodenet.conflist",
		"removed file " + d + "/net.d/.10-nodenet.conflist.tmp-123 (an unfinished conflist write)",
		"removed CNI plugin " + d + "/bin/nodenet-cni",
		"removed file " + d + "/bin/.nodenet-cni.new-456 (an unfinished plugin install)",
		"removed nftables table inet nodenet",
		"removed socket " + d + "/run/cni.sock",
		"removed socket " + d + "/run/agent.sock",
		"removed socket directory " + d + "/run",
		"removed IPAM store " + d + "/data/ipam (0 allocations)",
		"removed state directory " + d + "/data",
	}, "\n") + "\n"
	if diff := cmp.Diff(want, r.stdout); diff != "" {
		t.Errorf("stdout (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(theRest, n.files()); diff != "" {
		t.Errorf("files after cleanup (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"nodenet"}, n.removed); diff != "" {
		t.Errorf("dataplane removals (-want +got):\n%s", diff)
	}

	t.Run("a second run finds nothing and succeeds", func(t *testing.T) {
		r := n.cleanup()
		n.wantCode(r, exitOK)
		if r.stdout != "nothing of nodenet's is left on this node\n" || r.stderr != "" {
			t.Errorf("second run printed\nstdout:\n%s\nstderr:\n%s", r.stdout, r.stderr)
		}
	})
}

func TestCleanupDryRunChangesNothing(t *testing.T) {
	n := newFakeNode(t, "")
	n.install()
	before := n.files()
	r := n.cleanup("--dry-run")
	n.wantCode(r, exitOK)
	for _, want := range []string{
		"would remove conflist " + n.dir + "/net.d/10-nodenet.conflist\n",
		"would remove nftables table inet nodenet\n",
		"would remove state directory " + n.dir + "/data\n",
	} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("stdout lacks %q:\n%s", want, r.stdout)
		}
	}
	if strings.Contains(r.stdout, "removed ") {
		t.Errorf("a dry run says it removed something:\n%s", r.stdout)
	}
	if diff := cmp.Diff(before, n.files()); diff != "" {
		t.Errorf("files changed (-before +after):\n%s", diff)
	}
	if len(n.removed) > 0 {
		t.Errorf("the dry run removed %v from the dataplane", n.removed)
	}
}

func TestCleanupRefusesWhilePodsUseTheNetwork(t *testing.T) {
	n := newFakeNode(t, "")
	n.install()
	n.write("data/ipam/nodenet/10.244.1.3", "0123456789abcdef0123\r\neth0")
	before := n.files()

	r := n.cleanup()
	n.wantCode(r, exitFailed)
	for _, want := range []string{
		"refusing: pods on this node still use nodenet's network",
		"address 10.244.1.3 held by container 0123456789abc (eth0) in the IPAM store " + n.dir + "/data/ipam/nodenet",
		"Running pods keep their network until the node is drained",
		"kubectl drain NODE",
		"--force",
	} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("stderr lacks %q:\n%s", want, r.stderr)
		}
	}
	if r.stdout != "" || len(n.removed) > 0 {
		t.Errorf("the refused run removed something: stdout:\n%s\ndataplane: %v", r.stdout, n.removed)
	}
	if diff := cmp.Diff(before, n.files()); diff != "" {
		t.Errorf("files changed (-before +after):\n%s", diff)
	}

	t.Run("a dry run lists what would go and says it would refuse", func(t *testing.T) {
		r := n.cleanup("--dry-run")
		n.wantCode(r, exitFailed)
		if !strings.Contains(r.stdout, "would remove IPAM store "+n.dir+"/data/ipam (1 allocation)") || !strings.Contains(r.stderr, "refusing") {
			t.Errorf("stdout:\n%s\nstderr:\n%s", r.stdout, r.stderr)
		}
		if diff := cmp.Diff(before, n.files()); diff != "" {
			t.Errorf("files changed (-before +after):\n%s", diff)
		}
	})

	t.Run("--force removes it all and names the pods it cuts off", func(t *testing.T) {
		r := n.cleanup("--force")
		n.wantCode(r, exitOK)
		if !strings.Contains(r.stderr, "--force: cutting off") || !strings.Contains(r.stderr, "10.244.1.3") {
			t.Errorf("stderr does not name the pod it cuts off:\n%s", r.stderr)
		}
		if diff := cmp.Diff(theRest, n.files()); diff != "" {
			t.Errorf("files after cleanup (-want +got):\n%s", diff)
		}
	})
}

func TestCleanupRefusesWhileTheAgentRuns(t *testing.T) {
	n := newFakeNode(t, "")
	n.install()
	sock := filepath.Join(n.dir, "run", status.SocketName)
	if err := os.Remove(sock); err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	before := n.files()
	for _, args := range [][]string{nil, {"--force"}} {
		r := n.cleanup(args...)
		n.wantCode(r, exitFailed)
		if want := "nodenet-agent still runs on this node (it answers on " + sock + ")"; !strings.Contains(r.stderr, want) {
			t.Errorf("cleanup %v: stderr lacks %q:\n%s", args, want, r.stderr)
		}
	}
	if diff := cmp.Diff(before, n.files()); diff != "" {
		t.Errorf("files changed (-before +after):\n%s", diff)
	}
}

func TestCleanupLeavesWhatIsNotNodenets(t *testing.T) {
	n := newFakeNode(t, "")
	n.install()
	// Someone else's conflist under nodenet's name, and a file of theirs
	// in the data directory.
	n.write("net.d/10-nodenet.conflist", `{"cniVersion":"1.0.0","name":"x","plugins":[{"type":"bridge"}]}`)
	n.write("data/notes.txt", "mine")
	r := n.cleanup()
	n.wantCode(r, exitOK)
	for _, want := range []string{
		"left alone: " + n.dir + "/net.d/10-nodenet.conflist: it does not call nodenet-cni\n",
		"left alone: state directory " + n.dir + "/data: it holds more than nodenet's (notes.txt)\n",
	} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("stdout lacks %q:\n%s", want, r.stdout)
		}
	}
	want := []string{"bin/", "bin/loopback", "data/", "data/notes.txt", "net.d/", "net.d/10-nodenet.conflist", "net.d/99-loopback.conflist"}
	if diff := cmp.Diff(want, n.files()); diff != "" {
		t.Errorf("files after cleanup (-want +got):\n%s", diff)
	}
}

func TestCleanupConfig(t *testing.T) {
	t.Run("errors in fields cleanup does not use are warnings", func(t *testing.T) {
		n := newFakeNode(t, "proxy: {enableDSR: true}\n")
		n.install()
		r := n.cleanup()
		n.wantCode(r, exitOK)
		if !strings.Contains(r.stderr, "warning: proxy.enableDSR") {
			t.Errorf("stderr does not warn about proxy.enableDSR:\n%s", r.stderr)
		}
	})
	t.Run("an invalid name or path it goes by stops it", func(t *testing.T) {
		n := newFakeNode(t, "network: {name: a-name-longer-than-ifnamsiz}\n")
		n.install()
		before := n.files()
		r := n.cleanup()
		n.wantCode(r, exitInvalid)
		if !strings.Contains(r.stderr, "network.name") {
			t.Errorf("stderr does not name network.name:\n%s", r.stderr)
		}
		if diff := cmp.Diff(before, n.files()); diff != "" {
			t.Errorf("files changed (-before +after):\n%s", diff)
		}
	})
	t.Run("without --config it goes by the Linux defaults", func(t *testing.T) {
		c := &cleaner{stderr: &bytes.Buffer{}, getenv: func(string) string { return "" }, hostname: func() (string, error) { return "node-a", nil }}
		cfg, ok := c.loadConfig("")
		if !ok {
			t.Fatal("loading the defaults failed")
		}
		got := []string{cfg.Network.Name, fmt.Sprint(cfg.Network.VXLAN.VNI), cfg.CNI.SocketPath, cfg.CNI.ConfDir, cfg.CNI.ConflistName, cfg.CNI.BinDir, cfg.CNI.DataDir}
		want := []string{"nodenet", "4096", "/var/run/nodenet/cni.sock", "/etc/cni/net.d", "10-nodenet.conflist", "/opt/cni/bin", "/var/lib/nodenet"}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("defaults (-want +got):\n%s", diff)
		}
	})
	t.Run("arguments are a usage error", func(t *testing.T) {
		r := runArgs("cleanup", "now")
		if r.code != exitUsage || !strings.Contains(r.stderr, "unexpected arguments: now") {
			t.Errorf("exit code %d, stderr:\n%s", r.code, r.stderr)
		}
	})
}
