package netnode

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
)

// CNI plugins every environment can use; the reference ones are tool
// entries in go.mod, so they build from the module cache.
var pluginPackages = []string{
	"github.com/nodenet/nodenet/cmd/nodenet-cni",
	"github.com/containernetworking/plugins/plugins/main/bridge",
	"github.com/containernetworking/plugins/plugins/ipam/host-local",
}

// PluginDir builds nodenet-cni and the reference bridge and host-local
// plugins once per environment and returns the directory: a CNI_PATH.
// Built at first use, since go build costs a second or two even warm.
func (e *Env) PluginDir() (string, error) {
	e.pluginsOnce.Do(func() {
		dir, err := os.MkdirTemp("", "netnode-cni-bin-")
		if err != nil {
			e.pluginErr = err
			return
		}
		e.t.Cleanup(func() { os.RemoveAll(dir) })
		args := append([]string{"build", "-o", dir + string(filepath.Separator)}, pluginPackages...)
		if out, err := exec.Command("go", args...).CombinedOutput(); err != nil {
			e.pluginErr = fmt.Errorf("build CNI plugins: %w\n%s", err, out)
			return
		}
		e.pluginDir = dir
	})
	return e.pluginDir, e.pluginErr
}
