package e2e

// Address plan: see flannel_linux_test.go.

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/nodenet/nodenet/test/apiserver"
	"github.com/nodenet/nodenet/test/netnode"
)

// flanneldVersion is what hack/build-flanneld.sh builds; keep the two in
// step.
const flanneldVersion = "v0.28.4"

// envFlanneld names the flanneld binary explicitly.
const envFlanneld = "NODENET_FLANNELD"

const flanneldHint = "build it with hack/build-flanneld.sh (or set " + envFlanneld + ")"

// requireFlanneld returns the flanneld binary: $NODENET_FLANNELD, else the
// build cache. When it is missing the test is skipped, except under
// CI=true, where it fails: CI must never pass by skipping.
func requireFlanneld(t *testing.T) string {
	t.Helper()
	path := os.Getenv(envFlanneld)
	if path == "" {
		root, err := apiserver.CacheRoot()
		if err != nil {
			t.Fatalf("locate the build cache: %v", err)
		}
		path = filepath.Join(root, "flanneld-"+flanneldVersion, "flanneld")
	}
	info, err := os.Stat(path)
	switch {
	case err == nil && !info.IsDir():
		return path
	case os.Getenv("CI") == "true":
		t.Fatalf("flanneld missing at %s under CI=true (%v); %s", path, err, flanneldHint)
	default:
		t.Skipf("skipping: flanneld missing at %s (%v); %s", path, err, flanneldHint)
	}
	return ""
}

// flanneld is real flanneld running in a node's namespace with the kube
// subnet manager, the way the kube-flannel DaemonSet runs it.
type flanneld struct {
	node       *netnode.Node
	subnetFile string
	logPath    string
	proc       *netnode.Process
}

// flannelNetConf is kube-flannel's net-conf.json for our cluster: the
// vxlan backend on the VNI and port nodenet uses.
const flannelNetConf = `{"Network":"` + clusterCIDR + `","Backend":{"Type":"vxlan","VNI":4096,"Port":4789}}`

// startFlanneld runs bin on node against the cluster's apiserver and kills
// it in t.Cleanup; its log is printed when t fails.
func startFlanneld(t *testing.T, c *cluster, node *netnode.Node, bin string) *flanneld {
	t.Helper()
	dir := t.TempDir()
	f := &flanneld{node: node, subnetFile: filepath.Join(dir, "subnet.env"), logPath: filepath.Join(dir, "flanneld.log")}
	kubeconfig := filepath.Join(dir, "kubeconfig")
	if err := c.api.WriteKubeconfig(kubeconfig); err != nil {
		t.Fatal(err)
	}
	netConf := filepath.Join(dir, "net-conf.json")
	if err := os.WriteFile(netConf, []byte(flannelNetConf), 0o644); err != nil {
		t.Fatal(err)
	}
	log, err := os.Create(f.logPath)
	if err != nil {
		t.Fatal(err)
	}
	cmd := node.Command(context.Background(), bin,
		"--kube-subnet-mgr",
		"--kubeconfig-file="+kubeconfig,
		"--iface=eth0",
		"--ip-masq=false",
		"--net-config-path="+netConf,
		"--subnet-file="+f.subnetFile,
	)
	cmd.Env = append(os.Environ(), "NODE_NAME="+node.Name)
	cmd.Stdout, cmd.Stderr = log, log
	// Killed with the test binary even if cleanups never run.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	proc, err := netnode.StartProcess(cmd)
	if err != nil {
		t.Fatal(err)
	}
	f.proc = proc
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-f.proc.Done()
		log.Close()
		if t.Failed() {
			out, _ := os.ReadFile(f.logPath)
			t.Logf("flanneld log (%s):\n%s", f.logPath, out)
		}
	})
	return f
}

// subnetEnv waits for flanneld's subnet file and returns its variables
// (FLANNEL_NETWORK, FLANNEL_SUBNET, FLANNEL_MTU, FLANNEL_IPMASQ).
func (f *flanneld) subnetEnv(t *testing.T) map[string]string {
	t.Helper()
	vars := map[string]string{}
	exited := false
	err := netnode.Eventually(t.Context(), converge, func(context.Context) error {
		select {
		case <-f.proc.Done():
			exited = true
			return nil // no point waiting
		default:
		}
		file, err := os.Open(f.subnetFile)
		if err != nil {
			return err
		}
		defer file.Close()
		s := bufio.NewScanner(file)
		for s.Scan() {
			if k, v, ok := strings.Cut(s.Text(), "="); ok {
				vars[k] = v
			}
		}
		if vars["FLANNEL_SUBNET"] == "" || vars["FLANNEL_MTU"] == "" {
			return fmt.Errorf("%s is not complete yet", f.subnetFile)
		}
		return s.Err()
	})
	if exited {
		t.Fatalf("flanneld on %s exited: %v", f.node.Name, f.proc.Err())
	}
	if err != nil {
		t.Fatalf("flanneld on %s: %v", f.node.Name, err)
	}
	return vars
}
