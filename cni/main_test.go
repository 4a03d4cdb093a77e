package cni_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"

	"github.com/nodenet/nodenet/test/netnode"
)

// TestMain doubles as the CNI server process of the restart test
// (netnode.NodenetCNIOptions.Process), which kills it.
func TestMain(m *testing.M) {
	netnode.RunChild()
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
