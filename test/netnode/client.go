package netnode

import (
	"os"

	"github.com/containernetworking/cni/libcni"
	"github.com/containernetworking/cni/pkg/invoke"
	"github.com/containernetworking/cni/pkg/version"
)

// NewCNIClient is libcni as a runtime holds it: one client for every
// sandbox, running the plugins in binDir. Its executor is set up front,
// since libcni fills a nil one in lazily, which races when ADDs run in
// parallel. Runtime uses one; tests of other platforms' pod paths (the
// HNS simulator) can too.
func NewCNIClient(binDir, cacheDir string) *libcni.CNIConfig {
	exec := &invoke.DefaultExec{RawExec: &invoke.RawExec{Stderr: os.Stderr}, PluginDecoder: version.PluginDecoder{}}
	return libcni.NewCNIConfigWithCacheDir([]string{binDir}, cacheDir, exec)
}
