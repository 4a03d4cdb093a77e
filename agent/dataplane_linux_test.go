package agent

// Address plan (a network namespace of the test's own): pod CIDR
// 10.244.1.0/24, cluster CIDR 10.244.0.0/16; pod "web" at 10.244.1.3
// with hostPort 30080/tcp → 8080.

import (
	"context"
	"errors"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	current "github.com/containernetworking/cni/pkg/types/100"
	"k8s.io/klog/v2/ktesting"

	"github.com/nodenet/nodenet/agent/status"
	"github.com/nodenet/nodenet/cni"
	"github.com/nodenet/nodenet/cni/hostport"
	"github.com/nodenet/nodenet/internal/nsexec"
	"github.com/nodenet/nodenet/internal/testroot"
	"github.com/nodenet/nodenet/overlay/egress"
	"github.com/nodenet/nodenet/proxy/nftables"
)

// nopWiring is a pod wiring that wires nothing: the hostPort decorator's
// inner wiring when only the hostPort table matters.
type nopWiring struct{}

func (nopWiring) Ready(context.Context, *cni.NodeNetwork) error { return nil }
func (nopWiring) Add(context.Context, *cni.NodeNetwork, *cni.Pod) (*current.Result, error) {
	return &current.Result{CNIVersion: current.ImplementedSpecVersion}, nil
}
func (nopWiring) Check(context.Context, *cni.NodeNetwork, *cni.Pod, *current.Result) error {
	return nil
}
func (nopWiring) Del(context.Context, *cni.NodeNetwork, *cni.Pod) error            { return nil }
func (nopWiring) List(context.Context, *cni.NodeNetwork) ([]cni.Attachment, error) { return nil, nil }

// TestTheStatusDumpListsNodenetsTablesWithoutNFT fills the egress and
// hostPort tables of a namespace, puts an nft that fails and leaves a
// trace first on PATH, and dumps: every table has its section (the
// proxy's, never written, says it is absent), the sections show the
// kernel's chains, rule comments and map elements, and nft never ran.
func TestTheStatusDumpListsNodenetsTablesWithoutNFT(t *testing.T) {
	testroot.Require(t, "a network namespace and nftables")
	dir := t.TempDir()
	trace := filepath.Join(dir, "ran")
	script := "#!/bin/sh\necho \"$@\" >> " + trace + "\nexit 1\n"
	if err := os.WriteFile(filepath.Join(dir, "nft"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", dir+string(os.PathListSeparator)+os.Getenv("PATH"))
	if p, err := exec.LookPath("nft"); err != nil || p != filepath.Join(dir, "nft") {
		t.Fatalf("the failing nft is not first on PATH: %q %v", p, err)
	}

	node, err := nsexec.New()
	if err != nil {
		t.Fatal(err)
	}
	defer node.Close()
	ctx := context.Background()
	log := ktesting.NewLogger(t, ktesting.NewConfig())
	var sections []status.Section
	err = nsexec.Do(node, func() error {
		eg, err := egress.New(egress.Options{Logger: log})
		if err != nil {
			return err
		}
		spec := egress.Spec{PodCIDRs: []netip.Prefix{prefix("10.244.1.0/24")}, ClusterCIDRs: []netip.Prefix{prefix("10.244.0.0/16")}}
		if _, err := eg.Ensure(ctx, spec); err != nil {
			return err
		}
		hp, err := hostport.New(hostport.Options{Inner: nopWiring{}, Logger: &log})
		if err != nil {
			return err
		}
		nw := &cni.NodeNetwork{Name: "nodenet", PodCIDRs: []netip.Prefix{prefix("10.244.1.0/24")}}
		pod := &cni.Pod{
			Attachment: cni.Attachment{ContainerID: "c-web", IfName: "eth0"}, Namespace: "default", Name: "web",
			Addresses:    []cni.Address{{IP: netip.MustParsePrefix("10.244.1.3/24")}},
			PortMappings: []cni.PortMapping{{HostPort: 30080, ContainerPort: 8080, Protocol: "tcp"}},
		}
		if _, err := hp.Add(ctx, nw, pod); err != nil {
			return err
		}
		sections, err = dumpNFTables(ctx)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	text := map[string]string{}
	var titles []string
	for _, s := range sections {
		titles = append(titles, s.Title)
		text[s.Title] = s.Text
		if testing.Verbose() {
			t.Logf("%s:\n%s", s.Title, s.Text)
		}
	}
	wantTitles := []string{"nftables table inet " + nftables.TableName, "nftables table inet " + hostport.DefaultTableName,
		"nftables table inet " + egress.TableName}
	if strings.Join(titles, "\n") != strings.Join(wantTitles, "\n") {
		t.Fatalf("sections %q, want %q", titles, wantTitles)
	}
	if got := text[wantTitles[0]]; got != "(absent)\n" {
		t.Errorf("the proxy's table, never written: %q, want it said absent", got)
	}
	for title, wants := range map[string][]string{
		wantTitles[1]: {
			"table inet nodenet-hostport {",
			"\tchain output {\n\t\ttype nat hook output priority -100\n",
			"\tmap hostports-v4 {\n\t\ttype inet_proto . inet_service : ipv4_addr . inet_service\n",
			"\t\t1 element\n\t\ttcp . 30080 : 10.244.1.3 . 8080 comment \"c-web/eth0 default/web\"\n",
		},
		wantTitles[2]: {
			"table inet nodenet-egress {",
			"\tchain postrouting {\n\t\ttype nat hook postrouting priority 100\n",
			"\t\t1 rule\n\t\trule handle ",
			"comment \"IPv4 pods to outside the cluster; ruleset ",
		},
	} {
		for _, want := range wants {
			if !strings.Contains(text[title], want) {
				t.Errorf("%s lacks %q:\n%s", title, want, text[title])
			}
		}
	}
	if ran, err := os.ReadFile(trace); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("nft ran: %q (%v)", ran, err)
	}
}
