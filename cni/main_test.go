package cni_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"

	"github.com/containernetworking/cni/libcni"
	"github.com/containernetworking/cni/pkg/invoke"
	"github.com/containernetworking/cni/pkg/version"
)

// agentEnv, when set, makes the test binary the restart test's agent.
const agentEnv = "NODENET_CNI_TEST_AGENT"

// TestMain doubles as the "agent process" of the restart test: started
// with agentEnv set, the test binary runs a CNI server until killed.
func TestMain(m *testing.M) {
	if spec := os.Getenv(agentEnv); spec != "" {
		os.Exit(runTestAgent(spec))
	}
	code := m.Run()
	if binDir != "" {
		os.RemoveAll(binDir)
	}
	os.Exit(code)
}

var (
	buildOnce sync.Once
	binDir    string
	buildErr  error
)

// binaries builds nodenet-cni, cnitool and the reference bridge and
// host-local plugins (all from the module cache) into one directory, once
// per test binary, and returns it: the CNI_PATH of every test.
func binaries(t testing.TB) string {
	t.Helper()
	buildOnce.Do(func() {
		binDir, buildErr = os.MkdirTemp("", "nodenet-cni-bin-")
		if buildErr != nil {
			return
		}
		cmd := exec.Command("go", "build", "-o", binDir+string(filepath.Separator),
			"github.com/nodenet/nodenet/cmd/nodenet-cni",
			"github.com/containernetworking/cni/cnitool",
			"github.com/containernetworking/plugins/plugins/main/bridge",
			"github.com/containernetworking/plugins/plugins/ipam/host-local")
		if out, err := cmd.CombinedOutput(); err != nil {
			buildErr = &buildError{err: err, out: string(out)}
		}
	})
	if buildErr != nil {
		t.Fatalf("build the CNI binaries: %v", buildErr)
	}
	return binDir
}

type buildError struct {
	err error
	out string
}

func (e *buildError) Error() string { return e.err.Error() + "\n" + e.out }

// newCNIClient is libcni as a runtime holds it: one client for every
// sandbox. Its executor is set up front, since libcni fills a nil one in
// lazily, which races when ADDs run in parallel.
func newCNIClient(binDir, cacheDir string) *libcni.CNIConfig {
	executor := &invoke.DefaultExec{RawExec: &invoke.RawExec{Stderr: os.Stderr}, PluginDecoder: version.PluginDecoder{}}
	return libcni.NewCNIConfigWithCacheDir([]string{binDir}, cacheDir, executor)
}
