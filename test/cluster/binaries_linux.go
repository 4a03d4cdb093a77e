package cluster

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
)

// The binaries a cluster runs, by file name; each is built from
// github.com/nodenet/nodenet/cmd/<name>.
const (
	AgentBinary = "nodenet-agent"
	CNIBinary   = "nodenet-cni"
	CtlBinary   = "nodenetctl"
)

var binaries = []string{AgentBinary, CNIBinary, CtlBinary}

// buildBinaries builds every binary into dir with the go tool; it needs
// the module's source (the working directory inside it) and takes a few
// seconds with a warm build cache.
func buildBinaries(dir string) error {
	args := []string{"build", "-o", dir + string(filepath.Separator)}
	for _, b := range binaries {
		args = append(args, "github.com/nodenet/nodenet/cmd/"+b)
	}
	if out, err := exec.Command("go", args...).CombinedOutput(); err != nil {
		return fmt.Errorf("go build the nodenet binaries: %w\n%s", err, out)
	}
	return nil
}

// checkBinaries wants every binary in dir.
func checkBinaries(dir string) error {
	for _, b := range binaries {
		if _, err := os.Stat(filepath.Join(dir, b)); err != nil {
			return fmt.Errorf("binary %s: %w (make build puts them in bin/)", b, err)
		}
	}
	return nil
}

// copyFile copies an executable, as a DaemonSet's install step puts
// nodenet-cni into the host's CNI bin dir.
func copyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o755)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// BuildBinaries builds every binary into dir, as New does without
// Options.BinDir; test/kubenode's nodes run the same binaries.
func BuildBinaries(dir string) error { return buildBinaries(dir) }
